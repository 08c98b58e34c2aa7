// Tests for attnrank/numbers/certified_log.hpp and rational_enclosure.hpp: every
// end against MPFR at 256 bits, over doubles of every magnitude (subnormal, near 1,
// near the ends of the range), under every rounding mode the caller may have set.
#include "support.hpp"

#include <attnrank/numbers/certified_log.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/rational_enclosure.hpp>

#include <bit>
#include <cfenv>
#include <cmath>
#include <limits>
#include <vector>

using namespace attnrank;
using attnrank::test::gen_rational;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// sign(log x - y) at 256 bits, for x > 0 (x = 0: log x = -inf).
int compare_log(double x, double y) {
  if (x == 0) return y == -inf ? 0 : -1;
  mpfr_t t;
  mpfr_init2(t, 256);
  mpfr_set_d(t, x, MPFR_RNDN);
  mpfr_log(t, t, MPFR_RNDN);
  const int c = mpfr_cmp_d(t, y);
  mpfr_clear(t);
  return c;
}

/// -log(1 - x) at 256 bits, as a double rounded to nearest (for the tightness check),
/// and sign(-log(1 - x) - y).
int compare_neg_log1m(double x, double y, double* value = nullptr) {
  mpfr_t t;
  mpfr_init2(t, 256);
  mpfr_set_d(t, -x, MPFR_RNDN);
  mpfr_log1p(t, t, MPFR_RNDN);
  mpfr_neg(t, t, MPFR_RNDN);
  const int c = mpfr_cmp_d(t, y);
  if (value) *value = mpfr_get_d(t, MPFR_RNDN);
  mpfr_clear(t);
  return c;
}

/// Positive doubles: arbitrary bit patterns (every exponent, subnormals), the
/// attention range [1e-12, 1], numbers within a few ulps of 1, and powers of two.
rc::Gen<double> gen_positive() {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::arbitrary<std::uint64_t>(),
                   [](std::uint64_t bits) {
                     const double x = std::fabs(std::bit_cast<double>(bits));
                     return std::isfinite(x) ? x : 1.0;
                   }),
      rc::gen::map(rc::gen::inRange(1, 1'000'000'000), [](int v) { return v * 1e-9; }),
      rc::gen::map(rc::gen::inRange(-40, 40),
                   [](int k) {
                     double x = 1.0;
                     for (int i = 0; i < std::abs(k); ++i) x = std::nextafter(x, k > 0 ? 2.0 : 0.0);
                     return x;
                   }),
      rc::gen::map(rc::gen::inRange(-1074, 1024), [](int e) { return std::ldexp(1.0, e); }));
}

/// The rounding mode a caller might hold when it calls in.
rc::Gen<int> gen_mode() { return rc::gen::element(FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO); }

}  // namespace

TEST_CASE("attnrank::log_bounds") {
  rc::prop("lo <= log t <= hi over [x_lo, x_hi], a few ulps wide, whatever the caller's rounding mode", [] {
    double a = *gen_positive(), b = *gen_positive();
    if (a > b) std::swap(a, b);
    if (*rc::gen::arbitrary<bool>()) b = a;  // points, the usual case
    const int mode = *gen_mode();
    double lo = 0, hi = 0;
    const int saved = std::fegetround();
    std::fesetround(mode);
    log_bounds(&a, &b, &lo, &hi, 1);
    const int after = std::fegetround();
    std::fesetround(saved);
    RC_ASSERT(after == mode);  // restored
    RC_ASSERT(compare_log(a, lo) >= 0);
    RC_ASSERT(compare_log(b, hi) <= 0);
    if (a == b && a > 0) {
      const double y = std::log(a);
      RC_ASSERT(hi - lo <= 8 * std::fabs(y) * 0x1p-52 + 0x1p-45);
    }
  });
  SECTION("exact points, zero and bad input") {
    const double one = 1, zero = 0, two = 2;
    double lo, hi;
    log_bounds(&one, &one, &lo, &hi, 1);
    CHECK(lo <= 0);
    CHECK(hi >= 0);
    CHECK(hi - lo < 1e-13);
    log_bounds(&zero, &two, &lo, &hi, 1);
    CHECK(lo == -inf);
    CHECK(compare_log(2, hi) <= 0);
    const double negative = -1, nan = std::nan("");
    CHECK_THROWS_AS(log_bounds(&negative, &one, &lo, &hi, 1), std::invalid_argument);
    CHECK_THROWS_AS(log_bounds(&nan, &one, &lo, &hi, 1), std::invalid_argument);
    CHECK_THROWS_AS(log_bounds(&two, &one, &lo, &hi, 1), std::invalid_argument);
  }
  SECTION("a long batch: the vectorised exp pass and its per-entry fallbacks agree with MPFR") {
    std::vector<double> x;
    for (int e = -1074; e <= 1023; ++e) x.push_back(std::ldexp(1.0, e) * 1.3);
    x.push_back(std::numeric_limits<double>::max());
    x.push_back(std::numeric_limits<double>::denorm_min());
    std::vector<double> lo(x.size()), hi(x.size());
    log_bounds(x.data(), x.data(), lo.data(), hi.data(), x.size());
    int failures = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (compare_log(x[i], lo[i]) < 0 || compare_log(x[i], hi[i]) > 0 || !(hi[i] - lo[i] < 1e-12)) ++failures;
    CHECK(failures == 0);
  }
}

TEST_CASE("attnrank::neg_log1m_upper") {
  rc::prop("hi >= -log(1 - x), within a few ulps plus 2^-46", [] {
    const double x = *rc::gen::oneOf(
        rc::gen::map(rc::gen::inRange(0, 1'000'000'000), [](int v) { return v * 1e-9; }),
        rc::gen::map(rc::gen::inRange(1, 60), [](int k) { return 1 - std::ldexp(1.0, -k); }),
        rc::gen::map(rc::gen::inRange(1, 1074), [](int k) { return std::ldexp(1.0, -k); }),
        rc::gen::map(gen_positive(), [](double v) { return v; }));
    const int mode = *gen_mode();
    double hi = 0;
    const int saved = std::fegetround();
    std::fesetround(mode);
    neg_log1m_upper(&x, &hi, 1);
    std::fesetround(saved);
    if (x >= 1) {
      RC_ASSERT(hi == inf);
    } else {
      double exact = 0;
      RC_ASSERT(compare_neg_log1m(x, hi, &exact) <= 0);
      RC_ASSERT(hi - exact <= 8 * exact * 0x1p-52 + 0x1p-45);
    }
  });
  SECTION("zero gives zero") {
    const double zero = 0;
    double hi = 1;
    neg_log1m_upper(&zero, &hi, 1);
    CHECK(hi == 0);
  }
}

TEST_CASE("attnrank::rational_enclosure") {
  rc::prop("lo <= q <= hi exactly; a double comes back as itself; else the two ends are neighbours", [] {
    const Rational q = *rc::gen::oneOf(
        rc::gen::map(gen_rational(), [](Rational r) { return r; }),
        rc::gen::map(rc::gen::pair(rc::gen::inRange(-1'000'000, 1'000'000), rc::gen::inRange(0, 60)),
                     [](std::pair<int, int> v) {
                       Rational r(v.first);
                       Rational ten(1);
                       for (int i = 0; i < v.second; ++i) ten *= 10;
                       return Rational(r / ten);
                     }),
        rc::gen::map(rc::gen::arbitrary<std::uint64_t>(),
                     [](std::uint64_t bits) {
                       const double d = std::bit_cast<double>(bits);
                       return std::isfinite(d) ? to_rational(d) : Rational(1);
                     }),
        rc::gen::map(rc::gen::pair(rc::gen::inRange(1, 1000), rc::gen::inRange(-1500, 1500)),
                     [](std::pair<int, int> v) {  // beyond the double range both ways
                       Rational r(v.first);
                       Rational two(1);
                       for (int i = 0; i < std::abs(v.second); ++i) two *= 2;
                       r = v.second >= 0 ? Rational(r * two) : Rational(r / two);
                       return Rational(r / 3);
                     }));
    const auto [lo, hi] = rational_enclosure(q);
    RC_ASSERT(lo <= hi);
    if (std::isfinite(lo)) RC_ASSERT(to_rational(lo) <= q);
    else RC_ASSERT(lo == -inf);
    if (std::isfinite(hi)) RC_ASSERT(to_rational(hi) >= q);
    else RC_ASSERT(hi == inf);
    const double nearest = scalar_traits<double>::from_rational(q);
    if (std::isfinite(nearest) && to_rational(nearest) == q && std::fabs(nearest) >= 0x1p-1021 && std::fabs(nearest) <= 0x1p1020)
      RC_ASSERT(lo == nearest && hi == nearest);
    else if (std::fabs(nearest) >= 0x1p-1021 && std::fabs(nearest) <= 0x1p1020)
      RC_ASSERT(std::nextafter(lo, inf) == hi);
  });
  SECTION("zero, one, a third") {
    CHECK(rational_enclosure(Rational(0)) == std::pair{0.0, 0.0});
    CHECK(rational_enclosure(Rational(1)) == std::pair{1.0, 1.0});
    const auto [lo, hi] = rational_enclosure(Rational(1) / 3);
    CHECK(lo < hi);
    CHECK(to_rational(lo) < Rational(1) / 3);
    CHECK(to_rational(hi) > Rational(1) / 3);
  }
}
