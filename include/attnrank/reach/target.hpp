#pragma once
// A target attention pattern: what makes a matrix one (square, entries >= 0, no
// zero row), where its zeros are, and its rows normalised to sum to 1, enclosed in
// MPFI or in doubles, or approximated for pictures (approx_: not proven). A target
// with a zero entry is produced by no finite scores (softmax is positive); the
// scores a positive target asks for are in reach/centered_log.hpp.

#include <attnrank/reach/centered_log.hpp>

#include <attnrank/io/double_tensor.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/rational_enclosure.hpp>
#include <attnrank/error.hpp>
#include <attnrank/numbers/scalar_traits.hpp>
#include <attnrank/numbers/tiers.hpp>
#include <attnrank/numbers/balls.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace attnrank {

/// Checks that A is a square, non-empty target with entries >= 0 and no zero
/// row; throws input_error naming `source`, the row, the column and the value.
/// Zero entries are allowed here (they make the target unreachable, which is an
/// answer, not an input error).
void validate_target(const Matrix<Rational>& A, const std::string& source);

/// The same checks, in the same words, on a pattern of doubles (the exact values
/// they store; no rationals made): first that every entry is finite (a NaN or
/// infinity is named, column by column, as exact_of_doubles names it), then
/// validate_target's.
void validate_target(const Eigen::MatrixXd& A, const std::string& source);

/// Positions (row, column), 0-based, of the zero entries of A.
std::vector<std::pair<Eigen::Index, Eigen::Index>> zero_entries(const Matrix<Rational>& A);

/// A with each row divided by its sum, in MPFI: the attention pattern a head
/// produces when it produces A.
Matrix<Interval> normalized_target(const Matrix<Rational>& A);

/// A / rowsums in double, uncertified (for pictures): rows normalised exactly
/// first, so rows scaled by 10^400 come out right; entries below the double
/// range become 0.
Eigen::MatrixXd approx_normalized_target(const Matrix<Rational>& A);

/// Certified bounds of Â = A with rows normalised, in doubles: each entry's lower
/// (upper) end over the row sum's upper (lower) end, rounded outward; the row sum
/// is the sum of the entries' ends in directed rounding (MPFR at 64 bits from the
/// exact sum for a row with entries outside the normal double range). Zeros stay
/// exactly 0; upper ends are at most 1.
BoundsMatrix normalized_target_bounds(const Matrix<Rational>& A);

namespace detail {
inline int entry_sign(const Rational& q) { return mpq_sgn(q.backend().data()); }
inline int entry_sign(double x) { return (x > 0) - (x < 0); }
inline std::string entry_decimal(const Rational& q) { return exact_decimal_text(q); }
inline std::string entry_decimal(double x) { return shortest_decimal(x); }

/// validate_target's checks on rationals or on finite doubles, in one wording.
template <class Derived>
void validate_target_entries(const Eigen::MatrixBase<Derived>& A, const std::string& source) {
  if (A.rows() == 0) throw input_error(source + ": the target is empty");
  if (A.rows() != A.cols())
    throw input_error(source + ": the target must be square (n x n attention weights), this one is " +
                      std::to_string(A.rows()) + " x " + std::to_string(A.cols()));
  // Column by column, as the entries are stored (row by row strode a million
  // rationals 32 KB apart at n = 1024); the problem reported is still the first
  // in reading order: the first row with one, its first negative entry, else
  // the row itself when it holds no positive entry.
  const Eigen::Index n = A.rows(), none = A.cols();
  std::vector<Eigen::Index> first_negative(static_cast<std::size_t>(n), none);
  std::vector<bool> positive(static_cast<std::size_t>(n), false);
  for (Eigen::Index j = 0; j < A.cols(); ++j)
    for (Eigen::Index i = 0; i < n; ++i) {
      const int sign = entry_sign(A(i, j));
      if (sign > 0) positive[static_cast<std::size_t>(i)] = true;
      else if (sign < 0 && first_negative[static_cast<std::size_t>(i)] == none) first_negative[static_cast<std::size_t>(i)] = j;
    }
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index j = first_negative[static_cast<std::size_t>(i)];
    if (j != none) {
      const std::string shown = entry_decimal(A(i, j));
      throw input_error(entry_text(source, static_cast<long>(i), static_cast<long>(j)) + " is " + shown +
                            ": attention weights cannot be negative (" +
                            "weights are probabilities, softmax outputs: scores or logits need a softmax first)",
                        source, static_cast<long>(i + 1), static_cast<long>(j + 1));
    }
    if (!positive[static_cast<std::size_t>(i)])
      throw input_error(row_text(source, static_cast<long>(i)) + " is all zeros (a softmax row sums to 1)", source,
                        static_cast<long>(i + 1));
  }
}
}  // namespace detail

inline void validate_target(const Matrix<Rational>& A, const std::string& source) {
  detail::validate_target_entries(A, source);
}

inline void validate_target(const Eigen::MatrixXd& A, const std::string& source) {
  require_finite(A, source);
  detail::validate_target_entries(A, source);
}

inline std::vector<std::pair<Eigen::Index, Eigen::Index>> zero_entries(const Matrix<Rational>& A) {
  std::vector<std::pair<Eigen::Index, Eigen::Index>> z;
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j)
      if (mpq_sgn(A(i, j).backend().data()) == 0) z.emplace_back(i, j);  // no temporary Rational(0)
  return z;
}

inline Matrix<Interval> normalized_target(const Matrix<Rational>& A) {
  // Entry times the row's 1 / sum, both enclosed: a few ulps wider than the
  // rounded exact quotient, without n^2 rational divisions (each a gcd).
  Matrix<Interval> N(A.rows(), A.cols());
  Interval inverse_sum;
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    Rational s = 0;
    for (Eigen::Index j = 0; j < A.cols(); ++j) s += A(i, j);
    mpfi_set_q(inverse_sum.backend().data(), s.backend().data());
    mpfi_inv(inverse_sum.backend().data(), inverse_sum.backend().data());
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      mpfi_ptr entry = N(i, j).backend().data();
      mpfi_set_q(entry, A(i, j).backend().data());
      mpfi_mul(entry, entry, inverse_sum.backend().data());
    }
  }
  return N;
}

inline Eigen::MatrixXd approx_normalized_target(const Matrix<Rational>& A) {
  Eigen::MatrixXd T(A.rows(), A.cols());
  // Rows on the cores: each entry is a rational division (a gcd), ~0.3 us.
  detail::for_row_blocks(static_cast<long>(A.rows()), static_cast<double>(A.size()) / 5, [&](long begin, long end) {
    for (Eigen::Index i = begin; i < end; ++i) {
      Rational sum = 0;
      for (Eigen::Index j = 0; j < A.cols(); ++j) sum += A(i, j);
      for (Eigen::Index j = 0; j < A.cols(); ++j) T(i, j) = scalar_traits<double>::from_rational(Rational(A(i, j) / sum));
    }
  });
  return T;
}

namespace detail {
/// normalized_target_bounds for row i from the exact row sum, in MPFR: rows far
/// outside the double range.
inline void normalized_row_bounds_mpfr(const Matrix<Rational>& A, Eigen::Index i, BoundsMatrix& T) {
  mpfr_t a, sum_up, sum_down;
  mpfr_inits2(64, a, sum_up, sum_down, static_cast<mpfr_ptr>(nullptr));
  Rational s = 0;
  for (Eigen::Index j = 0; j < A.cols(); ++j) s += A(i, j);
  mpfr_set_q(sum_up, s.backend().data(), MPFR_RNDU);
  mpfr_set_q(sum_down, s.backend().data(), MPFR_RNDD);
  for (Eigen::Index j = 0; j < A.cols(); ++j) {
    mpfr_set_q(a, A(i, j).backend().data(), MPFR_RNDD);
    mpfr_div(a, a, sum_up, MPFR_RNDD);
    T.lo(i, j) = mpfr_get_d(a, MPFR_RNDD);
    mpfr_set_q(a, A(i, j).backend().data(), MPFR_RNDU);
    mpfr_div(a, a, sum_down, MPFR_RNDU);
    T.hi(i, j) = std::min(1.0, mpfr_get_d(a, MPFR_RNDU));
  }
  mpfr_clears(a, sum_up, sum_down, static_cast<mpfr_ptr>(nullptr));
}
}  // namespace detail

inline BoundsMatrix normalized_target_bounds(const Matrix<Rational>& A) {
  const Eigen::Index n = A.rows(), m = A.cols();
  BoundsMatrix T{Eigen::MatrixXd(n, m), Eigen::MatrixXd(n, m)};
  std::vector<bool> in_range(static_cast<std::size_t>(n), true);
  for (Eigen::Index j = 0; j < m; ++j)
    for (Eigen::Index i = 0; i < n; ++i) {
      const auto [a, b] = rational_enclosure(A(i, j));
      T.lo(i, j) = a;
      T.hi(i, j) = b;
      if (!(a == 0 || (a >= 0x1p-1000 && b <= 0x1p1000))) in_range[static_cast<std::size_t>(i)] = false;
    }
  {
    UpwardRounding up;
    // Row sums: s_hi = fl_up(sum of upper ends), -s_lo = fl_up(sum of -lower ends).
    const Eigen::VectorXd sum_hi = T.hi.rowwise().sum(), neg_sum_lo = (-T.lo).rowwise().sum();
    for (Eigen::Index i = 0; i < n; ++i) {
      const double s_hi = sum_hi(i), s_lo = -neg_sum_lo(i);
      if (!(s_lo >= 0x1p-1000 && s_hi <= 0x1p1000)) in_range[static_cast<std::size_t>(i)] = false;
      if (!in_range[static_cast<std::size_t>(i)]) continue;
      for (Eigen::Index j = 0; j < m; ++j) {
        double hi = T.hi(i, j) / s_lo;            // >= a_hi / s_lo
        double neg_lo = -T.lo(i, j) / s_hi;       // >= -a_lo / s_hi
        detail::rounding_barrier(hi);
        detail::rounding_barrier(neg_lo);
        T.hi(i, j) = std::min(1.0, hi);
        T.lo(i, j) = -neg_lo;
      }
    }
  }
  for (Eigen::Index i = 0; i < n; ++i)
    if (!in_range[static_cast<std::size_t>(i)]) detail::normalized_row_bounds_mpfr(A, i, T);
  return T;
}

}  // namespace attnrank
