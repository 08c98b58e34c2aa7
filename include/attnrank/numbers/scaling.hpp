#pragma once
// Scaling by a positive factor known only to an interval, s in [lo, hi] with
// lo > 0 (1/sqrt(d_k), the softmax scale): the one derivation every certified
// score matrix uses.
//
// Guarantee: scale_bounds(S, s) holds s X for every X within S and every s
// within the scale, each end rounded outward (x s is largest at hi when x >= 0,
// at lo when x < 0, and the other way round for the lower end).

#include <attnrank/numbers/directed_rounding.hpp>

namespace attnrank {

/// A positive scale factor s known to lie in [lo, hi].
struct ScaleBounds {
  double lo = 1, hi = 1;

  /// Exactly s (a positive finite double; input_error otherwise).
  static ScaleBounds exactly(double s);
  /// 1 / sqrt(d) for d >= 1, rounded outward (exact when d is a power of 4).
  static ScaleBounds inverse_sqrt(Eigen::Index d);
};

/// Bounds of s X for every X within `S` and s within `scale`, rounded outward.
BoundsMatrix scale_bounds(const BoundsMatrix& S, const ScaleBounds& scale);

}  // namespace attnrank
