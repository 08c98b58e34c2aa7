#pragma once
// Balls of doubles around exact, interval and double-double data: the one place
// a value becomes a midpoint and a radius (docs/tiers.md, "The certified double tier").
//
// Guarantee: every ball returned contains the value it was made from (its
// radius is rounded away from the midpoint); a value beyond the double range
// gets an infinite radius, which no caller reads as a bound.

#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <optional>

namespace attnrank {

/// The real matrices X with |X - (hi + lo)| <= rad entrywise, hi + lo taken as an
/// exact (unevaluated) sum of doubles. rad >= 0.
struct DoubleDoubleBall {
  Eigen::MatrixXd hi, lo, rad;
};

/// The ball that contains the bounds [lo, hi].
inline BallMatrix to_ball(const BoundsMatrix& b) {
  BallMatrix out;
  out.mid = 0.5 * b.lo + 0.5 * b.hi;  // any double will do; halves first: lo + hi may overflow
  UpwardRounding up;
  out.rad = (b.hi - out.mid).cwiseMax(out.mid - b.lo);
  detail::rounding_barrier(out.rad);
  return out;
}

/// The smallest double ball around each rational entry (nearest double, radius
/// rounded up); entries beyond the double range give infinite radii.
BallMatrix to_ball(const Matrix<Rational>& A);
/// The ball around each interval entry (its midpoint to double, radius up).
BallMatrix to_ball(const Matrix<Interval>& A);

/// The double ball around a double-double ball: mid = hi + lo rounded to nearest,
/// rad grown (upward) by what that rounding dropped.
BallMatrix to_ball(const DoubleDoubleBall& X);

/// A double-double ball around exact rationals: hi + lo within about 2^-106 |q|
/// of q with |lo| <= ulp(hi) / 2 (hi is q's nearest double but perhaps at a tie),
/// rad >= |q - hi - lo|, and rad = 0 when hi + lo is q. Entries
/// beyond the double range (or so small that hi + lo would be subnormal) give
/// std::nullopt.
std::optional<DoubleDoubleBall> to_double_double_ball(const Matrix<Rational>& A);

}  // namespace attnrank
