// attnrank/linalg/leading_minors.hpp. Exact rationals are the oracle: every
// leading minor claimed nonsingular is nonsingular exactly, for the midpoint and
// for matrices inside the ball, including balls built around a singular one.
#include "rank_support.hpp"

#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/linalg/leading_minors.hpp>

#include <cmath>
#include <limits>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// Whether the leading k x k minor of M(order, :) is nonsingular, exactly.
bool leading_nonsingular(const Matrix<Rational>& M, const std::vector<Eigen::Index>& order, Eigen::Index k) {
  Matrix<Rational> minor(k, k);
  for (Eigen::Index i = 0; i < k; ++i)
    for (Eigen::Index j = 0; j < k; ++j) minor(i, j) = M(order[static_cast<std::size_t>(i)], j);
  return exact_rank(minor).rank == k;
}

/// Small integers as doubles (exact), some rows repeated or zero.
Eigen::MatrixXd gen_small_integer_matrix(Eigen::Index r, Eigen::Index c) {
  Eigen::MatrixXd m(r, c);
  for (auto& x : m.reshaped()) x = *rc::gen::inRange(-4, 5);
  if (r >= 2 && *rc::gen::arbitrary<bool>()) m.row(r - 1) = m.row(0);
  return m;
}

/// A rank-deficient matrix's entries rounded to doubles (the oracle is the rounded matrix).
Eigen::MatrixXd low_rank_doubles(Eigen::Index r, Eigen::Index c) {
  const Matrix<Rational> L = gen_low_rank(r, c);
  return L.unaryExpr([](const Rational& q) { return q.convert_to<double>(); });
}

}  // namespace

TEST_CASE("attnrank::certified_leading_minors", "[property]") {
  rc::prop("every leading minor it proves is nonsingular exactly, and the fixed rows come first", [] {
    const auto r = *rc::gen::inRange<Eigen::Index>(1, 9), c = *rc::gen::inRange<Eigen::Index>(1, 9);
    const Eigen::MatrixXd mid = *rc::gen::arbitrary<bool>() ? gen_double_matrix(r, c)
                                : *rc::gen::arbitrary<bool>() ? gen_small_integer_matrix(r, c)
                                                              : low_rank_doubles(r, c);
    const auto fixed = *rc::gen::inRange<Eigen::Index>(0, std::min<Eigen::Index>(r, 2) + 1);
    const LeadingMinors lm = certified_leading_minors(BallMatrix{mid, Eigen::MatrixXd::Zero(r, c)}, fixed);
    RC_ASSERT(lm.proven <= std::min(r, c));
    RC_ASSERT(static_cast<Eigen::Index>(lm.order.size()) == lm.proven);
    RC_ASSERT(static_cast<Eigen::Index>(lm.residual.size()) == lm.proven);
    const Matrix<Rational> exact = exact_of(mid);
    for (Eigen::Index k = 1; k <= lm.proven; ++k) {
      RC_ASSERT(leading_nonsingular(exact, lm.order, k));
      RC_ASSERT(lm.residual[static_cast<std::size_t>(k - 1)] < 1);
    }
    for (Eigen::Index i = 0; i < std::min(fixed, lm.proven); ++i) RC_ASSERT(lm.order[static_cast<std::size_t>(i)] == i);
  });
  rc::prop("a ball around a matrix whose leading k x k minor is singular proves fewer than k", [] {
    // S: integer, its leading k x k minor singular (row k - 1 a combination of
    // the rows above, or zero); the ball is S moved by a dyadic delta, radius
    // |delta|, so S is inside it and no sound test proves that minor.
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 8);
    const auto k = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    Eigen::MatrixXd S = gen_small_integer_matrix(n, n);
    S.row(k - 1).head(k).setZero();
    for (Eigen::Index i = 0; i + 1 < k; ++i) S.row(k - 1).head(k) += *rc::gen::inRange(-2, 3) * S.row(i).head(k);
    Eigen::MatrixXd delta(n, n);
    for (auto& x : delta.reshaped()) x = std::ldexp(*rc::gen::inRange(-64, 65), -*rc::gen::inRange(4, 40));
    const LeadingMinors lm = certified_leading_minors(BallMatrix{S + delta, delta.cwiseAbs()}, n);  // rows in place
    RC_ASSERT(lm.proven < k);
  });
  SECTION("a well-conditioned matrix gets every size; pivoting finds the order") {
    // Diagonally dominant, rows reversed: without row exchanges the first pivot is tiny.
    const Eigen::Index n = 60;
    Eigen::MatrixXd M = Eigen::MatrixXd::Constant(n, n, 0.25) + n * Eigen::MatrixXd::Identity(n, n);
    M.row(0).setConstant(1e-30);
    M(0, n - 1) = n;
    const LeadingMinors lm = certified_leading_minors(BallMatrix{M, Eigen::MatrixXd::Constant(n, n, 1e-12)});
    CHECK(lm.proven == n);
    CHECK(lm.order.front() != 0);
    const LeadingMinors kept = certified_leading_minors(BallMatrix{M, Eigen::MatrixXd::Zero(n, n)}, n);
    CHECK(kept.proven == 0);  // the first row kept in place: its leading entry is 1e-30 against tol
  }
  SECTION("numeric rank: a rank-3 matrix of 40 x 30 proves 3, from its pivot rows") {
    std::mt19937_64 rng(11);
    INFO("seed 11");
    std::normal_distribution<double> g;
    Eigen::MatrixXd U(40, 3), V(3, 30);
    for (auto& x : U.reshaped()) x = g(rng);
    for (auto& x : V.reshaped()) x = g(rng);
    const LeadingMinors lm = certified_leading_minors(BallMatrix{U * V, Eigen::MatrixXd::Zero(40, 30)});
    CHECK(lm.proven == 3);
  }
  SECTION("extremes: non-finite entries end the search before their column; huge and tiny scales") {
    Eigen::MatrixXd M = Eigen::MatrixXd::Identity(4, 4);
    M(3, 2) = std::numeric_limits<double>::quiet_NaN();
    CHECK(certified_leading_minors(BallMatrix{M, Eigen::MatrixXd::Zero(4, 4)}).proven == 2);
    Eigen::MatrixXd R = Eigen::MatrixXd::Zero(4, 4);
    R(0, 1) = std::numeric_limits<double>::infinity();
    CHECK(certified_leading_minors(BallMatrix{Eigen::MatrixXd::Identity(4, 4), R}).proven == 1);
    const double big = std::numeric_limits<double>::max() / 4;
    CHECK(certified_leading_minors(BallMatrix{big * Eigen::MatrixXd::Identity(3, 3), Eigen::MatrixXd::Zero(3, 3)}).proven == 3);
    const Eigen::MatrixXd tiny = 0x1p-1060 * Eigen::MatrixXd::Identity(3, 3);  // subnormal diagonal
    const LeadingMinors t = certified_leading_minors(BallMatrix{tiny, Eigen::MatrixXd::Zero(3, 3)});
    CHECK(t.proven <= 3);  // whatever it proves is true: the identity scaled is nonsingular
    CHECK(certified_leading_minors(BallMatrix{Eigen::MatrixXd(0, 3), Eigen::MatrixXd(0, 3)}).proven == 0);
    CHECK_THROWS_AS(certified_leading_minors(BallMatrix{M, Eigen::MatrixXd::Zero(4, 4)}, 5), std::invalid_argument);
  }
}
