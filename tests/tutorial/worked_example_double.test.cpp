#include "worked_example_checks.hpp"

using namespace attnrank;

TEST_CASE("attnrank::worked_example [double]", "[worked_example][double]") {
  const auto t = worked_example::layer<double>().forward(from_rational<double>(worked_example::X()));
  test::check_exact_steps(t);  // small integers are exact in double
  test::for_each_reference(t, [](double x, const std::string& ref) {
    INFO("reference " << ref);
    CHECK(std::abs(x - scalar_traits<double>::from_rational(parse_rational(ref))) <= 1e-14);
  });
}
