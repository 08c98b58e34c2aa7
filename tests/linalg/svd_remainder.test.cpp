// Tests for attnrank/linalg/detail/svd_remainder.hpp: the blocked pass over the
// remainder R = X - Z V^T, checked against R computed in exact rationals (its
// Frobenius norm exactly, its 2-norm by exact eigenvalue counts of R^T R), for
// every panel width and both thread counts, on balls and on doubles across the
// exponent range.
#include "rank_support.hpp"

#include <attnrank/linalg/detail/svd_remainder.hpp>

#include <cmath>
#include <limits>
#include <random>

using namespace attnrank;
using namespace attnrank::test;
using attnrank::detail::BallView;
using attnrank::detail::RemainderNorms;
using attnrank::detail::remainder_norms;

namespace {

/// A bound is a number >= 0 or +inf, never NaN.
bool is_bound(double x) { return x >= 0; }

/// Mantissas of up to six digits (some zero) times 2^(e + a jitter of a few
/// binades): one scale per matrix, so that the remainder's norms stay finite at
/// most scales (gen_double_matrix mixes 2^300 into nearly every matrix).
Eigen::MatrixXd gen_scaled_matrix(Eigen::Index r, Eigen::Index c, int e) {
  Eigen::MatrixXd m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j)
      m(i, j) = *rc::gen::inRange(0, 8) == 0 ? 0.0 : std::ldexp(*rc::gen::inRange(-1000000, 1000001) / 1000.0, e + *rc::gen::inRange(-3, 4));
  return m;
}

/// ||X||_F in double, for tolerances only.
double frobenius(const Eigen::MatrixXd& X) { return X.norm(); }

}  // namespace

TEST_CASE("attnrank::detail::remainder_norms properties", "[property]") {
  rc::prop("the bounds hold for every matrix of the ball: exact ||R||_F^2, exact eigenvalue counts of R^T R", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 13), n = *rc::gen::inRange<Eigen::Index>(1, 13);
    const auto k = *rc::gen::inRange<Eigen::Index>(1, 6);
    // Scales from the subnormal range to near overflow; Z V^T of X's size or not,
    // the radius from X's size down to X's rounding error (where it decides R's sign).
    const int e = *rc::gen::element(-1074, -1040, -500, -30, 0, 0, 30, 450, 1000, 1010);  // 1010: entries up to DBL_MAX
    const int ez = *rc::gen::element(e / 2, e / 2, e / 2 - 20, 0);
    const Eigen::MatrixXd Z = gen_scaled_matrix(m, k, ez), V = gen_scaled_matrix(n, k, e - ez);
    // X unrelated to Z V^T, or Z V^T plus an offset of one sign (a remainder of
    // one sign, where a bound that drops a side of the radius shows in every entry).
    const int shape = *rc::gen::inRange(0, 4);
    Eigen::MatrixXd mid;
    if (shape == 0) mid = gen_double_matrix(m, n);
    else if (shape == 1) mid = gen_scaled_matrix(m, n, e);
    else mid = Z * V.transpose() + (shape == 2 ? 1.0 : -1.0) * gen_scaled_matrix(m, n, e - *rc::gen::element(0, 10)).cwiseAbs();
    RC_PRE(mid.allFinite());  // at 2^1010, Z V^T plus an offset can pass DBL_MAX: no such double matrix
    const bool point = *rc::gen::inRange(0, 3) == 0;
    Eigen::MatrixXd rad = Eigen::MatrixXd::Zero(m, n);
    Matrix<Rational> X = exact_of(mid);
    // A point of the ball: inside, or at one corner (where a bound that drops a
    // side of the radius is too small in every entry at once).
    const int sign = shape == 2 ? 1 : shape == 3 ? -1 : 1;
    const int corner = *rc::gen::element(0, 1, -1, sign, sign);
    if (!point)
      for (Eigen::Index i = 0; i < m; ++i)
        for (Eigen::Index j = 0; j < n; ++j) {
          rad(i, j) = std::ldexp(*rc::gen::inRange(0, 100), e + *rc::gen::element(-1074, -45, -20, -10, 0, 0));
          const Rational theta = corner != 0 ? Rational(corner) : Rational(*rc::gen::inRange(-8, 9), 8);
          X(i, j) += theta * to_rational(rad(i, j));
        }
    const auto panel = *rc::gen::inRange<Eigen::Index>(1, 10);
    const int threads = *rc::gen::element(1, 2);
    const RemainderNorms r = remainder_norms(point ? BallView{mid} : BallView{mid, &rad}, Z, V, panel, threads);
    RC_ASSERT(is_bound(r.frobenius2));
    RC_ASSERT(is_bound(r.norm2));
    RC_TAG(std::isfinite(r.frobenius2) ? "finite" : "overflow");
    const Matrix<Rational> R = X - exact_of(Z) * exact_of(V).transpose();
    if (std::isfinite(r.frobenius2)) {
      Rational f2 = 0;
      for (Eigen::Index i = 0; i < m; ++i)
        for (Eigen::Index j = 0; j < n; ++j) f2 += R(i, j) * R(i, j);
      RC_ASSERT(to_rational(r.frobenius2) >= f2);
    }
    if (std::isfinite(r.norm2)) {
      const Rational t = to_rational(r.norm2);
      const auto above = eigenvalues_above(gram(R), t * t);
      RC_ASSERT(!above || *above == 0);  // no singular value of R above the bound
    }
  });
  rc::prop("on doubles of one size the bounds are the exact norms up to rounding: (k + 2) u per entry", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 40), n = *rc::gen::inRange<Eigen::Index>(1, 40);
    const auto k = *rc::gen::inRange<Eigen::Index>(1, 8);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    std::uniform_real_distribution<double> unit(-1, 1);
    const auto random = [&](Eigen::Index r, Eigen::Index c) { return Eigen::MatrixXd(Eigen::MatrixXd::NullaryExpr(r, c, [&] { return unit(rng); })); };
    const Eigen::MatrixXd Z = random(m, k), V = random(n, k);
    // X near Z V^T (a small remainder, where looseness would show) or far from it.
    const double scale = *rc::gen::element(1e-12, 1e-6, 1.0);
    const Eigen::MatrixXd X = Z * V.transpose() + scale * random(m, n);
    const RemainderNorms r = remainder_norms(BallView{X}, Z, V, *rc::gen::inRange<Eigen::Index>(1, 10), *rc::gen::element(1, 2));
    const Matrix<Rational> R = exact_of(X) - exact_of(Z) * exact_of(V).transpose();
    double exact_f = 0;
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) exact_f += std::pow(R(i, j).convert_to<double>(), 2);
    exact_f = std::sqrt(exact_f);
    // Each entry's bound exceeds |R_ij| by at most about (k + 2) u (|X_ij| + sum_l |z_il v_jl|).
    const double slack = 4.0 * static_cast<double>(k + 2) * 0x1p-53 * (frobenius(X) + frobenius(Z) * frobenius(V));
    RC_ASSERT(std::sqrt(r.frobenius2) <= (exact_f + slack) * (1 + 1e-12));
    RC_ASSERT(r.norm2 <= std::sqrt(r.frobenius2) * (1 + 0x1p-51));  // its Frobenius bound, rounded up
  });
}

TEST_CASE("attnrank::detail::remainder_norms") {
  SECTION("two threads and 64-column panels (the default at this size) agree with one panel on one thread") {
    std::mt19937_64 rng(20261204);
    std::normal_distribution<double> normal;
    const auto random = [&](Eigen::Index r, Eigen::Index c) { return Eigen::MatrixXd(Eigen::MatrixXd::NullaryExpr(r, c, [&] { return normal(rng); })); };
    const Eigen::MatrixXd Z = random(300, 70), V = random(203, 70);  // 300 * 203 * 70 > 4e6; 203 = 3 panels and a bit
    const Eigen::MatrixXd X = Z * V.transpose() + 1e-3 * random(300, 203);
    const Eigen::MatrixXd rad = Eigen::MatrixXd::Constant(300, 203, 1e-9);
    for (const Eigen::MatrixXd* r : {static_cast<const Eigen::MatrixXd*>(nullptr), &rad}) {
      const RemainderNorms fast = remainder_norms(BallView{X, r}, Z, V);
      const RemainderNorms one = remainder_norms(BallView{X, r}, Z, V, 203, 1);
      CHECK(std::abs(fast.frobenius2 - one.frobenius2) <= 1e-12 * one.frobenius2);
      CHECK(std::abs(fast.norm2 - one.norm2) <= 1e-12 * one.norm2);
      // The remainder is the 1e-3 noise (plus the radius): about 1e-3 sqrt(300 * 203).
      CHECK(std::sqrt(fast.frobenius2) < 1e-3 * std::sqrt(300.0 * 203.0) * 1.1);
    }
  }
  SECTION("the radius counts on both sides: X = Z V^T +- (1 + rad) reaches |R| = 1.5 at either end") {
    const Eigen::MatrixXd Z = Eigen::MatrixXd::Constant(2, 1, 3.0), V = Eigen::MatrixXd::Constant(2, 1, 0.5);
    const Eigen::MatrixXd rad = Eigen::MatrixXd::Constant(2, 2, 0.5);
    for (const double side : {1.0, -1.0}) {
      const Eigen::MatrixXd mid = Z * V.transpose() + Eigen::MatrixXd::Constant(2, 2, side);  // exact
      const RemainderNorms r = remainder_norms(BallView{mid, &rad}, Z, V, 1, 2);
      CHECK(r.frobenius2 >= 4 * 2.25);
      CHECK(r.frobenius2 <= 4 * 2.25 * (1 + 1e-15));
      CHECK(r.norm2 >= 3.0);  // ||1.5 ones(2, 2)||_2
    }
  }
  SECTION("an overflowing remainder gives +inf, never NaN") {
    Eigen::MatrixXd X = Eigen::MatrixXd::Constant(3, 3, 1e300);
    X(1, 1) = -1e308;
    const Eigen::MatrixXd Z = Eigen::MatrixXd::Constant(3, 1, 1e200), V = Eigen::MatrixXd::Constant(3, 1, 1e200);
    const RemainderNorms r = remainder_norms(BallView{X}, Z, V, 2, 2);
    CHECK(r.frobenius2 == std::numeric_limits<double>::infinity());
    CHECK(r.norm2 == std::numeric_limits<double>::infinity());
  }
  SECTION("empty shapes: zero") {
    const Eigen::MatrixXd X(0, 4), Z(0, 2), V = Eigen::MatrixXd::Ones(4, 2);
    const RemainderNorms r = remainder_norms(BallView{X}, Z, V);
    CHECK(r.frobenius2 == 0);
    CHECK(r.norm2 == 0);
  }
}
