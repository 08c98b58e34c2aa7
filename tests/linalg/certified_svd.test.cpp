// Tests for attnrank/linalg/certified_svd.hpp. The oracle is exact: for a
// rational M, sigma_i^2 are the eigenvalues of the rational Gram matrix H, and the
// number of them above t is the number of positive pivots of an exact LDL^T of
// H - t I (Sylvester's law of inertia). So lower_i <= sigma_i <= upper_i is
// checked without trusting any floating-point SVD.
#include "rank_support.hpp"

#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/numbers/balls.hpp>

#include <Eigen/SVD>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// lower_i <= sigma_i(M) <= upper_i for every reported i, checked exactly.
bool encloses(const Matrix<Rational>& M, const CertifiedSingularValues& s) {
  const Matrix<Rational> H = gram(M);
  for (std::size_t i = 0; i < s.values.size(); ++i) {
    const auto rank_i = static_cast<Eigen::Index>(i + 1);
    const double lo = s.values[i].lower, hi = s.values[i].upper;
    if (!(lo >= 0) || !(hi >= lo)) return false;  // NaN or crossed bounds are never an enclosure
    if (lo > 0) {
      const auto above = eigenvalues_above(H, Rational(to_rational(lo)) * to_rational(lo));
      if (above && *above < rank_i) return false;
    }
    if (std::isfinite(hi)) {
      const auto above = eigenvalues_above(H, Rational(to_rational(hi)) * to_rational(hi));
      if (above && *above >= rank_i) return false;
    }
  }
  return true;
}

double relative_width(const SingularValueBounds& b) { return (b.upper - b.lower) / b.upper; }

}  // namespace

TEST_CASE("attnrank::certified_singular_values") {
  SECTION("a diagonal matrix: tight enclosures of its entries, in order") {
    Eigen::MatrixXd D = Eigen::MatrixXd::Zero(4, 4);
    D.diagonal() << 1, 5, 3, 1e-3;
    const CertifiedSingularValues s = certified_singular_values(D, 4);
    REQUIRE(s.values.size() == 4);
    const double expected[] = {5, 3, 1, 1e-3};
    for (int i = 0; i < 4; ++i) {
      CHECK(s.values[i].lower <= expected[i]);
      CHECK(s.values[i].upper >= expected[i]);
      CHECK(s.values[i].upper - s.values[i].lower < 1e-13);
    }
    CHECK(s.full);
  }
  SECTION("the Hilbert matrix: exact enclosure, small values resolved to about n u sigma_1") {
    const Matrix<Rational> H = hilbert(8);
    const CertifiedSingularValues s = certified_singular_values(H, 8);
    CHECK(encloses(H, s));
    CHECK(relative_width(s.values[0]) < 1e-13);
    CHECK(s.values[5].lower > 0);  // sigma_6 ~ 1.1e-6 is proven nonzero
  }
  SECTION("decimals that are no doubles: the enclosure is of the rational matrix") {
    const Matrix<Rational> M = *builtin_matrix("diag:5:0.1");
    const CertifiedSingularValues s = certified_singular_values(M, 5);
    CHECK(encloses(M, s));
  }
  SECTION("rank deficiency: the zero singular values get lower bound 0, a tiny upper bound") {
    Matrix<Rational> M(3, 3);
    M << 1, 2, 3, 2, 4, 6, 1, 0, 1;
    const CertifiedSingularValues s = certified_singular_values(M, 3);
    CHECK(encloses(M, s));
    CHECK(s.values[2].lower == 0);
    CHECK(s.values[2].upper < 1e-14);
  }
  SECTION("truncated (Lanczos) bases: still enclosures, lower bounds as tight") {
    const Matrix<Rational> H = hilbert(10);
    SvdOptions truncated;
    truncated.full_limit = 0;
    const CertifiedSingularValues s = certified_singular_values(H, 3, truncated);
    CHECK_FALSE(s.full);
    CHECK(encloses(H, s));
    const CertifiedSingularValues full = certified_singular_values(H, 3);
    for (int i = 0; i < 3; ++i) CHECK(std::abs(s.values[i].lower - full.values[i].lower) <= 1e-13 * full.values[0].lower);
    CHECK(s.values[0].upper < 1.1 * full.values[0].upper);  // the remainder norm: sound, looser
  }
  SECTION("truncated bases at n = 400: when the rest is zero the upper bounds are as tight as the lower") {
    // Rank 10, from small integer factors: sigma_11.. are 0, so the one remainder
    // is rounding noise and both the Weyl and the Frobenius bounds are tight.
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> u(-9, 9);
    const Eigen::MatrixXd F = Eigen::MatrixXd::NullaryExpr(400, 10, [&] { return double(u(rng)); });
    const Eigen::MatrixXd G = Eigen::MatrixXd::NullaryExpr(10, 400, [&] { return double(u(rng)); });
    const Eigen::MatrixXd M = F * G;  // exact: integers below 2^53
    SvdOptions truncated;
    truncated.full_limit = 0;
    const CertifiedSingularValues s = certified_singular_values(M, 10, truncated);
    CHECK_FALSE(s.full);
    for (const SingularValueBounds& b : s.values) CHECK(relative_width(b) < 1e-10);
    const CertifiedSingularValues eleven = certified_singular_values(M, 11, truncated);
    CHECK(eleven.values[10].lower == 0);
    CHECK(eleven.values[10].upper < 1e-9 * eleven.values[0].upper);  // sigma_11 = 0, up to rounding
  }
  SECTION("gaps: separated neighbours get a positive certified gap, equal ones do not") {
    Eigen::MatrixXd D = Eigen::MatrixXd::Zero(3, 3);
    D.diagonal() << 2, 2, 1;
    const std::vector<double> g = certified_gaps(certified_singular_values(D, 3));
    REQUIRE(g.size() == 2);
    CHECK(g[0] <= 0);
    CHECK(g[1] > 0.99);
    CHECK(g[1] <= 1);
  }
  SECTION("bad input is an input error naming the problem") {
    CHECK_THROWS_WITH(certified_singular_values(Eigen::MatrixXd(Eigen::MatrixXd::Ones(2, 3)), 3), Catch::Contains("top 3 of a 2 x 3"));
    CHECK_THROWS_AS(certified_singular_values(Eigen::MatrixXd(Eigen::MatrixXd::Ones(2, 3)), 0), input_error);
    Eigen::MatrixXd N = Eigen::MatrixXd::Ones(2, 2);
    N(1, 0) = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH(certified_singular_values(N, 1), Catch::Contains("[1, 0] (0-based)"));
    Matrix<Rational> huge = Matrix<Rational>::Ones(2, 2);
    huge(0, 1) = Rational(Integer(1) << 1100);
    CHECK_THROWS_AS(certified_singular_values(huge, 1), input_error);
  }
  SECTION("an empty remainder bound and a zero matrix: bounds [0, 0]") {
    const CertifiedSingularValues s = certified_singular_values(Eigen::MatrixXd(Eigen::MatrixXd::Zero(3, 2)), 2);
    CHECK(s.values[0].lower == 0);
    CHECK(s.values[0].upper == 0);
  }
}

TEST_CASE("attnrank::certified_singular_values properties", "[property]") {
  rc::prop("the bounds enclose the exact singular values of random rational matrices, any shape or rank", [] {
    const Matrix<Rational> M = gen_structured_rational_matrix(1);
    const auto p = std::min(M.rows(), M.cols());
    const auto k = *rc::gen::inRange<Eigen::Index>(1, p + 1);
    SvdOptions o;
    o.full_limit = *rc::gen::element<Eigen::Index>(0, 1024);  // truncated or full bases
    const CertifiedSingularValues s = certified_singular_values(M, k, o);
    RC_ASSERT(static_cast<Eigen::Index>(s.values.size()) == k);
    RC_ASSERT(encloses(M, s));
    for (std::size_t i = 0; i + 1 < s.values.size(); ++i) {
      RC_ASSERT(s.values[i].lower >= s.values[i + 1].lower);
      RC_ASSERT(s.values[i].upper >= s.values[i + 1].upper);
    }
  });
  rc::prop("a ball's bounds hold for every matrix in it (a random point of the ball, exactly)", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 7), n = *rc::gen::inRange<Eigen::Index>(1, 7);
    const Matrix<Rational> C = gen_matrix(m, n);
    BallMatrix ball = to_ball(C);
    Matrix<Rational> X(m, n);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        ball.rad(i, j) = std::ldexp(*rc::gen::inRange(0, 100), *rc::gen::inRange(-60, -3));
        const Rational theta(*rc::gen::inRange(-8, 9), 8);  // in [-1, 1]
        X(i, j) = to_rational(ball.mid(i, j)) + theta * to_rational(ball.rad(i, j));
      }
    const auto k = *rc::gen::inRange<Eigen::Index>(1, std::min(m, n) + 1);
    SvdOptions o;
    o.full_limit = *rc::gen::element<Eigen::Index>(0, 1024);  // the remainder's radius path, or the full basis
    RC_ASSERT(encloses(X, certified_singular_values(ball, k, o)));
  });
}

TEST_CASE("attnrank::certified_singular_values at the ends of the double range", "[property]") {
  rc::prop("double matrices from the smallest subnormal to DBL_MAX: bands that enclose the exact values", [] {
    // One scale per matrix from 2^-1074 to DBL_MAX (its Gram matrix and residual checks overflow or
    // underflow there), mantissas of one or both signs: every bound is a band, and true.
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 7), n = *rc::gen::inRange<Eigen::Index>(1, 7);
    const int e = *rc::gen::element(-1074, -1060, -1000, -500, 0, 500, 1000, 1013);
    Eigen::MatrixXd M(m, n);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) M(i, j) = std::ldexp(*rc::gen::inRange(-1000, 1001) / 1000.0, e + 10);
    RC_PRE(M.allFinite());
    const auto k = *rc::gen::inRange<Eigen::Index>(1, std::min(m, n) + 1);
    SvdOptions o;
    o.full_limit = *rc::gen::element<Eigen::Index>(0, 1024);  // truncated or full bases
    const CertifiedSingularValues s = certified_singular_values(M, k, o);
    RC_TAG(std::isfinite(s.values[0].upper) ? "finite" : "overflow");
    Matrix<Rational> X(m, n);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) X(i, j) = to_rational(M(i, j));
    RC_ASSERT(encloses(X, s));
  });
}

TEST_CASE("attnrank::certified_singular_values at n = 16, 32, 64: exact enclosures, sigma_1 to 12 digits") {
  for (const Eigen::Index n : {16, 32, 64}) {
    Matrix<Rational> M(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) M(i, j) = Rational((i * 7 + j * 13 + i * j * 5) % 19 - 9, 4);
    const CertifiedSingularValues s = certified_singular_values(M, 6);
    CAPTURE(n);
    CHECK(encloses(M, s));
    CHECK(relative_width(s.values[0]) < 1e-12);
  }
}

TEST_CASE("attnrank::certify_singular_value_above", "[property]") {
  // The oracle as above: sigma_k(M) > t iff more than k - 1 eigenvalues of the
  // Gram matrix exceed t^2 (M^T M when the vectors act on columns).
  const auto sigma_above = [](const Matrix<Rational>& M, Eigen::Index k, double t) {
    const Matrix<Rational> H = M.transpose() * M;
    const auto above = eigenvalues_above(H, Rational(to_rational(t)) * to_rational(t));
    return above ? std::optional<bool>(*above >= k) : std::nullopt;
  };
  const auto interval_matrix = [](const Matrix<Rational>& M) {
    const PrecisionScope scope(64);
    return Matrix<Interval>(M.unaryExpr([](const Rational& q) { return scalar_traits<Interval>::from_rational(q); }));
  };
  rc::prop("a proof is never false: random matrices, random or computed vectors, any t", [&] {
    const Matrix<Rational> M = gen_structured_rational_matrix(1);
    const Eigen::MatrixXd D = M.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
    const auto k = *rc::gen::inRange<Eigen::Index>(1, M.cols() + 1);
    const Eigen::JacobiSVD<Eigen::MatrixXd> svd(D, Eigen::ComputeFullV);
    Eigen::MatrixXd V = svd.matrixV().leftCols(k);
    if (*rc::gen::arbitrary<bool>()) V = gen_double_matrix(M.cols(), k);  // vectors with no relation to M
    const double s = k <= svd.singularValues().size() ? svd.singularValues()(k - 1) : 0.0;
    const double t = s * *rc::gen::element(0.0, 0.5, 0.99, 0.999999, 1.0, 1.000001, 1.5) + *rc::gen::element(0.0, 1e-300);
    const PrecisionScope scope(64);
    if (certify_singular_value_above(interval_matrix(M), V, Interval(t))) {
      const auto truth = sigma_above(M, k, t);
      RC_ASSERT(!truth || *truth);
    }
  });
  SECTION("complete where it should be: a separated sigma_k, its own singular vectors, t just below it") {
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
      std::mt19937_64 rng(seed);
      std::uniform_int_distribution<int> u(-50, 50);
      Matrix<Rational> M(12, 9);
      for (Eigen::Index i = 0; i < 12; ++i)
        for (Eigen::Index j = 0; j < 9; ++j) M(i, j) = Rational(u(rng), 7);
      const Eigen::MatrixXd D = M.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
      const Eigen::JacobiSVD<Eigen::MatrixXd> svd(D, Eigen::ComputeFullV);
      for (Eigen::Index k = 1; k <= 9; ++k) {
        const double s = svd.singularValues()(k - 1);
        const PrecisionScope scope(64);
        CHECK(certify_singular_value_above(interval_matrix(M), svd.matrixV().leftCols(k), Interval(s * (1 - 1e-9))));
        CHECK_FALSE(certify_singular_value_above(interval_matrix(M), svd.matrixV().leftCols(k), Interval(s * (1 + 1e-9))));
      }
    }
  }
  SECTION("rejects what proves nothing") {
    const Matrix<Rational> M = Matrix<Rational>::Identity(3, 3);
    const PrecisionScope scope(64);
    CHECK_FALSE(certify_singular_value_above(interval_matrix(M), Eigen::MatrixXd::Zero(3, 1), Interval(0)));  // V = 0
    CHECK_FALSE(certify_singular_value_above(interval_matrix(M), Eigen::MatrixXd::Identity(2, 1), Interval(0)));  // wrong shape
    CHECK_FALSE(certify_singular_value_above(interval_matrix(M), Eigen::MatrixXd::Constant(3, 1, NAN), Interval(0)));
    CHECK(certify_singular_value_above(interval_matrix(M), Eigen::MatrixXd::Identity(3, 3), Interval(0.999)));
    CHECK_FALSE(certify_singular_value_above(interval_matrix(M), Eigen::MatrixXd::Identity(3, 3), Interval(1)));  // sigma_3 = 1, not > 1
  }
}
