#include "worked_example_checks.hpp"

using namespace attnrank;

TEST_CASE("attnrank::worked_example [mpfi]", "[worked_example][mpfi]") {
  PrecisionScope scope(128);
  // The interval tier on its own (interval linear part) and the exact path.
  const auto interval = worked_example::layer<Interval>().forward(from_rational<Interval>(worked_example::X()));
  const auto exact_path = worked_example::layer<Rational>().forward<Interval>(worked_example::X());
  test::check_exact_steps(interval);
  auto check = [](const Interval& x, const std::string& ref) {
    INFO("reference " << ref << ", enclosure [" << lower_bound(x).str(45) << ", " << upper_bound(x).str(45) << "]");
    // The true value lies in x and within reference_radius(ref) of ref.
    const Rational r = test::reference_radius(ref), q = parse_rational(ref);
    CHECK(to_rational(lower_bound(x)) <= q + r);
    CHECK(q - r <= to_rational(upper_bound(x)));
    CHECK(to_rational(upper_bound(x)) - to_rational(lower_bound(x)) < Rational(1, Integer("1" + std::string(30, '0'))));
  };
  test::for_each_reference(interval, check);
  test::for_each_reference(exact_path, check);
  SECTION("the certified digits at 2 decimals are the tutorial's printed numbers") {
    const char* printed[3][4] = {{"1.01", "1.01", "0.83", "1.50"}, {"0.46", "0.75", "1.16", "2.31"},
                                 {"0.75", "1.31", "0.41", "1.87"}};
    for (Eigen::Index i = 0; i < 3; ++i)
      for (Eigen::Index j = 0; j < 4; ++j) CHECK(certified_fixed(exact_path.output(i, j), 2) == std::string(printed[i][j]));
  }
}
