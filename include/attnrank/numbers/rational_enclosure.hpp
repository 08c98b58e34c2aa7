#pragma once
// Doubles around a rational: lo <= q <= hi, both ends proven. A double (a dyadic
// q of at most 53 significant bits: binary data) comes back exactly, lo = hi = q,
// converted without a division; otherwise one GMP quotient: mpq_get_d truncates
// toward zero (GMP's documented rounding), so the truncation and its neighbour
// away from zero enclose q. Outside [2^-1021, 2^1020]
// in magnitude, where GMP's conversion is not specified, MPFR rounds each end
// outward instead (an end may then be 0, a subnormal, +-DBL_MAX or +-inf: still
// bounds).

#include <attnrank/numbers/tiers.hpp>

#include <cmath>
#include <limits>
#include <utility>

namespace attnrank {

/// {lo, hi} with lo <= q <= hi; {q, q} when q is a double.
inline std::pair<double, double> rational_enclosure(const Rational& q) {
  mpq_srcptr r = q.backend().data();
  const int sign = mpq_sgn(r);
  if (sign == 0) return {0.0, 0.0};
  mpz_srcptr num = mpq_numref(r), den = mpq_denref(r);
  const bool dyadic = mpz_popcount(den) == 1;
  const bool short_numerator = mpz_sizeinbase(num, 2) - mpz_scan1(num, 0) <= 53;
  if (dyadic && short_numerator && mpz_sizeinbase(num, 2) <= 1020) {
    // A double (binary data): the numerator converts exactly, the power of two
    // scales exactly while the result stays normal. No division.
    const double d = std::ldexp(mpz_get_d(num), -static_cast<int>(mpz_sizeinbase(den, 2) - 1));
    if (std::fabs(d) >= 0x1p-1021) return {d, d};
  }
  const double t = mpq_get_d(r);
  const double magnitude = std::fabs(t);
  if (magnitude >= 0x1p-1021 && magnitude <= 0x1p1020) {
    if (dyadic && short_numerator) return {t, t};
    const double away = std::nextafter(t, sign > 0 ? std::numeric_limits<double>::infinity()
                                                   : -std::numeric_limits<double>::infinity());
    return sign > 0 ? std::pair{t, away} : std::pair{away, t};
  }
  mpfr_t x;
  mpfr_init2(x, 53);
  mpfr_set_q(x, r, MPFR_RNDD);
  const double lo = mpfr_get_d(x, MPFR_RNDD);
  mpfr_set_q(x, r, MPFR_RNDU);
  const double hi = mpfr_get_d(x, MPFR_RNDU);
  mpfr_clear(x);
  return {lo, hi};
}

}  // namespace attnrank
