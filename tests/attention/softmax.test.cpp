// Tests for attnrank/attention/softmax.hpp in every floating tier.
#include "support.hpp"

#include <cmath>

using namespace attnrank;
using attnrank::test::encloses;

TEST_CASE("attnrank::softmax_rows [double]") {
  SECTION("huge and tiny scores neither overflow nor lose the distribution") {
    Matrix<double> S(4, 3);
    S << 1e6, 0, -1e6,          //
        1e-12, 2e-12, 0,        //
        -1e6, -1e6 + 1, -1e6,   //
        1e300, -1e300, 1e300;
    const Matrix<double> A = softmax_rows(S);
    CHECK(A.allFinite());
    CHECK(A(0, 0) == 1.0);
    CHECK(A(0, 2) == 0.0);
    CHECK(A(1, 0) == Approx(1.0 / 3).epsilon(1e-11));
    CHECK(A(2, 1) == Approx(std::exp(1.0) / (2 + std::exp(1.0))).epsilon(1e-9));
    CHECK(A(3, 0) == 0.5);
    for (Eigen::Index r = 0; r < A.rows(); ++r) CHECK(A.row(r).sum() == Approx(1.0).epsilon(1e-15));
  }
  SECTION("a zero row is flat: 1/n each (the abstaining head)") {
    const Matrix<double> A = softmax_rows(Matrix<double>::Zero(1, 3).eval());
    CHECK(A(0, 0) == Approx(1.0 / 3).epsilon(1e-15));
  }
  SECTION("one column gives weight 1") { CHECK(softmax_rows(Matrix<double>::Constant(2, 1, 5.0).eval())(1, 0) == 1.0); }
}

TEST_CASE("attnrank::softmax_rows [mpfi]") {
  rc::prop("the interval softmax encloses the MPFR softmax at four times the precision", [] {
    const auto n = *rc::gen::inRange(1, 7);
    const int magnitude = *rc::gen::element(0, 6, -12);
    std::vector<Rational> s;
    for (int k = 0; k < n; ++k) {
      Rational v(*rc::gen::inRange(-1000, 1001), 1000);
      for (int i = 0; i < std::abs(magnitude); ++i) v = magnitude > 0 ? Rational(v * 10) : Rational(v / 10);
      s.push_back(v);
    }
    Matrix<Rational> S(1, n);
    for (int k = 0; k < n; ++k) S(0, k) = s[static_cast<std::size_t>(k)];
    const unsigned bits = *rc::gen::inRange(40u, 200u);
    Matrix<Interval> enclosure;
    {
      PrecisionScope scope(bits);
      enclosure = softmax_rows(from_rational<Interval>(S));
    }
    PrecisionScope fine(4 * bits);
    const Matrix<Real> reference = softmax_rows(from_rational<Real>(S));
    for (int k = 0; k < n; ++k) RC_ASSERT(encloses(enclosure(0, k), reference(0, k)));
  });
  SECTION("scores of 1e8 still give a bounded, sound enclosure") {
    PrecisionScope scope(64);
    Matrix<Interval> S(1, 2);
    S(0, 0) = Interval(100000000);
    S(0, 1) = Interval(-100000000);
    const Matrix<Interval> A = softmax_rows(S);
    CHECK(upper_bound(A(0, 0)) <= 1);
    CHECK(lower_bound(A(0, 0)) > Real("0.999"));
  }
  SECTION("scores of 1e300, beyond MPFR's exponent range, give sound enclosures") {
    PrecisionScope scope(64);
    Matrix<Interval> S(1, 3);
    S(0, 0) = Interval("1e300");
    S(0, 1) = Interval("-1e300");
    S(0, 2) = Interval("1e300");
    const Matrix<Interval> A = softmax_rows(S);
    for (Eigen::Index j = 0; j < 3; ++j) {
      CHECK(scalar_traits<Interval>::is_finite(A(0, j)));
      CHECK(lower_bound(A(0, j)) >= 0);
      CHECK(upper_bound(A(0, j)) <= 1);
    }
    CHECK(scalar_traits<Interval>::contains(A(0, 0), Rational(1, 2)));
    CHECK(upper_bound(A(0, 1)) < Real("1e-1000"));
    CHECK(lower_bound(A(0, 1)) >= 0);
  }
}

TEST_CASE("attnrank::softmax_rows [mpfr]") {
  // proofs/SoftmaxInversion.v, softmax_shift.
  rc::prop("softmax is unchanged by adding a constant to a row", [] {
    PrecisionScope scope(200);
    const auto n = *rc::gen::inRange(1, 6);
    Matrix<Real> S(1, n), T(1, n);
    const Real c = Real(*rc::gen::inRange(-100000, 100000)) / 7;
    for (int k = 0; k < n; ++k) {
      S(0, k) = Real(*rc::gen::inRange(-1000, 1000)) / 3;
      T(0, k) = S(0, k) + c;
    }
    const Matrix<Real> a = softmax_rows(S), b = softmax_rows(T);
    for (int k = 0; k < n; ++k) {
      const Real diff = abs(Real(a(0, k) - b(0, k)));
      RC_ASSERT(diff < Real("1e-50"));
    }
  });
  SECTION("scores of 1e12, whose exp is beyond MPFR's exponent range, give the right weights") {
    PrecisionScope scope(100);
    Matrix<Real> S(1, 3);
    S << Real("1e12"), Real(0), Real("1e12") - 1;
    const Matrix<Real> A = softmax_rows(S);
    const Real e = exp(Real(-1));
    CHECK(abs(Real(A(0, 0) - 1 / (1 + e))) < Real("1e-28"));
    CHECK(A(0, 1) == 0);
    CHECK(abs(Real(A(0, 2) - e / (1 + e))) < Real("1e-28"));
  }
}
