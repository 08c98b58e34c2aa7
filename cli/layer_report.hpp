#pragma once
// A forward pass of the layer, formatted for the CLI: every matrix of the trace
// as decimal strings, in the tier the user chose, with the certifying loop for
// the interval tier.

#include "matrix_text.hpp"

#include <attnrank/attention/multi_head_attention.hpp>

#include <string>
#include <vector>

namespace attnrank::cli {

enum class Tier { double_precision, multiprecision, interval, certified_double };

/// Parses "double", "certified-double", "mp" or "interval"; throws input_error otherwise.
Tier parse_tier(const std::string& name);

struct FormattedTrace {
  struct Head {
    TextMatrix Q, K, V, scores, scaled, A, Z;
  };
  AttentionShape shape;
  TextMatrix X, Q, K, V, concat, output;
  std::vector<Head> heads;
  std::string tier;             ///< "interval" (exact linear part), "mp" or "double"
  unsigned precision_bits = 0;  ///< working precision of the non-linear part
  int digits = 2;               ///< decimals after the point
  bool certified = false;       ///< every printed digit is proven (interval tier)
  std::size_t enclosures = 0;   ///< entries that could not be rounded with certainty
  std::vector<std::string> masks;  ///< Mask::name() of each head's mask; empty without masks
  std::string fallback;            ///< why certified-double handed over to the interval tier, if it did
};

/// Runs the layer on X and formats every step with `digits` decimals.
/// interval: the linear part exact, then interval arithmetic starting at
/// `bits` (at least enough for `digits`), doubling the precision until every
/// entry rounds with certainty or a cap is reached; an entry that still does
/// not round uniquely (a true value on a rounding tie) is printed as its
/// enclosure "[lo, hi]". mp: MPFR at `bits`. double: IEEE double.
/// certified-double: enclosures in doubles (certified_double_forward); when an
/// entry does not round to `digits` decimals with certainty, the interval tier
/// runs instead and `fallback` says so.
/// Masked scores print as "masked" (they are -inf); `masks` as in
/// MultiHeadAttention::forward.
FormattedTrace run_layer(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X, Tier tier,
                         int digits, unsigned bits, const std::vector<Mask>& masks = {});

/// The trace step by step, labelled as in the tutorial's Section 2.2.2;
/// `tokens` label the rows (row numbers when empty).
std::string narrate(const FormattedTrace& t, const std::vector<std::string>& tokens);

/// The trace as the JSON object of the CLI contract (Q, K, V, scores, A, Z per
/// head, concat, output, and every other intermediate).
nlohmann::json trace_json(const FormattedTrace& t);

}  // namespace attnrank::cli
