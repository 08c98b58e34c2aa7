// attnrank/linalg/certified_rank.hpp and numbers/directed_rounding.hpp's
// certified products. Exact rationals are the oracle (Arb's habit): every
// certified bound is checked against the exact rank of the same data.
#include "rank_support.hpp"

#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <cmath>
#include <limits>

using namespace attnrank;
using namespace attnrank::test;

TEST_CASE("attnrank::certified_product_bounds", "[property]") {
  rc::prop("directed-rounding bounds contain the exact product of two double matrices", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 7), k = *rc::gen::inRange<Eigen::Index>(1, 7),
               n = *rc::gen::inRange<Eigen::Index>(1, 7);
    const Eigen::MatrixXd A = gen_double_matrix(m, k), B = gen_double_matrix(k, n);
    const BoundsMatrix b = certified_product_bounds(A, B);
    const Matrix<Rational> exact = exact_of(A) * exact_of(B);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        RC_ASSERT(to_rational(b.lo(i, j)) <= exact(i, j));
        RC_ASSERT(exact(i, j) <= to_rational(b.hi(i, j)));
      }
    REQUIRE(std::fegetround() == FE_TONEAREST);  // the scope restored the mode
  });
  rc::prop("ball products contain the product with any matrix in the ball", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 5);
    const Eigen::MatrixXd R = gen_double_matrix(n, n);
    // Dyadic entries with few bits, so mid +- t rad is exact for t in [-1, 1] steps of 1/4.
    const auto dyadic = [&](int lo) {
      Eigen::MatrixXd m(n, n);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j) m(i, j) = *rc::gen::inRange(lo, 1 << 20) / 1024.0;
      return m;
    };
    const BallMatrix M{dyadic(-(1 << 20)), dyadic(0)};
    Eigen::MatrixXd inside = M.mid;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) inside(i, j) += *rc::gen::inRange(-4, 5) / 4.0 * M.rad(i, j);
    const BoundsMatrix b = certified_product_bounds(R, M);
    const Matrix<Rational> exact = exact_of(R) * exact_of(inside);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        RC_ASSERT(to_rational(b.lo(i, j)) <= exact(i, j));
        RC_ASSERT(exact(i, j) <= to_rational(b.hi(i, j)));
      }
  });
}

TEST_CASE("attnrank::certified_rank") {
  SECTION("full rank, deficient, and shapes") {
    Matrix<Rational> A(3, 3);
    A << 1, 2, 3, 4, 5, 6, 7, 8, 9;
    const CertifiedRank r = certified_rank(A);
    CHECK(r.lower == 2);
    CHECK(r.upper == 3);
    CHECK(r.residual_bound < 1);
    CHECK(certified_rank(*builtin_matrix("diag:3:0.8")).lower == 3);
    CHECK(certified_rank(Matrix<Rational>(Matrix<Rational>::Zero(2, 5))).lower == 0);
    CHECK(certified_rank(Matrix<Rational>(0, 4)).upper == 0);
    for (const auto& [m, n] : {std::pair<Eigen::Index, Eigen::Index>{8, 0}, {0, 8}, {9, 0}}) {
      const CertifiedRank e = certified_rank(Matrix<Rational>(m, n), 128);
      CHECK(e.lower == 0);
      CHECK(e.upper == 0);
    }
  }
  SECTION("Hilbert matrices: honest at 53 bits, exact once the precision suffices") {
    // Hilbert 20 (condition number ~1e28) is at the edge of the two-stage test;
    // Hilbert 24 (~1e34) is past it.
    const CertifiedRank edge = certified_rank(hilbert(20), 53);
    CHECK(edge.lower == 20);
    CHECK(edge.method == "double-double");
    const CertifiedRank low = certified_rank(hilbert(24), 53);
    CHECK(low.lower < 24);
    CHECK(low.upper == 24);
    const CertifiedRank high = certified_rank(hilbert(24), 256);
    CHECK(high.lower == 24);
    CHECK(high.method == "mpfi");
  }
  SECTION("the interval matrix containing a singular matrix is never called full rank") {
    const PrecisionScope scope(128);
    Matrix<Interval> A(2, 2);
    A << Interval(1), Interval(2), Interval(2), Interval(4);
    Interval wobble;
    mpfi_interv_d(wobble.backend().data(), 3.999, 4.001);
    A(1, 1) = wobble;
    CHECK(certified_rank(A).lower == 1);
  }
  SECTION("NaN and infinity are input errors") {
    Eigen::MatrixXd A = Eigen::MatrixXd::Identity(2, 2);
    A(1, 0) = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_AS(certified_rank(A), input_error);
    A(1, 0) = std::numeric_limits<double>::infinity();
    CHECK_THROWS_AS(certified_rank(A), input_error);
  }
  SECTION("precision outside the supported range is an input error") {
    CHECK_THROWS_AS(certified_rank(hilbert(3), 8), input_error);
  }
}

TEST_CASE("attnrank::certified_rank properties", "[property]") {
  rc::prop("the certified rank bounds bracket the exact rank of the same rational matrix", [] {
    const Matrix<Rational> A = gen_structured_rational_matrix();
    const unsigned bits = gen_bits();
    const CertifiedRank r = certified_rank(A, bits);
    const Eigen::Index exact = exact_rank(A).rank;
    RC_ASSERT(r.lower <= exact);
    RC_ASSERT(exact <= r.upper);
    RC_ASSERT(r.upper == std::min(A.rows(), A.cols()));
  });
  rc::prop("small integer matrices are ranked exactly at 128 bits", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 9), n = *rc::gen::inRange<Eigen::Index>(1, 9);
    const auto k = *rc::gen::inRange<Eigen::Index>(0, std::min(m, n) + 1);
    const Matrix<Integer> Z = gen_integer_matrix(m, k, 9) * gen_integer_matrix(k, n, 9);
    const Matrix<Rational> A = Z.unaryExpr([](const Integer& z) { return Rational(z); });
    RC_ASSERT(certified_rank(A, 128).lower == exact_rank(A).rank);
  });
}

