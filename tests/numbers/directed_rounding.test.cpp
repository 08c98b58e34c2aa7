// attnrank/numbers/directed_rounding.hpp, balls.hpp and scaling.hpp: the soundness
// primitives of the certified double tier. Each law is checked against exact
// rationals, on doubles of every magnitude (tiny, huge, negative, subnormal).
#include "support.hpp"

#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/scaling.hpp>

#include <atomic>
#include <cfenv>
#include <cmath>
#include <thread>

using namespace attnrank;
using attnrank::test::gen_matrix;

namespace {

/// A double of any sign and magnitude, from a random mantissa and a binary exponent
/// in [lo, hi]; sometimes 0 or a subnormal.
double gen_double(int lo = -60, int hi = 60) {
  const int kind = *rc::gen::inRange(0, 10);
  if (kind == 0) return 0.0;
  if (kind == 1) return std::ldexp(static_cast<double>(*rc::gen::inRange(1, 1 << 20)), -1070);  // subnormal
  const double m = static_cast<double>(*rc::gen::inRange<long>(-(1L << 53) + 1, 1L << 53)) * 0x1p-53;
  return std::ldexp(m, *rc::gen::inRange(lo, hi));
}

Eigen::MatrixXd gen_doubles(Eigen::Index r, Eigen::Index c, int lo = -60, int hi = 60) {
  Eigen::MatrixXd m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = gen_double(lo, hi);
  return m;
}

Matrix<Rational> exact(const Eigen::MatrixXd& m) {
  Matrix<Rational> q(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) q(i, j) = to_rational(m(i, j));
  return q;
}

/// lo <= x <= hi entrywise, in exact arithmetic.
bool bounds_contain(const BoundsMatrix& b, const Matrix<Rational>& x) {
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j)
      if (!(to_rational(b.lo(i, j)) <= x(i, j) && x(i, j) <= to_rational(b.hi(i, j)))) return false;
  return true;
}

/// |x - mid| <= rad entrywise, in exact arithmetic.
bool ball_contains(const BallMatrix& b, const Matrix<Rational>& x) {
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      if (!std::isfinite(b.rad(i, j))) continue;  // an infinite radius contains everything
      if (!(abs(x(i, j) - to_rational(b.mid(i, j))) <= to_rational(b.rad(i, j)))) return false;
    }
  return true;
}

}  // namespace

TEST_CASE("attnrank::ThreadRounding and RoundingScope", "[unit]") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  SECTION("a scope sets its mode and restores the one before, nested in any order") {
    {
      const UpwardRounding up;
      CHECK(std::fegetround() == FE_UPWARD);
      {
        const ThreadRounding<FE_TONEAREST> nearest;
        CHECK(std::fegetround() == FE_TONEAREST);
        const DownwardRounding down;
        CHECK(std::fegetround() == FE_DOWNWARD);
      }
      CHECK(std::fegetround() == FE_UPWARD);
    }
    CHECK(std::fegetround() == FE_TONEAREST);
  }
  SECTION("the mode is this thread's: a running thread keeps rounding to nearest") {
    // (A thread started inside the scope inherits the mode on Linux; the directed
    // products set it in every thread they use either way.)
    std::atomic<bool> set{false};
    int other = -1;
    std::thread watcher([&] {
      while (!set) std::this_thread::yield();
      other = std::fegetround();
    });
    {
      const UpwardRounding up;
      set = true;
      watcher.join();
    }
    CHECK(other == FE_TONEAREST);
  }
  SECTION("Eigen works on the calling thread only while a rounding scope lives, and gets its threads back") {
    const int before = Eigen::nbThreads();
    {
      const UpwardRounding up;
      CHECK(Eigen::nbThreads() == 1);
    }
    CHECK(Eigen::nbThreads() == before);
  }
  SECTION("rounding really goes the asked way: 1 + 2^-60 rounds up and down to different doubles") {
    volatile double tiny = 0x1p-60;
    double up_sum, down_sum;
    {
      const UpwardRounding up;
      up_sum = 1.0 + tiny;
      detail::rounding_barrier(up_sum);
    }
    {
      const DownwardRounding down;
      down_sum = 1.0 + tiny;
      detail::rounding_barrier(down_sum);
    }
    CHECK(up_sum == std::nextafter(1.0, 2.0));
    CHECK(down_sum == 1.0);
  }
}

TEST_CASE("attnrank::certified_product_bounds", "[property]") {
  rc::prop("the bounds of A B contain the exact product of the doubles", [] {
    const auto r = *rc::gen::inRange<Eigen::Index>(1, 7), k = *rc::gen::inRange<Eigen::Index>(1, 7),
               c = *rc::gen::inRange<Eigen::Index>(1, 7);
    const Eigen::MatrixXd A = gen_doubles(r, k), B = gen_doubles(k, c);
    RC_ASSERT(bounds_contain(certified_product_bounds(A, B), Matrix<Rational>(exact(A) * exact(B))));
  });
  rc::prop("the bounds of X Y contain every product of corners of two balls", [] {
    const auto r = *rc::gen::inRange<Eigen::Index>(1, 5), k = *rc::gen::inRange<Eigen::Index>(1, 5),
               c = *rc::gen::inRange<Eigen::Index>(1, 5);
    const BallMatrix X{gen_doubles(r, k), gen_doubles(r, k).cwiseAbs()}, Y{gen_doubles(k, c), gen_doubles(k, c).cwiseAbs()};
    // A corner: mid +- rad in each entry, the signs drawn at random.
    const auto corner = [](const BallMatrix& b) {
      Matrix<Rational> q = exact(b.mid);
      for (Eigen::Index i = 0; i < q.rows(); ++i)
        for (Eigen::Index j = 0; j < q.cols(); ++j)
          q(i, j) += (*rc::gen::arbitrary<bool>() ? 1 : -1) * to_rational(b.rad(i, j));
      return q;
    };
    const BoundsMatrix b = certified_product_bounds(X, Y);
    for (int t = 0; t < 4; ++t) RC_ASSERT(bounds_contain(b, Matrix<Rational>(corner(X) * corner(Y))));
  });
}

TEST_CASE("attnrank::to_ball", "[property]") {
  rc::prop("the ball of bounds [lo, hi] contains both ends", [] {
    const Eigen::MatrixXd a = gen_doubles(3, 4), b = gen_doubles(3, 4);
    const BoundsMatrix bounds{a.cwiseMin(b), a.cwiseMax(b)};
    const BallMatrix ball = to_ball(bounds);
    RC_ASSERT(ball_contains(ball, exact(bounds.lo)));
    RC_ASSERT(ball_contains(ball, exact(bounds.hi)));
  });
  rc::prop("the ball of a rational matrix contains it, with radius 0 when an entry is a double", [] {
    const Matrix<Rational> q = gen_matrix(3, 3);
    const BallMatrix ball = to_ball(q);
    RC_ASSERT(ball_contains(ball, q));
    for (Eigen::Index i = 0; i < 3; ++i)
      for (Eigen::Index j = 0; j < 3; ++j)
        if (to_rational(ball.mid(i, j)) == q(i, j)) RC_ASSERT(ball.rad(i, j) == 0);
  });
  rc::prop("the ball of a double-double ball contains its centre hi + lo and its corners", [] {
    const Eigen::MatrixXd hi = gen_doubles(2, 3);
    Eigen::MatrixXd lo = gen_doubles(2, 3, -120, -60);
    const DoubleDoubleBall dd{hi, lo, gen_doubles(2, 3, -110, -70).cwiseAbs()};
    const BallMatrix ball = to_ball(dd);
    const Matrix<Rational> centre = exact(dd.hi) + exact(dd.lo);
    RC_ASSERT(ball_contains(ball, centre));
    RC_ASSERT(ball_contains(ball, Matrix<Rational>(centre + exact(dd.rad))));
    RC_ASSERT(ball_contains(ball, Matrix<Rational>(centre - exact(dd.rad))));
  });
}

TEST_CASE("attnrank::norm_inf_upper and identity_minus", "[property]") {
  rc::prop("norm_inf_upper is at least every row sum of |x| over the bounds", [] {
    const Eigen::MatrixXd a = gen_doubles(4, 4), b = gen_doubles(4, 4);
    const BoundsMatrix bounds{a.cwiseMin(b), a.cwiseMax(b)};
    const Rational norm = to_rational(norm_inf_upper(bounds));
    for (Eigen::Index i = 0; i < 4; ++i) {
      Rational row = 0;
      for (Eigen::Index j = 0; j < 4; ++j) {
        const Rational l = abs(to_rational(bounds.lo(i, j))), h = abs(to_rational(bounds.hi(i, j)));
        row += l > h ? l : h;
      }
      RC_ASSERT(row <= norm);
    }
  });
  rc::prop("identity_minus encloses I - X at both ends of X", [] {
    const Eigen::MatrixXd a = gen_doubles(3, 3), b = gen_doubles(3, 3);
    const BoundsMatrix bounds{a.cwiseMin(b), a.cwiseMax(b)};
    const BoundsMatrix r = identity_minus(bounds);
    const Matrix<Rational> I = Matrix<Rational>::Identity(3, 3);
    RC_ASSERT(bounds_contain(r, Matrix<Rational>(I - exact(bounds.lo))));
    RC_ASSERT(bounds_contain(r, Matrix<Rational>(I - exact(bounds.hi))));
  });
}

TEST_CASE("attnrank::ScaleBounds and scale_bounds", "[property]") {
  SECTION("1/sqrt(d) is enclosed: lo^2 d <= 1 <= hi^2 d exactly, and exact for powers of 4") {
    for (Eigen::Index d : {1, 2, 3, 4, 7, 16, 64, 100, 128, 1000003}) {
      const ScaleBounds s = ScaleBounds::inverse_sqrt(d);
      const Rational lo = to_rational(s.lo), hi = to_rational(s.hi);
      CHECK(lo * lo * d <= 1);
      CHECK(hi * hi * d >= 1);
      CHECK(s.lo > 0);
      if (d == 1 || d == 4 || d == 16 || d == 64) CHECK(s.lo == s.hi);
    }
    CHECK_THROWS_AS(ScaleBounds::inverse_sqrt(0), input_error);
    CHECK_THROWS_AS(ScaleBounds::exactly(-1), input_error);
    CHECK_THROWS_AS(ScaleBounds::exactly(NAN), input_error);
  }
  rc::prop("scale_bounds holds s x for every x in the bounds and s at either end of the scale", [] {
    const Eigen::MatrixXd a = gen_doubles(3, 3), b = gen_doubles(3, 3);
    const BoundsMatrix S{a.cwiseMin(b), a.cwiseMax(b)};
    const double s1 = std::ldexp(static_cast<double>(*rc::gen::inRange(1, 1 << 30)), *rc::gen::inRange(-40, 10));
    const double s2 = std::nextafter(s1, INFINITY) * (1 + 0x1p-20 * *rc::gen::inRange(0, 100));
    const ScaleBounds scale{s1, s2};
    const BoundsMatrix out = scale_bounds(S, scale);
    for (double s : {s1, s2})
      for (const Eigen::MatrixXd* x : {&S.lo, &S.hi})
        RC_ASSERT(bounds_contain(out, Matrix<Rational>(exact(*x) * to_rational(s))));
  });
}
