#pragma once
// Certified logarithms at double speed: lo <= log x <= hi for positive doubles,
// and upper bounds of -log(1 - x), each end proven, none trusted.
//
// glibc's log and log1p are accurate to about an ulp, but nothing proves it; here
// they only propose. A proposed end is accepted when exp proves it, with the
// proven bound |exp_double(y) - exp(y)| < 4u exp(y), u = 2^-53
// (numbers/detail/vector_exp.hpp), in round-to-nearest:
//   fl(exp_double(y) * (1 + 8u)) <= x  implies  exp(y) < x,  so y < log x;
//   fl(exp_double(y) * (1 - 8u)) >= x  implies  exp(y) > x,  so y > log x,
// since fl(e (1 + 8u)) >= e (1 + 7u - 8u^2) > e / (1 - 4u) and
// fl(e (1 - 8u)) <= e (1 - 7u) < e / (1 + 4u). The proposals are widened by
// 4u |y| + 2^-48 first, so the checks pass; an end whose check fails, or an x
// outside [2^-1000, 2^1000] (where exp_double's bound or a normal result is not
// assured), is computed by MPFR at 53 bits rounded outward instead. Either way
// the ends are a few ulps of log x plus about 2^-47 apart.
//
// The checks run in round-to-nearest whatever the caller's mode (the functions
// set it for their duration): exp_double's bound assumes it.

#include <cstddef>

namespace attnrank {

/// For each i < count, with 0 < x_lo[i] <= x_hi[i] (doubles):
/// lo[i] <= log t <= hi[i] for every t in [x_lo[i], x_hi[i]]. x_lo[i] = 0 gives
/// lo[i] = -inf; a NaN or negative input throws std::invalid_argument.
void log_bounds(const double* x_lo, const double* x_hi, double* lo, double* hi, std::size_t count);

/// For each i < count, with 0 <= x[i]: hi[i] >= -log(1 - x[i]) (+inf for x[i] >= 1).
/// Through log1p for every x; callers with many tiny x (where -log(1 - x) is
/// near x and the 2^-48 widening is large relatively) do better with a series.
void neg_log1m_upper(const double* x, double* hi, std::size_t count);

}  // namespace attnrank
