#pragma once
// The MPFR matrix product on packed rows: the fast path of multiply<Real>.
//
// Each operand is first copied, row by row, into flat arrays so the inner loop
// streams contiguous memory instead of chasing one heap block per number. An
// entry x = M 2^(e - 64 L) (M: L limbs) is stored pre-shifted as
//
//   x = M' 2^(64 w - 64 L),   w = floor(e / 64),   M' = M 2^(e mod 64) (L + 1 limbs),
//
// so the exact product of two entries is M'_x M'_y (2 L + 2 limbs) at a whole
// limb offset, w_x + w_y, and is added to the accumulator without any shift.
// Positive and negative products go to two unsigned accumulators (no borrow
// chains), subtracted at the end; the unit is 2^(64 (wbot_i + wbot_j) - 128 L)
// from the two rows' lowest words, so no bit is ever dropped and each entry is
// the exact sum rounded once to nearest, as in detail/fixed_point_dot.hpp.
// Entries whose rows' exponents span more than FixedPointSum::max_span_bits
// (which bounds the accumulators), hold an infinity or NaN, or whose operands do
// not share one limb count take that header's per-entry dot, so the result is
// the same function of the inputs either way.

#include <attnrank/detail/fixed_point_dot.hpp>
#include <attnrank/detail/parallel.hpp>

#include <algorithm>
#include <vector>

namespace attnrank {
namespace detail {

/// A matrix of MPFR numbers of one limb count, row by row, pre-shifted.
class PackedRows {
 public:
  /// Packs the rows of M (its columns when `transposed`: the rows of M^T);
  /// false when its entries differ in limb count.
  bool pack(const Matrix<Real>& M, bool transposed) {
    rows_ = transposed ? M.cols() : M.rows();
    cols_ = transposed ? M.rows() : M.cols();
    rows_info_.assign(static_cast<std::size_t>(rows_), RowInfo{});
    if (rows_ == 0 || cols_ == 0) return true;
    limbs_ = significand_limbs(M(0, 0).backend().data());
    const std::size_t stride = static_cast<std::size_t>(limbs_) + 1;
    const auto count = static_cast<std::size_t>(rows_ * cols_);
    significands_.assign(count * stride, 0);
    words_.assign(count, 0);
    signs_.assign(count, 0);
    const long bits = static_cast<long>(GMP_NUMB_BITS);
    for (Eigen::Index i = 0; i < rows_; ++i) {
      RowInfo& row = rows_info_[static_cast<std::size_t>(i)];
      for (Eigen::Index k = 0; k < cols_; ++k) {
        mpfr_srcptr x = (transposed ? M(k, i) : M(i, k)).backend().data();
        if (significand_limbs(x) != limbs_) return false;
        const auto at = static_cast<std::size_t>(i * cols_ + k);
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
    }
    return true;
  }

  struct RowInfo {
    long top = 0, bottom = 0;  ///< range of the words w of the nonzero entries
    bool nonzero = false;      ///< some entry is nonzero
    bool special = false;      ///< some entry is infinite or NaN
  };

  /// Limbs of each entry's significand (the stored ones have one more).
  mp_size_t limbs() const { return limbs_; }
  const RowInfo& row(Eigen::Index i) const { return rows_info_[static_cast<std::size_t>(i)]; }
  const mp_limb_t* significand_at(Eigen::Index i, Eigen::Index k) const {
    return &significands_[static_cast<std::size_t>(i * cols_ + k) * (static_cast<std::size_t>(limbs_) + 1)];
  }
  long word_at(Eigen::Index i, Eigen::Index k) const { return words_[static_cast<std::size_t>(i * cols_ + k)]; }
  /// -1, 0 (zero) or 1.
  int sign_at(Eigen::Index i, Eigen::Index k) const { return signs_[static_cast<std::size_t>(i * cols_ + k)]; }

 private:
  Eigen::Index rows_ = 0, cols_ = 0;
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

/// out = row i of a . row j of b, exactly summed, rounded to nearest. L is the
/// limb count of both operands (0: any, through GMP's mpn_mul_n); `positive`
/// and `negative` have room for every product at its offset plus a carry limb.
template <int L>
inline void packed_dot(mpfr_ptr out, const PackedRows& a, Eigen::Index i, const PackedRows& b, Eigen::Index j,
                       Eigen::Index n, std::vector<mp_limb_t>& positive, std::vector<mp_limb_t>& negative,
                       std::vector<mp_limb_t>& product) {
  const mp_size_t stored = (L > 0 ? L : a.limbs()) + 1;
  const int m = static_cast<int>(2 * stored);
  const long low = a.row(i).bottom + b.row(j).bottom;
  std::fill(positive.begin(), positive.end(), 0);
  std::fill(negative.begin(), negative.end(), 0);
  for (Eigen::Index k = 0; k < n; ++k) {
    const int sign = a.sign_at(i, k) * b.sign_at(j, k);
    if (sign == 0) continue;
    if constexpr (L > 0)
      multiply_limbs<L + 1>(product.data(), a.significand_at(i, k), b.significand_at(j, k));
    else
      mpn_mul_n(product.data(), a.significand_at(i, k), b.significand_at(j, k), stored);
    const auto offset = static_cast<std::size_t>(a.word_at(i, k) + b.word_at(j, k) - low);
    add_limbs((sign > 0 ? positive : negative).data() + offset, product.data(), m);
  }
  const auto width = static_cast<mp_size_t>(positive.size());
  const bool below = mpn_cmp(positive.data(), negative.data(), width) < 0;
  if (below)
    mpn_sub_n(positive.data(), negative.data(), positive.data(), width);
  else
    mpn_sub_n(positive.data(), positive.data(), negative.data(), width);
  const long bits = static_cast<long>(GMP_NUMB_BITS);
  round_scaled_integer(out, positive.data(), width, below, bits * low - 2 * bits * static_cast<long>(stored - 1),
                       MPFR_RNDN);
}

/// C = A B for A (r x n) and B (n x c), or A B^T for B (c x n) when
/// `b_transposed`; C has the result's shape. Rows of C are dealt to threads
/// (detail/parallel.hpp); every entry is computed the same way on any thread.
inline void packed_product(const Matrix<Real>& A, const Matrix<Real>& B, bool b_transposed, Matrix<Real>& C) {
  const Eigen::Index n = A.cols(), rows = A.rows(), cols = b_transposed ? B.rows() : B.cols();
  PackedRows pa, pb;
  const bool packed = pa.pack(A, false) && pb.pack(B, !b_transposed) && pa.limbs() == pb.limbs();
  // Does some entry need the per-entry dot (an infinity or NaN, mixed
  // precisions, or two rows spanning too much)? Then it needs row-major copies,
  // made here, before the threads start.
  bool per_entry = !packed;
  const auto widest = [](const PackedRows& p, Eigen::Index count) {
    long spread = 0;
    for (Eigen::Index i = 0; i < count; ++i)
      if (p.row(i).nonzero) spread = std::max(spread, p.row(i).top - p.row(i).bottom);
    return spread;
  };
  const auto any_special = [](const PackedRows& p, Eigen::Index count) {
    for (Eigen::Index i = 0; i < count; ++i)
      if (p.row(i).special) return true;
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
  if (packed)
    per_entry = any_special(pa, rows) || any_special(pb, cols) || !fits(widest(pa, rows) + widest(pb, cols));
  using RowMajor = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMajor a_rows, bt_rows;
  if (per_entry) {
    a_rows = A;
    if (b_transposed)
      bt_rows = B;
    else
      bt_rows = B.transpose();
  }
  const double operations = static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(n);
  for_row_blocks(rows, operations, [&](long begin, long end) {
    DotWorkspace workspace;
    Real term;
    std::vector<mp_limb_t> positive, negative, product(static_cast<std::size_t>(2 * pa.limbs() + 2));
    for (Eigen::Index i = begin; i < end; ++i) {
      for (Eigen::Index j = 0; j < cols; ++j) {
        mpfr_ptr out = C(i, j).backend().data();
        if (packed && n > 0) {
          const PackedRows::RowInfo &ri = pa.row(i), &rj = pb.row(j);
          if (!ri.special && !rj.special) {
            if (!ri.nonzero || !rj.nonzero) {
              mpfr_set_zero(out, 1);
              continue;
            }
            const long spread = ri.top + rj.top - ri.bottom - rj.bottom;
            if (fits(spread)) {
              positive.resize(accumulator_limbs(spread));
              negative.resize(accumulator_limbs(spread));
              switch (pa.limbs()) {
                case 1: packed_dot<1>(out, pa, i, pb, j, n, positive, negative, product); break;
                case 2: packed_dot<2>(out, pa, i, pb, j, n, positive, negative, product); break;
                case 3: packed_dot<3>(out, pa, i, pb, j, n, positive, negative, product); break;
                case 4: packed_dot<4>(out, pa, i, pb, j, n, positive, negative, product); break;
                default: packed_dot<0>(out, pa, i, pb, j, n, positive, negative, product); break;
              }
              continue;
            }
          }
        }
        if (n == 0) {
          mpfr_set_zero(out, 1);
          continue;
        }
        dot(out, a_rows.data() + i * n, bt_rows.data() + j * n, n, workspace, term.backend().data());
      }
    }
  });
}

}  // namespace detail
}  // namespace attnrank
