#pragma once
// The MPFR and MPFI matrix products on packed rows: the fast path of
// multiply<Real> and multiply<Interval>.
//
// Each operand is first copied, row by row, into flat arrays so the inner loop
// streams contiguous memory instead of chasing one heap block per number. A
// number x = M 2^(e - 64 L) (M: L limbs; for intervals, each endpoint) is stored
// pre-shifted as
//
//   x = M' 2^(64 w - 64 L),   w = floor(e / 64),   M' = M 2^(e mod 64) (L + 1 limbs),
//
// so the exact product of two numbers is M'_x M'_y (2 L + 2 limbs) at a whole
// limb offset, w_x + w_y, and is added to the accumulator without any shift.
// Positive and negative products go to two unsigned accumulators (no borrow
// chains), subtracted at the end; the unit is 2^(64 (wbot_i + wbot_j) - 128 L)
// from the two rows' lowest words, so no bit is ever dropped and each entry is
// the exact sum rounded once: to nearest for Real; for Interval the sums of the
// lower and of the upper endpoint products (ends chosen by sign, as MPFI does),
// rounded down and up, as in linalg/detail/fixed_point_dot.hpp.
// Entries whose rows' exponents span more than FixedPointSum::max_span_bits
// (which bounds the accumulators), hold an infinity or NaN, whose operands do
// not share one limb count, or (intervals) whose two rows both hold an interval
// across zero take that header's per-entry dot, so the result is the same
// function of the inputs either way.

#include <attnrank/linalg/detail/fixed_point_dot.hpp>
#include <attnrank/numbers/detail/interval_ends.hpp>
#include <attnrank/numbers/detail/parallel.hpp>

#include <algorithm>
#include <vector>

namespace attnrank {
namespace detail {

/// A matrix of MPFR numbers (Real: one per entry) or MPFI endpoints (Interval:
/// two per entry, left then right) of one limb count, row by row, pre-shifted.
class PackedRows {
 public:
  /// Packs the rows of M (its columns when `transposed`: the rows of M^T);
  /// false when its numbers differ in limb count.
  bool pack(const Matrix<Real>& M, bool transposed) {
    return pack_numbers(M, transposed, 1, [](const Real& v, int) { return v.backend().data(); });
  }
  bool pack(const Matrix<Interval>& M, bool transposed) {
    return pack_numbers(M, transposed, 2, [](const Interval& v, int end) -> mpfr_srcptr {
      return end == 0 ? &v.backend().data()->left : &v.backend().data()->right;
    });
  }

  struct RowInfo {
    long top = 0, bottom = 0;  ///< range of the words w of the nonzero numbers
    bool nonzero = false;      ///< some number is nonzero
    bool special = false;      ///< some number is infinite or NaN
    bool straddle = false;     ///< some interval has left < 0 < right
  };

  /// Limbs of each number's significand (the stored ones have one more).
  mp_size_t limbs() const { return limbs_; }
  const RowInfo& row(Eigen::Index i) const { return rows_info_[static_cast<std::size_t>(i)]; }
  /// Number `end` (0; for intervals 0 = left, 1 = right) of entry (i, k).
  const mp_limb_t* significand_at(Eigen::Index i, Eigen::Index k, int end = 0) const {
    return &significands_[index(i, k, end) * (static_cast<std::size_t>(limbs_) + 1)];
  }
  long word_at(Eigen::Index i, Eigen::Index k, int end = 0) const { return words_[index(i, k, end)]; }
  /// -1, 0 (zero) or 1.
  int sign_at(Eigen::Index i, Eigen::Index k, int end = 0) const { return signs_[index(i, k, end)]; }
  /// For intervals: 1 when left >= 0, -1 when right <= 0, 0 when 0 is inside.
  int sign_class_at(Eigen::Index i, Eigen::Index k) const {
    return interval_sign_class(sign_at(i, k, 0), sign_at(i, k, 1));
  }

 private:
  std::size_t index(Eigen::Index i, Eigen::Index k, int end) const {
    return static_cast<std::size_t>((i * cols_ + k) * ends_ + end);
  }

  template <class T, class Number>
  bool pack_numbers(const Matrix<T>& M, bool transposed, int ends, Number number) {
    rows_ = transposed ? M.cols() : M.rows();
    cols_ = transposed ? M.rows() : M.cols();
    ends_ = ends;
    rows_info_.assign(static_cast<std::size_t>(rows_), RowInfo{});
    if (rows_ == 0 || cols_ == 0) return true;
    limbs_ = significand_limbs(number(M(0, 0), 0));
    const std::size_t stride = static_cast<std::size_t>(limbs_) + 1;
    const auto count = static_cast<std::size_t>(rows_ * cols_ * ends);
    significands_.assign(count * stride, 0);
    words_.assign(count, 0);
    signs_.assign(count, 0);
    const long bits = static_cast<long>(GMP_NUMB_BITS);
    for (Eigen::Index i = 0; i < rows_; ++i) {
      RowInfo& row = rows_info_[static_cast<std::size_t>(i)];
      for (Eigen::Index k = 0; k < cols_; ++k) {
        const T& entry = transposed ? M(k, i) : M(i, k);
        for (int end = 0; end < ends; ++end) {
          mpfr_srcptr x = number(entry, end);
          if (significand_limbs(x) != limbs_) return false;
          const std::size_t at = index(i, k, end);
          if (mpfr_zero_p(x)) continue;
          if (!mpfr_regular_p(x)) {
            row.special = true;
            continue;
          }
          const long e = mpfr_custom_get_exp(x);
          const long w = e >= 0 ? e / bits : -((-e + bits - 1) / bits);
          const auto shift = static_cast<unsigned>(e - w * bits);
          mp_limb_t* target = &significands_[at * stride];
          if (shift == 0)
            std::copy_n(significand(x), limbs_, target);
          else
            target[limbs_] = mpn_lshift(target, significand(x), limbs_, shift);
          signs_[at] = mpfr_signbit(x) ? -1 : 1;
          words_[at] = w;
          row.top = row.nonzero ? std::max(row.top, w) : w;
          row.bottom = row.nonzero ? std::min(row.bottom, w) : w;
          row.nonzero = true;
        }
        if (ends == 2 && sign_at(i, k, 0) < 0 && sign_at(i, k, 1) > 0) row.straddle = true;
      }
    }
    return true;
  }

  Eigen::Index rows_ = 0, cols_ = 0;
  int ends_ = 1;
  mp_size_t limbs_ = 0;
  std::vector<mp_limb_t> significands_;
  std::vector<long> words_;
  std::vector<signed char> signs_;
  std::vector<RowInfo> rows_info_;
};

/// r (2W limbs) = a b (W limbs each), schoolbook on 128-bit words.
template <int W>
inline void multiply_limbs(mp_limb_t* r, const mp_limb_t* a, const mp_limb_t* b) {
  using Wide = unsigned __int128;
  for (int i = 0; i < 2 * W; ++i) r[i] = 0;
  for (int i = 0; i < W; ++i) {
    mp_limb_t carry = 0;
    for (int j = 0; j < W; ++j) {
      const Wide t = static_cast<Wide>(a[i]) * b[j] + r[i + j] + carry;
      r[i + j] = static_cast<mp_limb_t>(t);
      carry = static_cast<mp_limb_t>(t >> 64);
    }
    r[i + W] = carry;
  }
}

/// target += p (m limbs), carrying on up; the caller guarantees the room.
inline void add_limbs(mp_limb_t* target, const mp_limb_t* p, int m) {
  mp_limb_t carry = 0;
  for (int t = 0; t < m; ++t) {
    const mp_limb_t s = target[t] + p[t];
    const mp_limb_t c1 = s < p[t];
    target[t] = s + carry;
    carry = c1 | (target[t] < carry);
  }
  for (int t = m; carry != 0; ++t) carry = ++target[t] == 0;
}

/// Adds the exact product x y (stored = L + 1 limbs each; L = 0: any count,
/// through GMP) at limb `offset` of `positive` or `negative` by its sign.
template <int L>
inline void add_product(std::vector<mp_limb_t>& positive, std::vector<mp_limb_t>& negative, mp_limb_t* product,
                        const mp_limb_t* x, const mp_limb_t* y, mp_size_t stored, int sign, std::size_t offset) {
  if constexpr (L > 0)
    multiply_limbs<L + 1>(product, x, y);
  else
    mpn_mul_n(product, x, y, stored);
  add_limbs((sign > 0 ? positive : negative).data() + offset, product, static_cast<int>(2 * stored));
}

/// out = (positive - negative) 2^exponent rounded in mode rnd (positive is
/// overwritten).
inline void round_difference(mpfr_ptr out, std::vector<mp_limb_t>& positive, const std::vector<mp_limb_t>& negative,
                             long exponent, mpfr_rnd_t rnd) {
  const auto width = static_cast<mp_size_t>(positive.size());
  const bool below = mpn_cmp(positive.data(), negative.data(), width) < 0;
  if (below)
    mpn_sub_n(positive.data(), negative.data(), positive.data(), width);
  else
    mpn_sub_n(positive.data(), positive.data(), negative.data(), width);
  round_scaled_integer(out, positive.data(), width, below, exponent, rnd);
}

/// The accumulators of one thread: positive and negative parts of the sum (of
/// the lower ends' sum, for intervals) and of the upper ends' sum.
struct PackedAccumulators {
  std::vector<mp_limb_t> positive, negative, upper_positive, upper_negative, product;
  void clear(std::size_t limbs, bool interval) {
    positive.assign(limbs, 0);
    negative.assign(limbs, 0);
    if (interval) {
      upper_positive.assign(limbs, 0);
      upper_negative.assign(limbs, 0);
    }
  }
};

/// out = row i of a . row j of b, exactly summed, rounded to nearest. L is the
/// limb count of both operands (0: any); the accumulators are cleared, with room
/// for every product at its offset plus a carry limb.
template <int L>
inline void packed_dot(mpfr_ptr out, const PackedRows& a, Eigen::Index i, const PackedRows& b, Eigen::Index j,
                       Eigen::Index n, PackedAccumulators& acc) {
  const mp_size_t stored = (L > 0 ? L : a.limbs()) + 1;
  const long low = a.row(i).bottom + b.row(j).bottom;
  for (Eigen::Index k = 0; k < n; ++k) {
    const int sign = a.sign_at(i, k) * b.sign_at(j, k);
    if (sign == 0) continue;
    const auto offset = static_cast<std::size_t>(a.word_at(i, k) + b.word_at(j, k) - low);
    add_product<L>(acc.positive, acc.negative, acc.product.data(), a.significand_at(i, k), b.significand_at(j, k),
                   stored, sign, offset);
  }
  const long bits = static_cast<long>(GMP_NUMB_BITS);
  round_difference(out, acc.positive, acc.negative, bits * low - 2 * bits * static_cast<long>(stored - 1), MPFR_RNDN);
}

/// out = [sum of lower end products rounded down, sum of upper ones rounded up]
/// for row i of a and row j of b (intervals): the exact interval dot product
/// rounded outward, as linalg/detail/fixed_point_dot.hpp's. No term may have both
/// intervals straddling zero.
template <int L>
inline void packed_interval_dot(mpfi_ptr out, const PackedRows& a, Eigen::Index i, const PackedRows& b,
                                Eigen::Index j, Eigen::Index n, PackedAccumulators& acc) {
  const mp_size_t stored = (L > 0 ? L : a.limbs()) + 1;
  const long low = a.row(i).bottom + b.row(j).bottom;
  for (Eigen::Index k = 0; k < n; ++k) {
    const int* ends = interval_ends[a.sign_class_at(i, k) + 1][b.sign_class_at(j, k) + 1];
    const int lower_sign = a.sign_at(i, k, ends[0]) * b.sign_at(j, k, ends[1]);
    if (lower_sign != 0)
      add_product<L>(acc.positive, acc.negative, acc.product.data(), a.significand_at(i, k, ends[0]),
                     b.significand_at(j, k, ends[1]), stored, lower_sign,
                     static_cast<std::size_t>(a.word_at(i, k, ends[0]) + b.word_at(j, k, ends[1]) - low));
    const int upper_sign = a.sign_at(i, k, ends[2]) * b.sign_at(j, k, ends[3]);
    if (upper_sign != 0)
      add_product<L>(acc.upper_positive, acc.upper_negative, acc.product.data(), a.significand_at(i, k, ends[2]),
                     b.significand_at(j, k, ends[3]), stored, upper_sign,
                     static_cast<std::size_t>(a.word_at(i, k, ends[2]) + b.word_at(j, k, ends[3]) - low));
  }
  const long bits = static_cast<long>(GMP_NUMB_BITS);
  const long exponent = bits * low - 2 * bits * static_cast<long>(stored - 1);
  round_difference(&out->left, acc.positive, acc.negative, exponent, MPFR_RNDD);
  round_difference(&out->right, acc.upper_positive, acc.upper_negative, exponent, MPFR_RNDU);
  // MPFI's convention for zero endpoints: [+0, ...] and [..., -0].
  if (mpfr_zero_p(&out->left)) mpfr_set_zero(&out->left, 1);
  if (mpfr_zero_p(&out->right)) mpfr_set_zero(&out->right, -1);
}

/// One packed entry: packed_dot for Real, packed_interval_dot for Interval, with
/// the limb count as a template argument where it is small.
template <class T>
inline void packed_entry(T& out, const PackedRows& a, Eigen::Index i, const PackedRows& b, Eigen::Index j,
                         Eigen::Index n, PackedAccumulators& acc) {
  const auto run = [&]<int L>() {
    if constexpr (std::is_same_v<T, Real>)
      packed_dot<L>(out.backend().data(), a, i, b, j, n, acc);
    else
      packed_interval_dot<L>(out.backend().data(), a, i, b, j, n, acc);
  };
  switch (a.limbs()) {
    case 1: run.template operator()<1>(); break;
    case 2: run.template operator()<2>(); break;
    case 3: run.template operator()<3>(); break;
    case 4: run.template operator()<4>(); break;
    default: run.template operator()<0>(); break;
  }
}

inline void set_zero(Real& out) { mpfr_set_zero(out.backend().data(), 1); }
inline void set_zero(Interval& out) {
  mpfr_set_zero(&out.backend().data()->left, 1);
  mpfr_set_zero(&out.backend().data()->right, -1);
}

/// C = A B for A (r x n) and B (n x c), or A B^T for B (c x n) when
/// `b_transposed`; C has the result's shape; T is Real or Interval. Rows of C
/// are dealt to threads (numbers/detail/parallel.hpp); every entry is computed the same
/// way on any thread.
template <class T>
inline void packed_product(const Matrix<T>& A, const Matrix<T>& B, bool b_transposed, Matrix<T>& C) {
  constexpr bool interval = std::is_same_v<T, Interval>;
  const Eigen::Index n = A.cols(), rows = A.rows(), cols = b_transposed ? B.rows() : B.cols();
  PackedRows pa, pb;
  const bool packed = pa.pack(A, false) && pb.pack(B, !b_transposed) && pa.limbs() == pb.limbs();
  // Does some entry need the per-entry dot (an infinity or NaN, mixed
  // precisions, two rows spanning too much, or two rows of intervals that both
  // straddle zero)? Then it needs row-major copies, made here, before the
  // threads start.
  const auto widest = [](const PackedRows& p, Eigen::Index count) {
    long spread = 0;
    for (Eigen::Index i = 0; i < count; ++i)
      if (p.row(i).nonzero) spread = std::max(spread, p.row(i).top - p.row(i).bottom);
    return spread;
  };
  const auto any_row = [](const PackedRows& p, Eigen::Index count, bool PackedRows::RowInfo::*flag) {
    for (Eigen::Index i = 0; i < count; ++i)
      if (p.row(i).*flag) return true;
    return false;
  };
  // Limbs of the accumulators for rows i and j: the products' offsets, the
  // products themselves, and a carry limb.
  const auto accumulator_limbs = [&](long word_spread) {
    return static_cast<std::size_t>(word_spread + 2 * (pa.limbs() + 1) + 1);
  };
  const long bits = static_cast<long>(GMP_NUMB_BITS);
  // (This path is exact at any spread; the cap only bounds the accumulators.)
  const auto fits = [&](long word_spread) { return bits * word_spread <= FixedPointSum::max_span_bits; };
  bool per_entry = !packed;
  if (packed)
    per_entry = any_row(pa, rows, &PackedRows::RowInfo::special) || any_row(pb, cols, &PackedRows::RowInfo::special) ||
                !fits(widest(pa, rows) + widest(pb, cols)) ||
                (any_row(pa, rows, &PackedRows::RowInfo::straddle) && any_row(pb, cols, &PackedRows::RowInfo::straddle));
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMajor a_rows, bt_rows;
  if (per_entry) {
    a_rows = A;
    if (b_transposed)
      bt_rows = B;
    else
      bt_rows = B.transpose();
  }
  const double operations = (interval ? 2.0 : 1.0) * static_cast<double>(rows) * static_cast<double>(cols) *
                            static_cast<double>(n);
  for_row_blocks(rows, operations, [&](long begin, long end) {
    DotWorkspace workspace;
    T term;
    PackedAccumulators acc;
    acc.product.resize(static_cast<std::size_t>(2 * pa.limbs() + 2));
    for (Eigen::Index i = begin; i < end; ++i) {
      for (Eigen::Index j = 0; j < cols; ++j) {
        if (packed && n > 0) {
          const PackedRows::RowInfo &ri = pa.row(i), &rj = pb.row(j);
          if (!ri.special && !rj.special && !(ri.straddle && rj.straddle)) {
            if (!ri.nonzero || !rj.nonzero) {
              set_zero(C(i, j));
              continue;
            }
            const long spread = ri.top + rj.top - ri.bottom - rj.bottom;
            if (fits(spread)) {
              acc.clear(accumulator_limbs(spread), interval);
              packed_entry(C(i, j), pa, i, pb, j, n, acc);
              continue;
            }
          }
        }
        if (n == 0) {
          set_zero(C(i, j));
          continue;
        }
        dot(C(i, j).backend().data(), a_rows.data() + i * n, bt_rows.data() + j * n, n, workspace,
            term.backend().data());
      }
    }
  });
}

}  // namespace detail
}  // namespace attnrank
