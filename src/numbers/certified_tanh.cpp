// Certified tanh at double speed: numbers/certified_tanh.hpp states the method and its proof.
#include <attnrank/numbers/certified_tanh.hpp>

#include <attnrank/numbers/detail/vector_exp.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <algorithm>
#include <cmath>

namespace attnrank {
namespace {

constexpr double grow = 1 + 0x1p-50, shrink = 1 - 0x1p-50;  // 8u: more than 4u / (1 - 4u)
constexpr double tiny = 0x1p-1021;  // covers exp's absolute error below 2^-1022, normal
constexpr std::size_t chunk = 512;  // entries per pass: the buffers stay in L1

// In upward rounding throughout (a lower bound of a op b is -((-a) op b)). Branch-free, so
// that the loops over a chunk vectorise: both bounds of tanh |x| are formed, and the sign of
// x picks one.

/// A lower bound of tanh m for m = |x| >= 0, from e = exp_double(-2 m) (round-to-nearest).
inline double lower_of_magnitude(double m, double e) {
  const double e_up = e * grow + tiny;
  const double num_down = -(e_up - 1.0);  // <= 1 - e_up
  const double den_up = 1.0 + e_up;
  double lo = -((-num_down) / den_up);
  const double series = -(m * m * m / 3.0 - m);  // m - m^3 / 3 rounded down; NaN or -inf for huge m
  lo = m < 1 && series > lo ? series : lo;
  return lo > 0 ? lo : 0.0;
}

/// An upper bound of tanh m for m = |x| >= 0.
inline double upper_of_magnitude(double m, double e) {
  double e_down = -((-e) * shrink + tiny);
  e_down = e_down > 0 ? e_down : 0.0;
  const double num_up = 1.0 - e_down;
  const double den_down = -((-1.0) - e_down);
  double hi = num_up / den_down;
  hi = m < hi ? m : hi;
  return hi < 1 ? hi : 1.0;
}

}  // namespace

void tanh_bounds(const double* x_lo, const double* x_hi, double* lo, double* hi, std::size_t count) {
  double e_lo[chunk], e_hi[chunk], a[chunk], b[chunk], w[chunk];
  for (std::size_t first = 0; first < count; first += chunk) {
    const std::size_t n = std::min(chunk, count - first);
    for (std::size_t i = 0; i < n; ++i) {  // copies: the outputs may alias the inputs
      a[i] = x_lo[first + i];
      b[i] = x_hi[first + i];
    }
    bool narrow = true;  // every b - a <= 2^-20 (NaN is not narrow): one exp per entry will do
    {
      const ThreadRounding<FE_UPWARD> up;
      for (std::size_t i = 0; i < n; ++i) {
        w[i] = b[i] - a[i];  // upward: at least the width
        narrow &= w[i] <= 0x1p-20;
      }
    }
    if (narrow) {
      // tanh' = 1 - tanh^2 is in (0, 1]: tanh b <= tanh a + (b - a). Both ends from bounds at a.
      {
        const ThreadRounding<FE_TONEAREST> nearest;
        for (std::size_t i = 0; i < n; ++i) e_lo[i] = -2.0 * std::fabs(a[i]);
        detail::exp_in_place(e_lo, n);
      }
      const ThreadRounding<FE_UPWARD> up;
      for (std::size_t i = 0; i < n; ++i) {
        const double ma = std::fabs(a[i]);
        const double l = a[i] >= 0 ? lower_of_magnitude(ma, e_lo[i]) : -upper_of_magnitude(ma, e_lo[i]);
        const double h = (a[i] >= 0 ? upper_of_magnitude(ma, e_lo[i]) : -lower_of_magnitude(ma, e_lo[i])) + w[i];
        lo[first + i] = l;
        hi[first + i] = h < 1 ? h : 1.0;
      }
      continue;
    }
    {
      const ThreadRounding<FE_TONEAREST> nearest;  // exp_double's bound assumes it; -2|x| is exact (or -inf)
      for (std::size_t i = 0; i < n; ++i) {
        e_lo[i] = -2.0 * std::fabs(a[i]);
        e_hi[i] = -2.0 * std::fabs(b[i]);
      }
      detail::exp_in_place(e_lo, n);
      detail::exp_in_place(e_hi, n);
    }
    const ThreadRounding<FE_UPWARD> up;
    for (std::size_t i = 0; i < n; ++i) {
      const double ma = std::fabs(a[i]), mb = std::fabs(b[i]);
      // tanh a >= ...: from below on |a| when a >= 0, minus tanh |a| from above when a < 0.
      const double l = a[i] >= 0 ? lower_of_magnitude(ma, e_lo[i]) : -upper_of_magnitude(ma, e_lo[i]);
      const double h = b[i] >= 0 ? upper_of_magnitude(mb, e_hi[i]) : -lower_of_magnitude(mb, e_hi[i]);
      const bool known = a[i] == a[i] && b[i] == b[i];  // a NaN end: [-1, 1] holds for anything
      lo[first + i] = known ? l : -1.0;
      hi[first + i] = known ? h : 1.0;
    }
  }
}

}  // namespace attnrank
