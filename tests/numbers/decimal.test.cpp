// Tests for attnrank/numbers/decimal.hpp: exact rounding, and certified digits of intervals.
#include "support.hpp"

using namespace attnrank;
using attnrank::test::gen_rational;

TEST_CASE("attnrank::format_fixed") {
  CHECK(format_fixed(Rational(2, 3), 2) == "0.67");
  CHECK(format_fixed(Rational(-2, 3), 2) == "-0.67");
  CHECK(format_fixed(Rational(1, 8), 2) == "0.13");    // tie, away from zero
  CHECK(format_fixed(Rational(-1, 8), 2) == "-0.13");
  CHECK(format_fixed(Rational(-1, 1000), 2) == "0.00");  // never "-0.00"
  CHECK(format_fixed(Rational(7), 0) == "7");
  CHECK(format_fixed(Rational(5, 2), 0) == "3");
  CHECK(format_fixed(Rational(1234567, 1000), 1) == "1234.6");
  CHECK(format_fixed(Rational(1, 3), 40) == "0." + std::string(40, '3'));
  CHECK(format_fixed_point(0.1, 20) == "0.10000000000000000555");  // the double's exact value
}

TEST_CASE("attnrank::certified_fixed") {
  PrecisionScope scope(128);
  const Interval third = scalar_traits<Interval>::from_rational(Rational(1, 3));
  CHECK(certified_fixed(third, 30) == std::string("0." + std::string(30, '3')));
  CHECK_FALSE(certified_fixed(third, 60).has_value());  // 128 bits cannot give 60 decimals
  Interval wide;
  mpfi_interv_d(wide.backend().data(), 0.124, 0.126);
  CHECK_FALSE(certified_fixed(wide, 2).has_value());  // straddles 0.125
  const auto [lo, hi] = enclosure_fixed(wide, 2);
  CHECK(lo == "0.12");
  CHECK(hi == "0.13");

  rc::prop("a certified rounding is the rounding of the exact value", [] {
    const Rational q = *gen_rational() / *rc::gen::inRange(1, 1000);
    const int digits = *rc::gen::inRange(0, 40);
    PrecisionScope local(*rc::gen::inRange(24u, 300u));
    const Interval x = scalar_traits<Interval>::from_rational(q);
    if (const auto s = certified_fixed(x, digits)) RC_ASSERT(*s == format_fixed(q, digits));
    const auto [l, h] = enclosure_fixed(x, digits);
    RC_ASSERT(parse_rational(l) <= q);
    RC_ASSERT(q <= parse_rational(h));
  });
}

TEST_CASE("attnrank::certified_decimal") {
  PrecisionScope scope(128);
  const Interval tiny = scalar_traits<Interval>::from_rational(Rational(1, 3) * Rational(1, Integer(1) << 200));
  CHECK(certified_decimal(tiny, DecimalFormat::decimals(6)) == std::string("0.000000"));  // what fixed point loses
  CHECK(certified_decimal(tiny, DecimalFormat::significant(5)) == std::string("2.0743e-61"));
  CHECK(DecimalFormat::significant(17).words() == "17 significant digits");
  Interval wide;
  mpfi_interv_d(wide.backend().data(), 0.1249, 0.1251);
  CHECK_FALSE(certified_decimal(wide, DecimalFormat::significant(2)).has_value());  // straddles 0.125
  CHECK(certified_or_enclosure(wide, DecimalFormat::significant(2)) == "[1.2e-01, 1.3e-01]");

  rc::prop("a certified significant rounding is the rounding of the exact value, and its enclosure contains it", [] {
    const Rational q = *gen_rational() / *rc::gen::inRange(1, 1000) *
                       Rational(1, Integer(1) << *rc::gen::inRange(0, 1100));  // down to subnormal magnitudes
    const int digits = *rc::gen::inRange(1, 40);
    PrecisionScope local(*rc::gen::inRange(24u, 300u));
    const Interval x = scalar_traits<Interval>::from_rational(q);
    const DecimalFormat f = DecimalFormat::significant(digits);
    if (const auto s = certified_decimal(x, f)) RC_ASSERT(*s == format_significant(q, digits));
    const std::string e = certified_or_enclosure(x, f);
    if (e.front() == '[') {
      const std::size_t comma = e.find(", ");
      RC_ASSERT(parse_rational(e.substr(1, comma - 1)) <= q);
      RC_ASSERT(q <= parse_rational(e.substr(comma + 2, e.size() - comma - 3)));
    }
  });
  rc::prop("17 significant digits read back as the double written", [](double x) {
    RC_PRE(std::isfinite(x));
    RC_ASSERT(std::strtod(format_decimal(to_rational(x), DecimalFormat::significant(17)).c_str(), nullptr) == x);
  });
}

TEST_CASE("attnrank::format_upper_bound") {
  CHECK(format_upper_bound(0.375111) == "3.76e-01");
  CHECK(format_upper_bound(0.0) == "0");
  rc::prop("a printed upper bound is never below the bound it prints", [](double x, bool tiny) {
    RC_PRE(std::isfinite(x));
    if (tiny) x = std::ldexp(x, -1000);  // subnormal and tiny magnitudes too
    const int significant = *rc::gen::inRange(2, 18);
    RC_ASSERT(parse_rational(format_upper_bound(x, significant)) >= to_rational(x));
  });
}
