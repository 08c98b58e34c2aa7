#include "worked_example_checks.hpp"

using namespace attnrank;

TEST_CASE("attnrank::worked_example [exact]", "[worked_example][exact]") {
  const auto t = worked_example::layer<Rational>().forward<Interval>(worked_example::X());
  test::check_exact_steps(t);
  SECTION("the heads are the column slices of Q, K, V (Step 2 moves no numbers)") {
    CHECK(t.heads[0].Q == t.Q.leftCols(2));
    CHECK(t.heads[1].K == t.K.rightCols(2));
    CHECK(t.heads[1].V == t.V.rightCols(2));
  }
  SECTION("row 1 of A_2 is exactly 1/3 each: the query row of head 2 is zero") {
    CHECK(t.heads[1].Q.row(0).isZero());
    for (Eigen::Index j = 0; j < 3; ++j) CHECK(scalar_traits<Interval>::contains(t.heads[1].A(0, j), Rational(1, 3)));
  }
}
