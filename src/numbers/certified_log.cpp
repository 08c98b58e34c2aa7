// Certified logarithms at double speed: numbers/certified_log.hpp states the
// method and its proof.
#include <attnrank/numbers/certified_log.hpp>
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/detail/vector_exp.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <mpfr.h>

#include <cfenv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace attnrank {
namespace {

using detail::inf;
constexpr double up_factor = 1.0 + 0x1p-50;    // 1 + 8u, exact
constexpr double down_factor = 1.0 - 0x1p-50;  // 1 - 8u, exact
constexpr double smallest_checked = 0x1p-1000, largest_checked = 0x1p1000;

/// The widening of a proposal y: covers glibc's error and the checks' 12u margin.
double widening(double y) { return std::fabs(y) * 0x1p-51 + 0x1p-48; }

/// log x rounded toward `mode` by MPFR (53 bits: the double is exact).
double mpfr_log_rounded(double x, mpfr_rnd_t mode) {
  mpfr_t t;
  mpfr_init2(t, 53);
  mpfr_set_d(t, x, MPFR_RNDN);
  mpfr_log(t, t, mode);
  const double out = mpfr_get_d(t, mode);
  mpfr_clear(t);
  return out;
}

bool checkable(double x) { return x >= smallest_checked && x <= largest_checked; }

}  // namespace

void log_bounds(const double* x_lo, const double* x_hi, double* lo, double* hi, std::size_t count) {
  const RoundingScope<FE_TONEAREST> nearest;  // exp_double's bound assumes it
  for (std::size_t i = 0; i < count; ++i)
    if (!(x_lo[i] >= 0) || !(x_hi[i] >= x_lo[i]))
      throw std::invalid_argument("log_bounds: an input is negative, NaN or an empty interval");
  // Proposals, then one vectorisable exp pass over both ends.
  std::vector<double> e_lo(count), e_hi(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double a = std::log(x_lo[i]), b = std::log(x_hi[i]);
    lo[i] = a - widening(a);
    hi[i] = b + widening(b);
    e_lo[i] = lo[i];
    e_hi[i] = hi[i];
  }
  detail::exp_in_place(e_lo.data(), count);
  detail::exp_in_place(e_hi.data(), count);
  for (std::size_t i = 0; i < count; ++i) {
    if (x_lo[i] == 0) {
      lo[i] = -inf;
    } else if (!(checkable(x_lo[i]) && e_lo[i] * up_factor <= x_lo[i])) {
      lo[i] = mpfr_log_rounded(x_lo[i], MPFR_RNDD);
    }
    if (x_hi[i] == 0) {
      hi[i] = -inf;  // t = 0 only
    } else if (!(checkable(x_hi[i]) && e_hi[i] * down_factor >= x_hi[i])) {
      hi[i] = mpfr_log_rounded(x_hi[i], MPFR_RNDU);
    }
  }
}

void neg_log1m_upper(const double* x, double* hi, std::size_t count) {
  const RoundingScope<FE_TONEAREST> nearest;  // exp_double's bound assumes it
  // -log(1 - x) <= h  iff  exp(-h) <= 1 - x: proven when
  // fl(exp_double(-h) (1 + 8u)) <= 1 - x, with 1 - x rounded down (exact for x >= 1/2).
  std::vector<double> e(count), one_minus(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!(x[i] >= 0)) throw std::invalid_argument("neg_log1m_upper: a negative or NaN input");
    const double y = x[i] < 1 ? -std::log1p(-x[i]) : inf;
    hi[i] = y + widening(y);
    e[i] = -hi[i];
    const double d = 1.0 - x[i];
    one_minus[i] = x[i] >= 0.5 ? d : std::nextafter(d, 0.0);  // <= 1 - x
  }
  detail::exp_in_place(e.data(), count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!(x[i] < 1)) {
      hi[i] = inf;
      continue;
    }
    if (x[i] == 0) {
      hi[i] = 0;  // exact
      continue;
    }
    if (checkable(one_minus[i]) && e[i] * up_factor <= one_minus[i]) continue;
    mpfr_t t;  // -log(1 - x) = -log1p(-x), rounded up
    mpfr_init2(t, 53);
    mpfr_set_d(t, -x[i], MPFR_RNDN);
    mpfr_log1p(t, t, MPFR_RNDD);
    mpfr_neg(t, t, MPFR_RNDN);
    hi[i] = mpfr_get_d(t, MPFR_RNDU);
    mpfr_clear(t);
  }
}

}  // namespace attnrank
