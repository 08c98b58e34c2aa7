// attnrank/linalg/certified_determinant.hpp. Exact rationals are the oracle:
// every enclosure is checked against the exact determinant of the same data.
#include "rank_support.hpp"

#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/numbers/balls.hpp>

#include <cmath>
#include <limits>

using namespace attnrank;
using namespace attnrank::test;

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
  SECTION("NaN and infinity are input errors") {
    Eigen::MatrixXd A = Eigen::MatrixXd::Identity(2, 2);
    A(1, 0) = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_AS(certified_determinant(A), input_error);
    A(1, 0) = -std::numeric_limits<double>::infinity();
    CHECK_THROWS_AS(certified_determinant(A), input_error);
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
