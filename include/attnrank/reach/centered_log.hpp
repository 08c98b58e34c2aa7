#pragma once
// Softmax inversion (docs/math.md): the scores a target asks for.
//
// For a positive n x n target A (rows need not sum to 1: softmax normalises, and
// scaling row r by s_r adds log s_r to row r of log A, a row constant),
//     softmax(S) = A / rowsums   iff   S = log A + c 1^T for some c in R^n.
// The centered log log(A) C, C = I - 1 1^T / n, is the member with zero row sums;
// the floor of the target is rank(log(A) C) = min over c of rank(log A + c 1^T).
//
// This header encloses log(A) C: as a ball of doubles (logs proven at double
// speed, numbers/certified_log.hpp; centering by directed rounding) for big
// targets, or in MPFI at the working precision; and approximates it in double for
// the numeric witnesses (named approx_: not proven).

#include <attnrank/numbers/certified_log.hpp>
#include <attnrank/numbers/decimal.hpp>
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

/// A ball of doubles containing log(A) C (A positive): logs enclosed a few ulps
/// wide, rounded outward, then centered with directed rounding.
template <class Derived>
BallMatrix certified_centered_log_ball(const Eigen::MatrixBase<Derived>& A);
/// Entrywise bounds lo <= log A <= hi (A positive), a few ulps apart.
template <class Derived>
BoundsMatrix certified_log_bounds(const Eigen::MatrixBase<Derived>& A);
/// The same where counted(i, j), and exactly [0, 0] (the log of 1) elsewhere,
/// without copying A: a masked target's logs on its allowed set.
template <class Derived, class Counted>
BoundsMatrix certified_log_bounds_where(const Eigen::MatrixBase<Derived>& A, const Counted& counted);
/// A ball containing L C for every L within the bounds: each row's mean
/// subtracted, in directed rounding. certified_centered_log_ball(A) is
/// certified_row_centered(certified_log_bounds(A)).
BallMatrix certified_row_centered(const BoundsMatrix& L);

/// log(A) C in MPFI at the current precision.
Matrix<Interval> centered_log(const Matrix<Rational>& A);

/// log q of a positive rational in double, uncertified, accurate to a few ulps
/// of max(1, |log q|) even when q itself is far outside the double range
/// (3e-4000, 10^400): q = q' 2^e with q' in [1/2, 2), log q = log q' + e log 2.
double approx_log(const Rational& q);

/// log(A) C in double, uncertified: the matrix a numeric witness factors. Any
/// positive rational entries (no double conversion of A itself; rows far from 1
/// in magnitude are first scaled exactly by a power of two, which changes only
/// a row constant); a zero entry counts as 10^-12 of its row's largest entry.
Eigen::MatrixXd approx_centered_log(const Matrix<Rational>& A);

template <class Derived>
BoundsMatrix certified_log_bounds(const Eigen::MatrixBase<Derived>& A) {
  return certified_log_bounds_where(A, [](Eigen::Index, Eigen::Index) { return true; });
}

template <class Derived, class Counted>
BoundsMatrix certified_log_bounds_where(const Eigen::MatrixBase<Derived>& A, const Counted& counted) {
  const Eigen::Index n = A.rows(), m = A.cols();
  // Each entry enclosed in doubles, then their logs enclosed at double speed
  // (numbers/certified_log.hpp). An entry whose lower end is not a normal double
  // (10^-400 and the like) is done in MPFR from the rational: one rounded-down
  // quotient and one rounded-down log, with x_lo = RNDD(a) <= a < x_lo + ulp(x_lo)
  // and log increasing,
  //   lo = RNDD(log x_lo) <= log a <= log x_lo + ulp(x_lo) / x_lo <= lo + ulp(lo) + 2^-52,
  // and the upper end is that sum rounded up.
  const Derived& entries = A.derived();  // MatrixBase::operator() would copy each Rational
  BoundsMatrix x{Eigen::MatrixXd(n, m), Eigen::MatrixXd(n, m)};
  std::vector<std::pair<Eigen::Index, Eigen::Index>> wide;
  for (Eigen::Index j = 0; j < m; ++j)
    for (Eigen::Index i = 0; i < n; ++i) {
      if (!counted(i, j)) {
        x.lo(i, j) = x.hi(i, j) = 1;
        continue;
      }
      const auto [a, b] = rational_enclosure(entries(i, j));
      if (!(a >= 0x1p-1000 && b <= 0x1p1000)) {
        wide.emplace_back(i, j);
        x.lo(i, j) = x.hi(i, j) = 1;  // replaced below
      } else {
        x.lo(i, j) = a;
        x.hi(i, j) = b;
      }
    }
  BoundsMatrix out{Eigen::MatrixXd(n, m), Eigen::MatrixXd(n, m)};
  Eigen::MatrixXd& lo = out.lo;
  Eigen::MatrixXd& hi = out.hi;
  log_bounds(x.lo.data(), x.hi.data(), lo.data(), hi.data(), static_cast<std::size_t>(lo.size()));
  for (Eigen::Index j = 0; j < m; ++j)
    for (Eigen::Index i = 0; i < n; ++i)
      if (!counted(i, j)) lo(i, j) = hi(i, j) = 0;  // log 1, exactly (whatever log_bounds rounds)
  if (wide.empty()) return out;
  mpfr_t q, l;
  mpfr_inits2(53, q, l, static_cast<mpfr_ptr>(nullptr));
  for (const auto& [i, j] : wide) {
    const int inexact_q = mpfr_set_q(q, entries(i, j).backend().data(), MPFR_RNDD);
    const int inexact_l = mpfr_log(l, q, MPFR_RNDD);
    lo(i, j) = mpfr_get_d(l, MPFR_RNDD);  // exact: l has 53 bits
    if (inexact_l == 0 && inexact_q == 0) {
      hi(i, j) = lo(i, j);
    } else {
      mpfr_nextabove(l);
      if (inexact_q != 0) mpfr_add_d(l, l, 0x1p-52, MPFR_RNDU);
      hi(i, j) = mpfr_get_d(l, MPFR_RNDU);
    }
  }
  mpfr_clears(q, l, static_cast<mpfr_ptr>(nullptr));
  return out;
}

inline BallMatrix certified_row_centered(const BoundsMatrix& L) {
  const Eigen::Index n = L.lo.rows(), m = L.lo.cols();
  const Eigen::MatrixXd& lo = L.lo;
  const Eigen::MatrixXd& hi = L.hi;
  // log(A) C = L - (L 1 / n) 1^T: row means enclosed, subtracted, outward.
  BoundsMatrix centered;
  {
    UpwardRounding up;
    // Rounding upward, fl(s / m) >= s / m whatever the sign of s: an upper bound
    // of the row mean from the upper ends, and of minus the mean from the lower ends.
    Eigen::VectorXd mean_hi(n), neg_mean_lo(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      double s_hi = 0, s_neg_lo = 0;
      for (Eigen::Index j = 0; j < m; ++j) {
        s_hi += hi(i, j);
        s_neg_lo += -lo(i, j);
      }
      mean_hi(i) = s_hi / static_cast<double>(m);
      neg_mean_lo(i) = s_neg_lo / static_cast<double>(m);
    }
    centered.hi = hi;
    centered.lo = -lo;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < m; ++j) {
        centered.hi(i, j) = hi(i, j) + neg_mean_lo(i);     // hi - mean_lo, up
        centered.lo(i, j) = -lo(i, j) + mean_hi(i);        // -(lo - mean_hi), up
      }
    detail::rounding_barrier(centered.lo);
    detail::rounding_barrier(centered.hi);
  }
  centered.lo = -centered.lo;
  return to_ball(centered);
}

template <class Derived>
BallMatrix certified_centered_log_ball(const Eigen::MatrixBase<Derived>& A) {
  return certified_row_centered(certified_log_bounds(A));
}

inline Matrix<Interval> centered_log(const Matrix<Rational>& A) {
  const Eigen::Index n = A.rows(), m = A.cols();
  Matrix<Interval> L(n, m);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < m; ++j) L(i, j) = log(scalar_traits<Interval>::from_rational(A(i, j)));
  for (Eigen::Index i = 0; i < n; ++i) {
    Interval mean = 0;
    for (Eigen::Index j = 0; j < m; ++j) mean += L(i, j);
    mean /= m;
    for (Eigen::Index j = 0; j < m; ++j) L(i, j) -= mean;
  }
  return L;
}

namespace detail {
/// e with 2^(e-1) <= |q| < 2^(e+1) roughly: the difference of the bit lengths.
inline long binary_exponent(const Rational& q) {
  return static_cast<long>(mpz_sizeinbase(mpq_numref(q.backend().data()), 2)) -
         static_cast<long>(mpz_sizeinbase(mpq_denref(q.backend().data()), 2));
}
/// q / 2^e, exactly.
inline Rational scaled_by_power_of_two(const Rational& q, long e) {
  Rational out;
  if (e >= 0) mpq_div_2exp(out.backend().data(), q.backend().data(), static_cast<mp_bitcnt_t>(e));
  else mpq_mul_2exp(out.backend().data(), q.backend().data(), static_cast<mp_bitcnt_t>(-e));
  return out;
}
}  // namespace detail

inline double approx_log(const Rational& q) {
  const double d = scalar_traits<double>::from_rational(q);
  if (std::isnormal(d)) return std::log(d);
  const long e = detail::binary_exponent(q);
  return std::log(scalar_traits<double>::from_rational(detail::scaled_by_power_of_two(q, e))) +
         static_cast<double>(e) * 0.69314718055994530942;
}

inline Eigen::MatrixXd approx_centered_log(const Matrix<Rational>& A) {
  const Eigen::Index n = A.rows(), m = A.cols();
  Eigen::MatrixXd L(n, m);
  Eigen::VectorXd d(m);
  for (Eigen::Index i = 0; i < n; ++i) {
    // The row's largest entry, from its doubles when they hold every entry (the
    // usual case: no rational comparisons), else from the rationals.
    bool doubles_hold_row = true;
    Eigen::Index top = 0;
    for (Eigen::Index j = 0; j < m; ++j) {
      d(j) = scalar_traits<double>::from_rational(A(i, j));
      if (!std::isfinite(d(j)) || (d(j) == 0 && A(i, j) != 0)) doubles_hold_row = false;
      if (d(j) > d(top)) top = j;
    }
    if (!doubles_hold_row)
      for (Eigen::Index j = 1; j < m; ++j)
        if (A(i, j) > A(i, top)) top = j;
    // A row scaled by 10^400 is the same pattern: scale it back exactly (by a
    // power of two) first, so the logs are of numbers near 1 and keep their
    // digits; log(10^400 a) in double would carry an error of u * 921.
    const long e = detail::binary_exponent(A(i, top));
    const bool rescale = e > 64 || e < -64;
    const auto log_of = [&](Eigen::Index j) {
      if (!rescale && std::isnormal(d(j))) return std::log(d(j));
      return approx_log(rescale ? detail::scaled_by_power_of_two(A(i, j), e) : A(i, j));
    };
    const double zero_log = log_of(top) - 12 * 2.30258509299404568402;  // log(10^-12 max)
    for (Eigen::Index j = 0; j < m; ++j) L(i, j) = A(i, j) > 0 ? log_of(j) : zero_log;
  }
  const Eigen::VectorXd mean = L.rowwise().mean();
  L.colwise() -= mean;
  return L;
}

}  // namespace attnrank
