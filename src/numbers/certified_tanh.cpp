// Certified tanh at double speed: numbers/certified_tanh.hpp states the method and its proof.
#include <attnrank/numbers/certified_tanh.hpp>

#include <attnrank/numbers/detail/vector_exp.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <cmath>
#include <vector>

namespace attnrank {
namespace {

constexpr double grow = 1 + 0x1p-50, shrink = 1 - 0x1p-50;  // 8u: more than 4u / (1 - 4u)
constexpr double tiny = 0x1p-1021;  // covers exp's absolute error below 2^-1022, normal

// In upward rounding throughout (a lower bound of a op b is -((-a) op b)).

/// A lower bound of tanh b for b >= 0, from e = exp_double(-2 b) (round-to-nearest).
inline double lower_of_magnitude(double b, double e) {
  const double e_up = e * grow + tiny;
  const double num_down = -(e_up - 1.0);  // <= 1 - e_up
  const double den_up = 1.0 + e_up;
  double lo = num_down > 0 ? -((-num_down) / den_up) : 0.0;
  if (b < 1) {  // b - b^3 / 3, rounded down
    const double cube_up = b * b * b / 3.0;
    const double series = -(cube_up - b);
    lo = series > lo ? series : lo;
  }
  return lo > 0 ? lo : 0.0;
}

/// An upper bound of tanh b for b >= 0.
inline double upper_of_magnitude(double b, double e) {
  double e_down = -((-e) * shrink + tiny);
  e_down = e_down > 0 ? e_down : 0.0;
  const double num_up = 1.0 - e_down;
  const double den_down = -((-1.0) - e_down);
  double hi = num_up / den_down;
  hi = b < hi ? b : hi;
  return hi < 1 ? hi : 1.0;
}

}  // namespace

void tanh_bounds(const double* x_lo, const double* x_hi, double* lo, double* hi, std::size_t count) {
  std::vector<double> e_lo(count), e_hi(count);
  {
    const ThreadRounding<FE_TONEAREST> nearest;  // exp_double's bound assumes it; -2|x| is exact (or -inf)
    for (std::size_t i = 0; i < count; ++i) {
      e_lo[i] = -2.0 * std::fabs(x_lo[i]);
      e_hi[i] = -2.0 * std::fabs(x_hi[i]);
    }
    detail::exp_in_place(e_lo.data(), count);
    detail::exp_in_place(e_hi.data(), count);
  }
  const ThreadRounding<FE_UPWARD> up;
  for (std::size_t i = 0; i < count; ++i) {
    const double a = x_lo[i], b = x_hi[i];
    if (std::isnan(a) || std::isnan(b)) {
      lo[i] = -1.0;
      hi[i] = 1.0;
      continue;
    }
    // tanh a >= ...: a >= 0 from below on |a|; a < 0 is -(tanh |a| from above).
    const double l = a >= 0 ? lower_of_magnitude(a, e_lo[i]) : -upper_of_magnitude(-a, e_lo[i]);
    const double h = b >= 0 ? upper_of_magnitude(b, e_hi[i]) : -lower_of_magnitude(-b, e_hi[i]);
    lo[i] = l;
    hi[i] = h;
  }
}

}  // namespace attnrank
