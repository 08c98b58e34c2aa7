// attnrank/linalg/certified_rank.hpp, linalg/certified_determinant.hpp, numbers/directed_rounding.hpp.
// Exact rationals are the oracle (Arb's habit): every certified bound is checked
// against the exact rank or determinant of the same data.
#include "rank_support.hpp"

#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <cmath>
#include <limits>

using namespace attnrank;
using namespace attnrank::test;

namespace {

Matrix<Rational> exact_of(const Eigen::MatrixXd& D) {
  return D.unaryExpr([](double x) { return to_rational(x); });
}

Eigen::MatrixXd gen_double_matrix(Eigen::Index r, Eigen::Index c) {
  Eigen::MatrixXd m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) {
      const double mant = *rc::gen::inRange(-1000000, 1000001) / 1000.0;
      const int e = *rc::gen::element(0, 0, 0, -40, 40, -1060, 300);  // includes subnormal products
      m(i, j) = std::ldexp(mant, e);
    }
  return m;
}

unsigned gen_bits() { return *rc::gen::element(53u, 64u, 128u, 256u); }

Matrix<Rational> hilbert(Eigen::Index n) { return *builtin_matrix("hilbert:" + std::to_string(n)); }

}  // namespace

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
  }
  SECTION("Hilbert matrices: honest at 53 bits, exact once the precision suffices") {
    const CertifiedRank low = certified_rank(hilbert(20), 53);
    CHECK(low.lower < 20);
    CHECK(low.upper == 20);
    const CertifiedRank high = certified_rank(hilbert(20), 256);
    CHECK(high.lower == 20);
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
    CHECK_THROWS_AS(certified_determinant(A), input_error);
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

TEST_CASE("attnrank::certified_determinant") {
  SECTION("well-conditioned: narrow") {
    Eigen::MatrixXd A = Eigen::MatrixXd::Identity(50, 50) * 4 + Eigen::MatrixXd::Constant(50, 50, 0.01);
    const CertifiedDeterminant d = certified_determinant(A);
    REQUIRE(d.preconditioned);
    const Real width = upper_bound(d.det) - lower_bound(d.det);
    CHECK(width / abs(upper_bound(d.det)) < 1e-12);
    // Closed form: det(4 I + 0.01 J) = 4^49 (4 + 50 * 0.01); 0.01 is not a double,
    // so compare with the exact value of the double that was stored.
    const Rational b = to_rational(0.01);
    CHECK(scalar_traits<Interval>::contains(d.det, det_scaled_identity_plus_ones(Rational(4), b, 50)));
  }
  SECTION("singular: Hadamard's bound, which contains 0, flagged as such") {
    Matrix<Rational> A(3, 3);
    A << 1, 2, 3, 4, 5, 6, 7, 8, 9;
    const CertifiedDeterminant d = certified_determinant(A);
    CHECK_FALSE(d.preconditioned);
    CHECK(d.method == "hadamard");
    CHECK(scalar_traits<Interval>::contains(d.det, Rational(0)));
  }
  SECTION("Hilbert 12: raising the precision narrows the enclosure around the exact value") {
    const Matrix<Rational> H = hilbert(12);
    const Rational exact = exact_determinant(H);
    Real last_width = -1;
    for (unsigned bits : {53u, 128u, 256u}) {
      const CertifiedDeterminant d = certified_determinant(H, bits);
      CHECK(scalar_traits<Interval>::contains(d.det, exact));
      const Real width = upper_bound(d.det) - lower_bound(d.det);
      if (last_width >= 0) CHECK(width < last_width);
      last_width = width;
    }
  }
  SECTION("a non-square matrix is an input error") {
    CHECK_THROWS_AS(certified_determinant(Matrix<Rational>(2, 3)), input_error);
  }
  SECTION("the audit's singular 6 x 6 (rank 4): a true enclosure at every precision, never NaN") {
    const Matrix<Rational> A = parse_matrix(
        "31,37,-33,-26,2,-50\n22,-5,-4,20,61,-30\n55,-8,6,-5,-1,-11\n-4,24,-10,-10,16,-22\n-3,32,-12,-23,-7,-19\n"
        "-27,-7,39,3,0,38\n", "the audit matrix");
    REQUIRE(exact_determinant(A) == 0);
    for (unsigned bits : {53u, 64u, 68u, 128u, 256u}) {
      INFO("bits " << bits);
      const CertifiedDeterminant d = certified_determinant(A, bits);
      CHECK(scalar_traits<Interval>::is_finite(d.det));
      CHECK(scalar_traits<Interval>::contains(d.det, Rational(0)));
      CHECK_FALSE(std::isnan(d.eps));
      CHECK_FALSE(std::signbit(d.eps));
    }
  }
  SECTION("entries near the double overflow: a true enclosure (products overflow to inf - inf)") {
    Eigen::MatrixXd A(3, 3);
    A << 1e300, -1e300, 3e299, 2e300, 1e300, -1e300, -1e300, 3e300, 1e300;
    const CertifiedDeterminant d = certified_determinant(A);
    CHECK_FALSE(mpfi_nan_p(d.det.backend().data()));
    CHECK(scalar_traits<Interval>::contains(d.det, exact_determinant(exact_of(A))));
  }
}

TEST_CASE("attnrank::detail::det_from_near_identity: NaN is never an enclosure") {
  const PrecisionScope scope(64);
  const Interval nan = Interval(std::numeric_limits<double>::quiet_NaN());
  const Interval small = Interval(0.25), one = Interval(1);
  CHECK(detail::det_from_near_identity(Interval(0), small, 3, 1, one).has_value());
  CHECK_FALSE(detail::det_from_near_identity(nan, small, 3, 1, one).has_value());
  CHECK_FALSE(detail::det_from_near_identity(Interval(0), nan, 3, 1, one).has_value());
  CHECK_FALSE(detail::det_from_near_identity(Interval(0), small, 3, 1, nan).has_value());
  CHECK_FALSE(detail::det_from_near_identity(Interval(0), one, 3, 1, one).has_value());  // eps must be < 1
  CHECK_FALSE(detail::det_from_near_identity(Interval(0), small, 3, 1, Interval(0)).has_value());
}

TEST_CASE("attnrank::certified_determinant properties", "[property]") {
  rc::prop("the certified determinant contains the exact determinant, at every precision", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(0, 9);
    const Matrix<Rational> A = *rc::gen::arbitrary<bool>() ? gen_matrix(n, n) : gen_low_rank(n, n);
    const unsigned bits = gen_bits();
    const CertifiedDeterminant d = certified_determinant(A, bits);
    RC_ASSERT(scalar_traits<Interval>::contains(d.det, exact_determinant(A)));
  });
  rc::prop("singular and nearly singular integer matrices get a true enclosure, never NaN", [] {
    // The audit's failures: integer matrices of rank n - 1 or n - 2 (pivots that
    // are rounding residue, inverses of 10^18), and the same matrix off by 1/10^k.
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 11);
    const auto r = *rc::gen::inRange<Eigen::Index>(std::max<Eigen::Index>(0, n - 3), n);
    const auto to_rational_matrix = [](const Matrix<Integer>& Z) { return Matrix<Rational>(Z.unaryExpr([](const Integer& z) { return Rational(z); })); };
    Matrix<Rational> A = to_rational_matrix(gen_integer_matrix(n, r, 8)) * to_rational_matrix(gen_integer_matrix(r, n, 8));
    if (*rc::gen::arbitrary<bool>())
      A(*rc::gen::inRange<Eigen::Index>(0, n), *rc::gen::inRange<Eigen::Index>(0, n)) +=
          Rational(1, boost::multiprecision::pow(Integer(10), *rc::gen::inRange(1u, 30u)));
    const unsigned bits = *rc::gen::element(53u, 64u, 68u, 128u, 256u);
    const CertifiedDeterminant d = certified_determinant(A, bits);
    RC_ASSERT(!mpfi_nan_p(d.det.backend().data()));
    RC_ASSERT(!std::isnan(d.eps));
    RC_ASSERT(scalar_traits<Interval>::contains(d.det, exact_determinant(A)));
    if (d.preconditioned) RC_ASSERT(!scalar_traits<Interval>::contains(d.det, Rational(0)));
  });
  rc::prop("det(A B) overlaps det(A) det(B)", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7);
    const Eigen::MatrixXd A = gen_double_matrix(n, n).unaryExpr([](double x) { return std::fmod(x, 100.0); });
    const Eigen::MatrixXd B = gen_double_matrix(n, n).unaryExpr([](double x) { return std::fmod(x, 100.0); });
    const BoundsMatrix AB = certified_product_bounds(A, B);
    const CertifiedDeterminant dab = certified_determinant(to_ball(AB));
    const PrecisionScope scope(128);
    const Interval prod = certified_determinant(A).det * certified_determinant(B).det;
    RC_ASSERT(!(upper_bound(dab.det) < lower_bound(prod) || upper_bound(prod) < lower_bound(dab.det)));
  });
}
