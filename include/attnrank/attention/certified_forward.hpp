#pragma once
// The layer with every printed digit proven: the exact layer's trace in interval
// arithmetic, at a precision raised until every entry rounds with certainty to
// the decimals asked.
//
// The linear part (projections, slices, raw scores) is exact (Rational); the
// rest (scaled scores, softmax, A V, the output projection) is enclosed in MPFI.
// An entry "rounds with certainty" when both ends of its interval round to the
// same D-decimal string (certified_fixed); then so does the true value. The
// precision starts at bits_for_decimals(D) (or more if asked) and doubles until
// every entry rounds or a cap (8 times the start, at least 4096 bits) is
// reached: a true value exactly on a rounding tie never rounds, however
// precise, and stays an enclosure — counted in `unrounded`, never guessed.

#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <cstddef>

namespace attnrank {

struct CertifiedTrace {
  LayerTrace<Rational, Interval> trace;
  unsigned requested_bits = 0;  ///< the precision the last pass asked for
  unsigned bits = 0;            ///< the precision in force in it (Boost rounds up)
  std::size_t unrounded = 0;    ///< entries still not rounding as asked (ties)
};

/// Runs `layer` on X as above, for `decimals` decimals after the point, starting
/// at max(min_bits, bits_for_decimals(decimals)) bits, with the masks of
/// MultiHeadAttention::forward (none, one for every head, or one per head).
CertifiedTrace certified_forward(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X, int decimals,
                                 unsigned min_bits = 0, const std::vector<Mask>& masks = {});
/// The same for any format: `format.count` significant digits certify small
/// weights to the same relative accuracy as large ones (fixed point rounds them to 0).
CertifiedTrace certified_forward(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X,
                                 DecimalFormat format, unsigned min_bits = 0, const std::vector<Mask>& masks = {});

}  // namespace attnrank
