// Positive scale factors and scaling by them (attnrank/numbers/scaling.hpp).
#include <attnrank/numbers/scaling.hpp>

#include <attnrank/numbers/decimal.hpp>

#include <attnrank/error.hpp>

#include <cfenv>
#include <cmath>
#include <string>

namespace attnrank {

using Eigen::Index;

ScaleBounds ScaleBounds::exactly(double s) {
  if (!(std::isfinite(s) && s > 0))
    throw input_error("the scale must be a positive finite number (got " + shortest_decimal(s) + ")");
  return {s, s};
}

ScaleBounds ScaleBounds::inverse_sqrt(Index d) {
  if (d < 1) throw input_error("1/sqrt(d) needs d >= 1 (got " + std::to_string(d) + ")");
  // 1 / sqrt(d) lies between 1 / sqrt_up(d) rounded down and 1 / sqrt_down(d) rounded up.
  double root_lo, root_hi;
  ScaleBounds s;
  {
    DownwardRounding down;
    root_lo = std::sqrt(static_cast<double>(d));
    detail::rounding_barrier(root_lo);
  }
  {
    UpwardRounding up;
    root_hi = std::sqrt(static_cast<double>(d));
    detail::rounding_barrier(root_hi);
    s.hi = 1.0 / root_lo;
    detail::rounding_barrier(s.hi);
  }
  {
    DownwardRounding down;
    s.lo = 1.0 / root_hi;
    detail::rounding_barrier(s.lo);
  }
  return s;
}

BoundsMatrix scale_bounds(const BoundsMatrix& S, const ScaleBounds& scale) {
  BoundsMatrix out;
  // x s over s in [lo, hi] with lo > 0: largest at hi when x >= 0, at lo when x < 0,
  // so the larger of the two products rounded up (the smaller, rounded down): the
  // same numbers as choosing by the sign, in branch-free vector code.
  if (scale.lo == scale.hi) {
    {
      UpwardRounding up;
      out.hi = S.hi * scale.hi;
      detail::rounding_barrier(out.hi);
    }
    DownwardRounding down;
    out.lo = S.lo * scale.lo;
    detail::rounding_barrier(out.lo);
    return out;
  }
  {
    UpwardRounding up;
    out.hi = (S.hi.array() * scale.hi).max(S.hi.array() * scale.lo).matrix();
    detail::rounding_barrier(out.hi);
  }
  {
    DownwardRounding down;
    out.lo = (S.lo.array() * scale.lo).min(S.lo.array() * scale.hi).matrix();
    detail::rounding_barrier(out.lo);
  }
  return out;
}

}  // namespace attnrank
