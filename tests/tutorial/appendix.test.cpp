// attnrank/tutorial/appendix.hpp: the figures' data of the appendix argument
// (numeric pictures of numbers the argument certifies). The argument itself is
// checked number by number against the 40-digit references by
// tests/cli/appendix_cli.test.cpp.
#include "support.hpp"

#include <attnrank/tutorial/appendix.hpp>

#include <cmath>

using namespace attnrank;

#ifndef ATTNRANK_SANITIZED  // the argument's n = 512 part takes minutes at -O0
TEST_CASE("attnrank::appendix_figure_data") {
  const TutorialAppendix t = tutorial_appendix(128);
  const AppendixFigureData g = appendix_figure_data(t);
  SECTION("Figure 8 on a finer grid: q = 3 .. -3 by 1/2, each row a distribution over (I, love, LLMs)") {
    REQUIRE(g.sweep.rows() == 13);
    REQUIRE(g.sweep.cols() == 3);
    REQUIRE(g.sweep_q.size() == 13);
    CHECK(g.sweep_q.front() == "3.0");
    CHECK(g.sweep_q[6] == "0.0");
    CHECK(g.sweep_q.back() == "-3.0");
    for (Eigen::Index r = 0; r < 13; ++r) CHECK(g.sweep.row(r).sum() == Approx(1.0).epsilon(1e-15));
    CHECK(g.sweep(6, 0) == Approx(1.0 / 3).epsilon(1e-15));  // q = 0: flat
    const double q = 3, e2 = std::exp(2 * q), e1 = std::exp(q);
    CHECK(g.sweep(0, 0) == Approx(e2 / (e2 + 1 + e1)).epsilon(1e-15));  // keys (2, 0, 1)
  }
  SECTION("the spectrum of log(A) C: n - 1 equal values a = log 8, then 0") {
    REQUIRE(g.singular_values.size() == g.n);
    for (Eigen::Index i = 0; i + 1 < g.n; ++i) CHECK(g.singular_values(i) == Approx(std::log(8.0)).epsilon(1e-14));
    CHECK(g.singular_values(g.n - 1) == Approx(0).margin(1e-14));
    CHECK(g.floor == t.floor.dk1.floor.lower);
    CHECK(g.seed_floor == t.floor.seed_floor);
  }
  SECTION("Section 2.2's two heads: 3 x 3 attention weights, rows summing to 1") {
    REQUIRE(g.heads.size() == 2);
    for (const Eigen::MatrixXd& A : g.heads) {
      REQUIRE(A.rows() == 3);
      for (Eigen::Index r = 0; r < 3; ++r) CHECK(A.row(r).sum() == Approx(1.0).epsilon(1e-15));
    }
    CHECK(g.heads[1](0, 0) == Approx(1.0 / 3).epsilon(1e-15));  // A_2 row 1 = 1/3
  }
}
#endif
