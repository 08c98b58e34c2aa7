#pragma once
// scalar_traits<T>: the one place where the four tiers differ. Generic algorithms
// ask the traits instead of branching on concrete types.
//
// Danger: comparing two overlapping `Interval`s with `<`
// calls std::terminate in Boost 1.74. Generic code therefore never compares
// scalars directly; it uses `approx_less` (compares centers: only for choices such
// as pivots or shifts that do not affect soundness) or the three-valued
// `certainly_*` predicates.

#include <attnrank/numbers/tiers.hpp>

#include <cmath>
#include <type_traits>
#include <mpfi.h>
#include <mpfr.h>

namespace attnrank {

/// Three-valued answer of a predicate that may not be provable.
enum class Tri { yes, no, unknown };

/// Exact value of a double (every finite double is a dyadic rational).
inline Rational to_rational(double x) {
  Rational q;
  mpq_set_d(q.backend().data(), x);
  return q;
}

/// Exact value of a finite MPFR number (m * 2^e, no rounding).
inline Rational to_rational(const Real& x) {
  Integer m;
  const mpfr_exp_t e = mpfr_get_z_2exp(m.backend().data(), x.backend().data());
  Rational q(m);
  if (e > 0) {
    mpq_mul_2exp(q.backend().data(), q.backend().data(), static_cast<mp_bitcnt_t>(e));
  } else if (e < 0) {
    mpq_div_2exp(q.backend().data(), q.backend().data(), static_cast<mp_bitcnt_t>(-e));
  }
  return q;
}

/// The endpoints of an interval, as MPFR numbers at the interval's precision.
inline Real lower_bound(const Interval& x) {
  Real r;
  mpfr_set_prec(r.backend().data(), mpfi_get_prec(x.backend().data()));
  mpfi_get_left(r.backend().data(), x.backend().data());
  return r;
}
inline Real upper_bound(const Interval& x) {
  Real r;
  mpfr_set_prec(r.backend().data(), mpfi_get_prec(x.backend().data()));
  mpfi_get_right(r.backend().data(), x.backend().data());
  return r;
}

template <class T>
struct scalar_traits;

template <>
struct scalar_traits<double> {
  static constexpr bool exact = false;
  static constexpr bool certified = false;
  static constexpr bool enclosure = false;         ///< values are intervals around the true value
  static constexpr bool multiprecision = false;    ///< MPFR numbers: run-time precision, packed products
  static constexpr const char* name = "double";

  /// Correctly rounded (to nearest) value of q.
  static double from_rational(const Rational& q) {
    mpfr_t t;
    mpfr_init2(t, 53);
    mpfr_set_q(t, q.backend().data(), MPFR_RNDN);
    const double d = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clear(t);
    return d;
  }
  static double center(double x) { return x; }
  static bool approx_less(double a, double b) { return a < b; }
  static bool is_finite(double x) { return std::isfinite(x); }
  static bool contains(double x, const Rational& q) { return std::isfinite(x) && to_rational(x) == q; }
};

template <>
struct scalar_traits<Real> {
  static constexpr bool exact = false;
  static constexpr bool certified = false;
  static constexpr bool enclosure = false;         ///< values are intervals around the true value
  static constexpr bool multiprecision = true;    ///< MPFR numbers: run-time precision, packed products
  static constexpr const char* name = "mpfr";

  /// Nearest value of q at the current precision.
  static Real from_rational(const Rational& q) {
    Real r;
    mpfr_set_q(r.backend().data(), q.backend().data(), MPFR_RNDN);
    return r;
  }
  static const Real& center(const Real& x) { return x; }
  static bool approx_less(const Real& a, const Real& b) { return a < b; }
  static bool is_finite(const Real& x) { return mpfr_number_p(x.backend().data()) != 0; }
  static bool contains(const Real& x, const Rational& q) { return is_finite(x) && to_rational(x) == q; }
};

template <>
struct scalar_traits<Interval> {
  static constexpr bool exact = false;
  static constexpr bool certified = true;
  static constexpr bool enclosure = true;         ///< values are intervals around the true value
  static constexpr bool multiprecision = true;    ///< MPFR numbers: run-time precision, packed products
  static constexpr const char* name = "mpfi";

  /// The tightest interval at the current precision that contains q.
  static Interval from_rational(const Rational& q) {
    Interval r;
    mpfi_set_q(r.backend().data(), q.backend().data());
    return r;
  }
  /// The midpoint, as a point interval (exact: a single MPFR number).
  static Interval center(const Interval& x) {
    Real m;
    mpfr_set_prec(m.backend().data(), mpfi_get_prec(x.backend().data()));
    mpfi_mid(m.backend().data(), x.backend().data());
    Interval r;
    mpfi_set_fr(r.backend().data(), m.backend().data());
    return r;
  }
  static bool approx_less(const Interval& a, const Interval& b) {
    return lower_bound(center(a)) < lower_bound(center(b));
  }
  static bool is_finite(const Interval& x) {
    return mpfi_nan_p(x.backend().data()) == 0 && mpfi_bounded_p(x.backend().data()) != 0;
  }
  static bool contains(const Interval& x, const Rational& q) {
    return mpfi_is_inside_q(q.backend().data(), x.backend().data()) > 0;
  }
  /// yes: every point of a is below every point of b; no: every point is at or above.
  static Tri certainly_less(const Interval& a, const Interval& b) {
    if (upper_bound(a) < lower_bound(b)) return Tri::yes;
    if (lower_bound(a) >= upper_bound(b)) return Tri::no;
    return Tri::unknown;
  }
};

template <>
struct scalar_traits<Rational> {
  static constexpr bool exact = true;
  static constexpr bool certified = true;
  static constexpr bool enclosure = false;         ///< values are intervals around the true value
  static constexpr bool multiprecision = false;    ///< MPFR numbers: run-time precision, packed products
  static constexpr const char* name = "rational";

  static const Rational& from_rational(const Rational& q) { return q; }
  static const Rational& center(const Rational& x) { return x; }
  static bool approx_less(const Rational& a, const Rational& b) { return a < b; }
  static bool is_finite(const Rational&) { return true; }
  static bool contains(const Rational& x, const Rational& q) { return x == q; }
};

/// Converts a whole matrix between tiers with `scalar_traits<To>::from_rational`
/// semantics (enclosing for intervals, nearest for floating tiers).
template <class To>
Matrix<To> from_rational(const Matrix<Rational>& m) {
  Matrix<To> r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r(i, j) = scalar_traits<To>::from_rational(m(i, j));
  return r;
}

/// Moves a matrix from the linear tier L to the non-linear tier N. When the tiers
/// are the same it is the matrix itself (a reference, not a copy: in double a
/// copy of W^O costs as much as a head's products).
template <class N, class L>
decltype(auto) to_tier(const Matrix<L>& m) {
  if constexpr (std::is_same_v<N, L>) {
    return (m);
  } else {
    static_assert(std::is_same_v<L, Rational>, "the linear tier differs from the non-linear one only on the exact path");
    return from_rational<N>(m);
  }
}

/// The midpoint of x, rounded to the nearest double: the one rule wherever an
/// interval becomes a plain number (pictures, numeric witnesses, ball centres,
/// where any nearby double will do and nothing is claimed about it). mpfi_mid at
/// x's own precision, then to nearest.
inline double approx_midpoint(const Interval& x) {
  mpfr_t m;
  mpfr_init2(m, mpfi_get_prec(x.backend().data()));
  mpfi_mid(m, x.backend().data());
  const double d = mpfr_get_d(m, MPFR_RNDN);
  mpfr_clear(m);
  return d;
}

/// The midpoint of x as an MPFR number at the current precision (numeric: the
/// centre a preconditioner or a witness starts from, never a claim).
inline Real approx_midpoint_real(const Interval& x) {
  return Real(lower_bound(scalar_traits<Interval>::center(x)));
}

}  // namespace attnrank
