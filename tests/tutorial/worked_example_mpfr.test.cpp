#include "worked_example_checks.hpp"

using namespace attnrank;

TEST_CASE("attnrank::worked_example [mpfr]", "[worked_example][mpfr]") {
  PrecisionScope scope(200);
  const auto t = worked_example::layer<Real>().forward(from_rational<Real>(worked_example::X()));
  test::check_exact_steps(t);
  test::for_each_reference(t, [](const Real& x, const std::string& ref) {
    INFO("reference " << ref << ", computed " << x.str(45));
    // |x - true| < 2^-190 at 200 bits; |true - ref| <= half a unit of ref's last digit.
    const Rational distance = abs(Rational(to_rational(x) - parse_rational(ref)));
    CHECK(distance <= test::reference_radius(ref) + Rational(1, Integer(1) << 190));
  });
}
