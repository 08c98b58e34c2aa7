// Tests for attnrank/attention/certified_softmax.hpp: the double softmax bounds
// contain the softmax of every score matrix within the score bounds, checked
// against MPFR at 256 bits (a random point of each bound, as its exact double),
// and are a few ulps wide for point scores.
#include "support.hpp"

#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/softmax.hpp>

#include <cmath>
#include <limits>

using namespace attnrank;

namespace {

/// softmax of each row of the double matrix S in MPFR at 256 bits, as doubles
/// rounded to nearest (within u of the truth: the tests allow for that).
Eigen::MatrixXd reference_softmax(const Eigen::MatrixXd& S) {
  const PrecisionScope scope(256);
  const Matrix<Real> R = S.cast<Real>();
  const Matrix<Real> P = softmax_rows(R);
  return P.unaryExpr([](const Real& x) { return x.convert_to<double>(); });
}

/// x within [lo, hi], allowing the reference's own rounding to nearest (u/2 relative).
bool within(double x, double lo, double hi) {
  const double slack = std::abs(x) * 0x1p-52;
  return lo <= x + slack && x - slack <= hi;
}

}  // namespace

TEST_CASE("attnrank::certified_softmax_bounds", "[property]") {
  rc::prop("contains the softmax of every point within the score bounds: moderate, huge, tiny and wide scores", [] {
    const auto rows = *rc::gen::inRange<Eigen::Index>(1, 5), cols = *rc::gen::inRange<Eigen::Index>(1, 7);
    const double scale = *rc::gen::element(1e-12, 1.0, 30.0, 700.0, 1e5, 1e300);
    const double width = *rc::gen::element(0.0, 1e-15, 1e-6, 0.5);
    BoundsMatrix S{Eigen::MatrixXd(rows, cols), Eigen::MatrixXd(rows, cols)};
    Eigen::MatrixXd point(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) {
        const double c = scale * *rc::gen::inRange(-1000, 1001) / 1000.0;
        const double w = width * std::max(1.0, std::abs(c)) * *rc::gen::inRange(0, 11) / 10.0;
        S.lo(i, j) = c - w;
        S.hi(i, j) = c + w;
        point(i, j) = S.lo(i, j) + (S.hi(i, j) - S.lo(i, j)) * *rc::gen::inRange(0, 9) / 8.0;
        point(i, j) = std::min(std::max(point(i, j), S.lo(i, j)), S.hi(i, j));
      }
    RC_PRE(S.lo.allFinite() && S.hi.allFinite());
    const BoundsMatrix P = certified_softmax_bounds(S);
    const Eigen::MatrixXd exact = reference_softmax(point);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) {
        RC_ASSERT(P.lo(i, j) >= 0);
        RC_ASSERT(P.hi(i, j) <= 1);
        RC_ASSERT(within(exact(i, j), P.lo(i, j), P.hi(i, j)));
      }
  });
  rc::prop("point scores of moderate size: bounds within (4 n + 40 + 4 |s - max s|) ulps of the value", [] {
    const auto rows = *rc::gen::inRange<Eigen::Index>(1, 5), cols = *rc::gen::inRange<Eigen::Index>(1, 40);
    Eigen::MatrixXd S(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) S(i, j) = *rc::gen::inRange(-20000, 20001) / 1000.0;
    const BoundsMatrix P = certified_softmax_bounds(BoundsMatrix{S, S});
    const Eigen::MatrixXd exact = reference_softmax(S);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) {
        // exp widened by 8u each way (16u), the shifted score rounded both ways
        // (2u |s - max s| relative after exp), the sums rounded down and up (about
        // n u each), the quotient once each way: (2 n + 20 + 2 |s - max s|) u, doubled.
        const double shift = S.row(i).maxCoeff() - S(i, j);
        RC_ASSERT(P.hi(i, j) - P.lo(i, j) <= (double(4 * cols + 40) + 4 * shift) * 0x1p-53 * exact(i, j) + 0x1p-1070);
      }
  });
  SECTION("non-finite bounds make their row [0, 1], the other rows unaffected") {
    BoundsMatrix S{Eigen::MatrixXd::Zero(2, 2), Eigen::MatrixXd::Zero(2, 2)};
    S.lo(0, 1) = -std::numeric_limits<double>::infinity();
    S.hi(1, 0) = std::numeric_limits<double>::quiet_NaN();
    S.lo(1, 0) = 0;
    const BoundsMatrix P = certified_softmax_bounds(S);
    CHECK(P.lo(0, 0) == 0);
    CHECK(P.hi(0, 0) == 1);
    S.hi(1, 0) = 0;
    S.lo(0, 1) = 0;
    const BoundsMatrix Q = certified_softmax_bounds(S);
    CHECK(Q.lo(1, 0) <= 0.5);
    CHECK(Q.hi(1, 0) >= 0.5);
    CHECK(Q.hi(1, 0) - Q.lo(1, 0) < 1e-14);  // exp widened by 8u each way: about 32u relative in all
  }
}

TEST_CASE("attnrank::certified_scaled_scores and max_abs_difference_upper") {
  rc::prop("the scores contain Q K^T / sqrt(d_k) (exactly, in MPFR at 256 bits); the distance bounds every point pair", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 6), d = *rc::gen::inRange<Eigen::Index>(1, 6);
    Eigen::MatrixXd Q(n, d), K(n, d);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < d; ++j) {
        Q(i, j) = std::ldexp(*rc::gen::inRange(-1000, 1001), *rc::gen::inRange(-40, 10));
        K(i, j) = std::ldexp(*rc::gen::inRange(-1000, 1001), *rc::gen::inRange(-40, 10));
      }
    const BoundsMatrix S = certified_scaled_scores(Q, K);
    const PrecisionScope scope(256);
    const Matrix<Real> exact = Matrix<Real>(Q.cast<Real>() * K.cast<Real>().transpose()) / sqrt(Real(static_cast<long>(d)));
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        RC_ASSERT(Real(S.lo(i, j)) <= exact(i, j));
        RC_ASSERT(exact(i, j) <= Real(S.hi(i, j)));
      }
    const double bound = max_abs_difference_upper(S, BoundsMatrix{Eigen::MatrixXd::Zero(n, n), Eigen::MatrixXd::Zero(n, n)});
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) RC_ASSERT(abs(exact(i, j)) <= Real(bound));
  });
}

TEST_CASE("attnrank::certified_softmax_bounds with a mask, every lower end underflowing") {
  SECTION("masked entries are exactly 0 even when every lower end underflows (once NaN: 0 / 0)") {
    // Scores 1e151 are one ulp (~1e135) wide: every shifted lower end is -1e135 and its exp 0.
    BoundsMatrix S{Eigen::MatrixXd::Constant(2, 2, 1e151), Eigen::MatrixXd::Constant(2, 2, 1e151)};
    S.lo.array() -= 1e136;
    const BoundsMatrix P = certified_softmax_bounds(S, Mask::causal(2));
    CHECK_FALSE(P.lo.hasNaN());
    CHECK_FALSE(P.hi.hasNaN());
    CHECK(P.lo(0, 1) == 0);
    CHECK(P.hi(0, 1) == 0);
    CHECK(P.hi(0, 0) == 1);  // true: the one allowed key's weight is 1
    CHECK(P.lo(1, 0) >= 0);
    CHECK(P.hi(1, 1) <= 1);
  }
}

TEST_CASE("attnrank::max_softmax_distance_upper", "[property]") {
  rc::prop("bounds the distance of the softmax of a point within the scores (MPFR at 256 bits) from the target, over "
           "several blocks of rows, masked or not, and is within a few ulps of the one-block bound",
           [] {
             const auto n = *rc::gen::inRange<Eigen::Index>(1, 300);
             const bool causal = *rc::gen::arbitrary<bool>();
             const double scale = *rc::gen::element(1.0, 30.0, 700.0);
             BoundsMatrix S{Eigen::MatrixXd(n, n), Eigen::MatrixXd(n, n)};
             for (Eigen::Index i = 0; i < n; ++i)
               for (Eigen::Index j = 0; j < n; ++j) {
                 S.lo(i, j) = scale * std::ldexp(*rc::gen::inRange(-1000, 1001), -10);
                 S.hi(i, j) = S.lo(i, j) + *rc::gen::element(0.0, 1e-12, 1e-3);
               }
             const Mask mask = Mask::causal(n);
             const Eigen::MatrixXd point = S.lo;  // a point within the bounds
             // The target: the point's softmax moved by up to 1e-3 (0 where masked).
             Eigen::MatrixXd target = Eigen::MatrixXd::Zero(n, n);
             {
               const PrecisionScope scope(256);
               const Matrix<Real> P = (causal ? softmax_rows(Matrix<Real>(point.cast<Real>()), mask) : softmax_rows(Matrix<Real>(point.cast<Real>())));
               for (Eigen::Index i = 0; i < n; ++i)
                 for (Eigen::Index j = 0; j < n; ++j)
                   target(i, j) = P(i, j).convert_to<double>() + (causal && j > i ? 0.0 : 1e-3 * ((i + 2 * j) % 3 - 1));
             }
             const BoundsMatrix T{target, target};
             const Matrix<Real> reference = [&] {
               const PrecisionScope scope(256);
               return (causal ? softmax_rows(Matrix<Real>(point.cast<Real>()), mask) : softmax_rows(Matrix<Real>(point.cast<Real>())));
             }();
             const double bound = max_softmax_distance_upper(S, causal ? &mask : nullptr, T);
             const double whole = max_abs_difference_upper(causal ? certified_softmax_bounds(S, mask)
                                                                  : certified_softmax_bounds(S), T);
             RC_ASSERT(std::isfinite(bound));
             const PrecisionScope scope(256);
             const Matrix<Real>& P = reference;
             Real distance = 0;
             for (Eigen::Index i = 0; i < n; ++i)
               for (Eigen::Index j = 0; j < n; ++j) distance = std::max(distance, Real(abs(P(i, j) - Real(target(i, j)))));
             RC_ASSERT(distance <= Real(bound));
             RC_ASSERT(std::abs(bound - whole) <= 1e-13);  // the blocks decide the one-exp-pass rule for themselves
           });
  SECTION("a row with a non-finite score bound is only known in [0, 1]; shapes that do not match are input errors") {
    BoundsMatrix S{Eigen::MatrixXd::Zero(200, 200), Eigen::MatrixXd::Zero(200, 200)};
    const BoundsMatrix T{Eigen::MatrixXd::Constant(200, 200, 0.005), Eigen::MatrixXd::Constant(200, 200, 0.005)};
    CHECK(max_softmax_distance_upper(S, nullptr, T) < 1e-12);
    S.hi(150, 3) = std::numeric_limits<double>::infinity();  // in the second block of rows
    const double d = max_softmax_distance_upper(S, nullptr, T);
    CHECK(d >= 0.995);  // that row's weights are only known in [0, 1], against 0.005
    CHECK(d <= 0.995 + 1e-15);
    const BoundsMatrix small{Eigen::MatrixXd::Zero(3, 3), Eigen::MatrixXd::Zero(3, 3)};
    CHECK_THROWS_AS(max_softmax_distance_upper(small, nullptr, T), input_error);
  }
}
