#pragma once
// A forward pass of the multi-head attention layer as one analysis: every
// matrix of the trace as decimal strings, in the tier asked, and one JSON writer
// and one text writer for the CLI (layer, example) and Python.
//
// Guarantee: with tier interval or certified-double every printed digit is
// proven (an entry on a rounding tie is printed as its certified enclosure
// "[lo, hi]" and counted in `enclosures`); double and mp are not certified, and
// the result says so (`certified` false).

#include <attnrank/analysis/text_matrix.hpp>
#include <attnrank/attention/mask.hpp>
#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

enum class LayerTier { double_precision, multiprecision, interval, certified_double };

/// Parses "double", "certified-double", "mp" or "interval"; throws input_error otherwise.
LayerTier parse_layer_tier(const std::string& name);

/// How the trace is written when the question does not say: 6 decimals for people; for
/// JSON (a program reads it back) 17 significant digits, which read back as the doubles
/// computed -- fixed decimals would print every weight below 5e-7 as 0.
DecimalFormat default_layer_format(bool for_json);

/// The format asked for by `digits` (decimals after the point) or `significant`
/// (significant digits); nullopt when neither is given (default_layer_format).
/// input_error when both are, or a count is out of range (decimals 0 ..
/// max_printed_digits, significant digits 1 .. max_printed_digits).
std::optional<DecimalFormat> layer_format(std::optional<int> digits, std::optional<int> significant);

/// The working precision of the mp and interval tiers by default, bits.
inline constexpr unsigned default_layer_bits = 128;

struct LayerQuestion {
  LayerTier tier = LayerTier::interval;
  std::optional<DecimalFormat> format;  ///< nullopt: default_layer_format(for_json)
  unsigned bits = default_layer_bits;  ///< working precision of mp and interval (interval raises it as needed)
  std::vector<Mask> masks;   ///< as MultiHeadAttention::forward: none, one for every head, or one per head
  bool for_json = false;     ///< the trace is for a program (picks the default format)
};

struct LayerAnalysis {
  struct Head {
    TextMatrix Q, K, V, scores, scaled, A, Z;
  };
  AttentionShape shape;
  TextMatrix X, Q, K, V, concat, output;
  std::vector<Head> heads;
  std::string tier;             ///< "interval", "certified-double", "mp" or "double"
  unsigned precision_bits = 0;  ///< working precision of the non-linear part
  DecimalFormat format;         ///< how every entry is written (decimals or significant digits)
  bool certified = false;       ///< every printed digit is proven
  std::size_t enclosures = 0;   ///< entries that could not be rounded with certainty
  std::vector<std::string> masks;  ///< Mask::name() of each head's mask; empty without masks
  std::string fallback;            ///< why certified-double handed over to the interval tier, if it did
};

/// Runs the layer on X and formats every step as q.format asks.
/// interval: the linear part exact, then interval arithmetic from q.bits (at
/// least enough for the digits), doubling the precision until every entry
/// rounds with certainty or a cap is reached. certified-double: enclosures in
/// doubles; when an entry does not round with certainty, the interval tier runs
/// instead and `fallback` says so. mp: MPFR at q.bits. double: IEEE double.
LayerAnalysis analyze_layer(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X, const LayerQuestion& q);

/// The trace as the JSON document "attnrank/layer/1" (docs/schema/layer.schema.json):
/// Q, K, V, scores, A, Z per head, concat, output and every other intermediate.
/// `mask` is the one mask's name ("none" without), or "per-head" with head_masks.
nlohmann::json to_json(const LayerAnalysis& t);

/// The trace step by step, labelled as in the tutorial's Section 2.2.2;
/// `tokens` label the rows (row numbers when empty).
std::string to_text(const LayerAnalysis& t, const std::vector<std::string>& tokens = {});

}  // namespace attnrank
