// attnrank/numbers/tiers.hpp: conversions between the tiers are exact or outward.
// Boost 1.74 converts mpfr_float (and mpq_rational, mpz_int) to mpfi_float
// through a generic chunk-by-chunk routine that returned [nan, nan] for some
// finite values; numbers/tiers.hpp replaces it with MPFI's own conversions. These
// properties hold every conversion to the interval containing the exact value.
#include "support.hpp"

#include <attnrank/numbers/tiers.hpp>

#include <atomic>
#include <thread>

using namespace attnrank;

namespace {

/// A random MPFR number at a random precision in [2, 300] bits, exponent in
/// [-2000, 2000]: every bit pattern, not only doubles.
Real gen_real(mpfr_prec_t& prec) {
  prec = *rc::gen::inRange<mpfr_prec_t>(2, 301);
  Real x;
  mpfr_set_prec(x.backend().data(), prec);
  Integer m = 0;
  for (int limb = 0; limb < 5; ++limb) m = (m << 62) + *rc::gen::inRange<long>(0, 1L << 62);
  if (*rc::gen::arbitrary<bool>()) m = -m;
  mpfr_set_z_2exp(x.backend().data(), m.backend().data(), *rc::gen::inRange<long>(-2000, 2000), MPFR_RNDN);
  return x;
}

}  // namespace

TEST_CASE("attnrank::Interval conversions", "[property]") {
  SECTION("the value the audit found: 0x2.5517dd6892f2863p+60 at 68 bits") {
    const PrecisionScope scope(64);
    Real x;
    mpfr_set_prec(x.backend().data(), 68);
    mpfr_set_str(x.backend().data(), "0x2.5517dd6892f2863p+60", 16, MPFR_RNDN);
    const Interval i(x);
    REQUIRE(scalar_traits<Interval>::is_finite(i));
    CHECK(lower_bound(i) == x);
    CHECK(upper_bound(i) == x);
  }
  rc::prop("a Real converted to an Interval is enclosed, exactly when the precision allows", [] {
    mpfr_prec_t prec = 0;
    const Real x = gen_real(prec);
    const unsigned bits = *rc::gen::element(24u, 53u, 64u, 68u, 128u, 320u);
    const PrecisionScope scope(bits);
    const Interval i(x);
    RC_ASSERT(scalar_traits<Interval>::is_finite(i));
    RC_ASSERT(lower_bound(i) <= x);
    RC_ASSERT(x <= upper_bound(i));
    if (mpfi_get_prec(i.backend().data()) >= prec) RC_ASSERT(lower_bound(i) == upper_bound(i));
  });
  rc::prop("a Rational or an Integer converted to an Interval contains it", [] {
    const Rational q = *attnrank::test::gen_rational() * Rational(1, *rc::gen::inRange(1, 1000000));
    const Integer z = boost::multiprecision::numerator(q) * *rc::gen::inRange<long>(1, 1L << 60);
    const PrecisionScope scope(*rc::gen::element(24u, 53u, 64u, 200u));
    RC_ASSERT(scalar_traits<Interval>::contains(Interval(q), q));
    RC_ASSERT(scalar_traits<Interval>::contains(Interval(z), Rational(z)));
  });
}

TEST_CASE("attnrank::bits_for_decimals: the one digits-to-bits rule") {
  CHECK(bits_for_decimals(0) == 64);
  CHECK(bits_for_decimals(1) == 68);    // ceil(3.32...) + 64
  CHECK(bits_for_decimals(50) == 231);  // ceil(166.09...) + 64
  for (int d = 0; d < 2000; ++d) {
    INFO("d = " << d);
    // 2^(bits - 64) >= 10^d: the digits fit, with 64 bits to spare.
    CHECK(static_cast<double>(bits_for_decimals(d) - 64) >= d * std::log2(10.0) - 1e-9);
    CHECK(bits_for_decimals(d + 1) > bits_for_decimals(d));
  }
}

TEST_CASE("attnrank::approx_midpoint: the nearest double to the midpoint", "[property]") {
  rc::prop("inside the interval when the interval holds a double; equal to rounding mpfi_mid", [] {
    mpfr_prec_t p1 = 2, p2 = 2;
    const Real a = gen_real(p1), b = gen_real(p2);
    Interval x;
    mpfi_set_prec(x.backend().data(), std::max(p1, p2));
    mpfi_interv_fr(x.backend().data(), a.backend().data(), b.backend().data());
    const double m = approx_midpoint(x);
    mpfr_t mid;
    mpfr_init2(mid, mpfi_get_prec(x.backend().data()));
    mpfi_mid(mid, x.backend().data());
    RC_ASSERT(m == mpfr_get_d(mid, MPFR_RNDN));
    mpfr_clear(mid);
    const double lo = mpfr_get_d(&x.backend().data()->left, MPFR_RNDU), hi = mpfr_get_d(&x.backend().data()->right, MPFR_RNDD);
    if (std::isfinite(m) && lo <= hi) RC_ASSERT(lo <= m && m <= hi);
    RC_ASSERT(approx_midpoint_real(x) == lower_bound(scalar_traits<Interval>::center(x)));
  });
}

TEST_CASE("attnrank::PrecisionScope in several threads", "[unit][threads]") {
  // Boost's default precision is one process-wide value: scopes at different
  // precisions in two threads must not see each other's.
  const unsigned rest = Interval::default_precision();
  std::atomic<int> wrong{0};
  const auto worker = [&](unsigned bits) {
    for (int round = 0; round < 200; ++round) {
      const PrecisionScope outer(bits);
      const Interval x = Interval(1) / 3;
      if (mpfi_get_prec(x.backend().data()) < static_cast<mpfr_prec_t>(bits)) ++wrong;
      {
        const PrecisionScope inner(bits * 2);  // nested, at another precision
        const Interval y = Interval(1) / 7;
        if (mpfi_get_prec(y.backend().data()) < static_cast<mpfr_prec_t>(bits * 2)) ++wrong;
      }
      const Interval z = Interval(2) / 3;  // the outer scope's precision again
      const mpfr_prec_t pz = mpfi_get_prec(z.backend().data());
      if (pz < static_cast<mpfr_prec_t>(bits) || pz >= static_cast<mpfr_prec_t>(bits * 2)) ++wrong;
    }
  };
  std::thread a(worker, 64u), b(worker, 200u), c(worker, 64u);
  a.join();
  b.join();
  c.join();
  CHECK(wrong == 0);
  CHECK(Interval::default_precision() == rest);  // back at rest once no scope is open
}
