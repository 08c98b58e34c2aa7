#pragma once
// Certified tanh at double speed: lo <= tanh t <= hi for every t in [x_lo, x_hi],
// each end proven, none taken from libm. What a softcap c tanh(x / c) needs.
//
// tanh is odd and increasing, so the ends come from bounds of tanh on |x| >= 0,
// each the tighter of two proven ones:
//  * tanh b = (1 - e) / (1 + e) with e = exp(-2 b) in (0, 1], decreasing in e: with
//    e enclosed by exp_double's proven bound |exp_double(y) - exp(y)| < 4u exp(y)
//    + 2^-1075 (numbers/detail/vector_exp.hpp; u = 2^-53), widened to 8u relative and
//    2^-1021 absolute as the certified softmax does, the quotient of the two
//    directed ends bounds tanh b. Absolute width: a few u, so the relative width
//    grows like u / b for small b;
//  * b - b^3 / 3 <= tanh b <= b for b >= 0 (tanh' = 1 - tanh^2 >= 1 - b^2 and <= 1;
//    integrate twice), which is relatively tight for small b;
//  * and 0 <= tanh b <= 1.
// So the width of a point is a few ulps of tanh x, absolute for |x| >= 1, relative
// below. Narrow intervals (every width in a chunk of 512 at most 2^-20, as scores are) take
// one exp per entry: both ends from the bounds at x_lo, the upper one plus the width
// rounded up (tanh' = 1 - tanh^2 <= 1, so tanh x_hi <= tanh x_lo + (x_hi - x_lo)). A NaN end gives [-1, 1] (true for any t); infinite ends are +-1.
// Exp runs in round-to-nearest (its bound assumes it) and the rest in directed
// rounding; the function sets both itself and restores the caller's mode.

#include <cstddef>

namespace attnrank {

/// For each i < count, with x_lo[i] <= x_hi[i] (doubles, infinite allowed):
/// lo[i] <= tanh t <= hi[i] for every t in [x_lo[i], x_hi[i]]. The output arrays may
/// alias the inputs.
void tanh_bounds(const double* x_lo, const double* x_hi, double* lo, double* hi, std::size_t count);

}  // namespace attnrank
