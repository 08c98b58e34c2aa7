#pragma once
// What a band is: a pair of doubles lo <= hi, neither NaN, that encloses a real
// value. An infinite end means "no bound on that side"; a lower end of +inf (or an
// upper end of -inf) would claim a value beyond the double range and is a band
// only where infinity itself is the proven value (an infinite error, say), which
// the caller states with `infinite_allowed`.
//
// Guarantee: band_violation names the first way a pair fails to be a band (empty
// when it is one); unbounded_where_nan turns a NaN end into the infinite end on
// its own side, which is true of every value (NaN proves nothing, so nothing is lost).

#include <attnrank/numbers/directed_rounding.hpp>

#include <cmath>
#include <string>

namespace attnrank {

/// Why [lo, hi] is not a band ("NaN", "inverted", "lower end +inf", ...), or
/// an empty string when it is one. With `infinite_allowed`, [+inf, +inf] is a
/// band (the value is proven infinite).
inline std::string band_violation(double lo, double hi, bool infinite_allowed = false) {
  if (std::isnan(lo) || std::isnan(hi)) return "NaN";
  if (!(lo <= hi)) return "inverted (lower end above upper end)";
  if (!infinite_allowed && lo == INFINITY) return "lower end +inf";
  if (hi == -INFINITY) return "upper end -inf";
  return {};
}

/// True when [lo, hi] is a band (see band_violation).
inline bool is_band(double lo, double hi, bool infinite_allowed = false) {
  return band_violation(lo, hi, infinite_allowed).empty();
}

/// Every NaN end of B becomes the infinite end on its side (-inf below, +inf above).
inline void unbounded_where_nan(BoundsMatrix& B) {
  if (!B.lo.hasNaN() && !B.hi.hasNaN()) return;
  B.lo = B.lo.array().isNaN().select(-INFINITY, B.lo);
  B.hi = B.hi.array().isNaN().select(INFINITY, B.hi);
}

namespace detail {
/// sum += part, each end in its own direction (an empty sum takes part): the sum of two
/// enclosures encloses the sum. Ends are bands.
inline void add_bounds(BoundsMatrix& sum, const BoundsMatrix& part) {
  if (sum.lo.size() == 0) {
    sum = part;
    return;
  }
  UpwardRounding up;
  sum.hi += part.hi;
  sum.lo = -((-sum.lo) - part.lo);
  rounding_barrier(sum.hi);
  rounding_barrier(sum.lo);
}
}  // namespace detail

}  // namespace attnrank
