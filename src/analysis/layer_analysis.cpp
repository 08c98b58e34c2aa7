// The layer analysis and its writers (analysis/layer_analysis.hpp).
#include <attnrank/analysis/layer_analysis.hpp>

#include <attnrank/analysis/document.hpp>

#include <attnrank/attention/certified_double_forward.hpp>
#include <attnrank/attention/certified_forward.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>

namespace attnrank {
namespace {

/// Formats one entry; returns false when an interval could not be rounded.
bool format_entry(const Rational& q, DecimalFormat f, std::string& out) {
  out = boost::multiprecision::denominator(q) == 1 ? q.str() : format_decimal(q, f);
  return true;
}
bool format_entry(double x, DecimalFormat f, std::string& out) {
  out = std::isfinite(x) ? format_decimal(to_rational(x), f) : format_fixed_point(x, 0);
  return true;
}
bool format_entry(const Real& x, DecimalFormat f, std::string& out) {
  out = scalar_traits<Real>::is_finite(x) ? format_decimal(to_rational(x), f) : format_fixed_point(x, 0);
  return true;
}
bool format_entry(const Interval& x, DecimalFormat f, std::string& out) {
  out = certified_or_enclosure(x, f);
  return out.front() != '[';
}

template <class T>
TextMatrix format_matrix(const Matrix<T>& m, DecimalFormat f, std::size_t& failures) {
  TextMatrix out(static_cast<std::size_t>(m.rows()), std::vector<std::string>(static_cast<std::size_t>(m.cols())));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (!format_entry(m(i, j), f, out[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)])) ++failures;
  return out;
}

/// Bounds lo <= x <= hi printed as `f` asks when both ends round to the same
/// string (rounding is monotone, so x rounds to it too); otherwise a failure.
TextMatrix format_matrix(const BoundsMatrix& m, DecimalFormat f, std::size_t& failures) {
  TextMatrix out(static_cast<std::size_t>(m.lo.rows()), std::vector<std::string>(static_cast<std::size_t>(m.lo.cols())));
  for (Eigen::Index i = 0; i < m.lo.rows(); ++i)
    for (Eigen::Index j = 0; j < m.lo.cols(); ++j) {
      std::string& cell = out[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      const double lo = m.lo(i, j), hi = m.hi(i, j);
      if (!std::isfinite(lo) || !std::isfinite(hi)) {
        ++failures;
        continue;
      }
      const std::string a = format_decimal(to_rational(lo), f), b = format_decimal(to_rational(hi), f);
      if (a == b) {
        cell = a;
      } else {
        cell.clear();  // never printed: any failure hands the whole trace to the interval tier
        ++failures;
      }
    }
  return out;
}

/// Every matrix of a trace (LayerTrace in a tier, or CertifiedDoubleTrace) as text.
template <class Trace>
LayerAnalysis format_trace(const Trace& t, const Matrix<Rational>& X, DecimalFormat digits) {
  LayerAnalysis f;
  std::size_t failures = 0;
  f.shape = t.shape;
  f.format = digits;
  f.X = format_matrix(X, digits, failures);
  f.Q = format_matrix(t.Q, digits, failures);
  f.K = format_matrix(t.K, digits, failures);
  f.V = format_matrix(t.V, digits, failures);
  for (const auto& h : t.heads) {
    f.heads.push_back({format_matrix(h.Q, digits, failures), format_matrix(h.K, digits, failures),
                       format_matrix(h.V, digits, failures), format_matrix(h.scores, digits, failures),
                       format_matrix(h.scaled, digits, failures), format_matrix(h.A, digits, failures),
                       format_matrix(h.Z, digits, failures)});
    if (!h.mask) continue;
    // A masked score is -inf: its entry in `scaled` holds a finite value softmax never reads.
    f.masks.push_back(h.mask->name());
    TextMatrix& scaled = f.heads.back().scaled;
    for (Eigen::Index i = 0; i < h.mask->size(); ++i)
      for (Eigen::Index j = 0; j < h.mask->size(); ++j)
        if (!h.mask->allows(i, j)) scaled[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = "masked";
  }
  f.concat = format_matrix(t.concat, digits, failures);
  f.output = format_matrix(t.output, digits, failures);
  f.enclosures = failures;
  return f;
}

}  // namespace

LayerTier parse_layer_tier(const std::string& name) {
  if (name == "double") return LayerTier::double_precision;
  if (name == "mp") return LayerTier::multiprecision;
  if (name == "interval") return LayerTier::interval;
  if (name == "certified-double") return LayerTier::certified_double;
  throw input_error("unknown tier '" + name + "' (expected double, certified-double, mp or interval)");
}

std::optional<DecimalFormat> layer_format(std::optional<int> digits, std::optional<int> significant) {
  if (digits && significant) throw input_error("give digits (decimals) or significant digits, not both");
  const std::string most = std::to_string(max_printed_digits);
  if (digits && (*digits < 0 || *digits > max_printed_digits))
    throw input_error("digits " + std::to_string(*digits) + " is outside [0, " + most + "]");
  if (significant && (*significant < 1 || *significant > max_printed_digits))
    throw input_error("significant " + std::to_string(*significant) + " is outside [1, " + most + "]");
  if (digits) return DecimalFormat::decimals(*digits);
  if (significant) return DecimalFormat::significant(*significant);
  return std::nullopt;
}

DecimalFormat default_layer_format(bool for_json) {
  return for_json ? DecimalFormat::significant(17) : DecimalFormat::decimals(6);
}

LayerAnalysis analyze_layer(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X, const LayerQuestion& q) {
  const LayerTier tier = q.tier;
  const DecimalFormat digits = q.format.value_or(default_layer_format(q.for_json));
  if (digits.count < (digits.kind == DecimalFormat::Kind::significant ? 1 : 0))
    throw input_error("digits " + std::to_string(digits.count) + " is out of range: " +
                      (digits.kind == DecimalFormat::Kind::significant ? "at least 1 significant digit"
                                                                       : "at least 0 decimals"));
  const unsigned bits = q.bits;
  const std::vector<Mask>& masks = q.masks;
  if (tier == LayerTier::double_precision) {
    const auto t = layer_in_tier<double>(layer).forward(to_tier<double>(X), masks);
    LayerAnalysis f = format_trace(t, X, digits);
    f.tier = "double";
    f.precision_bits = 53;
    return f;
  }
  if (tier == LayerTier::multiprecision) {
    PrecisionScope scope(bits);
    const auto t = layer_in_tier<Real>(layer).forward(to_tier<Real>(X), masks);
    LayerAnalysis f = format_trace(t, X, digits);
    f.tier = "mp";
    f.precision_bits = PrecisionScope::bits();
    return f;
  }
  std::string fallback;
  if (tier == LayerTier::certified_double) {
    LayerAnalysis f = format_trace(certified_double_forward(layer, X, masks), X, digits);
    if (f.enclosures == 0) {
      f.tier = "certified-double";
      f.precision_bits = 53;
      f.certified = true;
      return f;
    }
    fallback = std::to_string(f.enclosures) + " entries of the certified double tier did not round to " +
               digits.words() + " with certainty; the interval tier (MPFI) computed the trace instead";
  }
  const CertifiedTrace c = certified_forward(layer, X, digits, bits, masks);
  // Formatted at the precision the intervals were computed at.
  const PrecisionScope scope(c.requested_bits);
  LayerAnalysis f = format_trace(c.trace, X, digits);
  f.precision_bits = c.bits;
  f.tier = "interval";
  f.certified = true;  // digits or enclosures, every printed value is proven
  f.fallback = fallback;
  return f;
}

std::string to_text(const LayerAnalysis& t, const std::vector<std::string>& tokens) {
  std::vector<std::string> rows = tokens;
  if (rows.empty())
    for (std::size_t i = 0; i < t.X.size(); ++i) rows.push_back("row " + std::to_string(i + 1));
  const auto& s = t.shape;
  const std::string dims = std::to_string(t.X.size()) + " x ";
  auto block = [&](const std::string& title, const TextMatrix& m) {
    return title + "\n" + render_table(m, rows, 4);
  };
  std::string out;
  out += "Layer: n = " + std::to_string(t.X.size()) + " tokens, d_model = " + std::to_string(s.d_model) +
         ", h = " + std::to_string(s.heads) + ", d_k = " + std::to_string(s.d_k) + ", d_v = " + std::to_string(s.d_v) +
         "\n";
  if (!t.fallback.empty()) out += "Note: " + t.fallback + ".\n";
  if (t.tier == "certified-double")
    out += "Numbers: every number is certified to " + t.format.words() +
           " by interval arithmetic on doubles (directed rounding).\n";
  else if (t.tier == "interval")
    out += "Numbers: exact where the step is exact (projections, slices, raw scores); every other number is "
           "certified to " + t.format.words() + " by interval arithmetic at " +
           std::to_string(t.precision_bits) + " bits.\n";
  else
    out += "Numbers: tier " + t.tier + " (" + std::to_string(t.precision_bits) + " bits), " +
           t.format.words() + ", not certified.\n";
  if (!t.masks.empty()) {
    const bool shared = std::all_of(t.masks.begin(), t.masks.end(), [&](const std::string& m) { return m == t.masks[0]; });
    std::string per_head;
    for (std::size_t i = 0; i < t.masks.size(); ++i) per_head += (i ? ", head " : "head ") + std::to_string(i + 1) + " " + t.masks[i];
    out += "Mask: " + (shared ? t.masks[0] + (t.heads.size() > 1 ? " (every head)" : "") : per_head) +
           "; masked scores are -inf, so softmax puts exactly 0 there and normalises over the allowed keys.\n";
  }
  if (t.enclosures > 0)
    out += "Note: " + std::to_string(t.enclosures) +
           " entries sit on a rounding tie and are printed as certified enclosures [lo, hi].\n";
  out += "\n" + block("X (" + dims + std::to_string(s.d_model) + "), one row per token", t.X);
  out += "\nStep 1 - project to full width\n";
  out += block("  Q = X W^Q", t.Q) + block("  K = X W^K", t.K) + block("  V = X W^V", t.V);
  out += "\nStep 2 - deal the columns out (head i takes columns " + std::string("(i-1) d_k + 1 .. i d_k") + ")\n";
  for (std::size_t i = 0; i < t.heads.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    out += block("  Q_" + n, t.heads[i].Q) + block("  K_" + n, t.heads[i].K) + block("  V_" + n, t.heads[i].V);
  }
  for (std::size_t i = 0; i < t.heads.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    out += "\nStep " + std::to_string(3 + i) + " - head " + n + " attends on its slice\n";
    out += block("  scores Q_" + n + " K_" + n + "^T", t.heads[i].scores);
    out += block("  scaled scores Q_" + n + " K_" + n + "^T / sqrt(" + std::to_string(s.d_k) + ")", t.heads[i].scaled);
    out += block("  A_" + n + " = softmax(scaled scores), row-wise", t.heads[i].A);
  }
  const std::size_t step = 3 + t.heads.size();
  out += "\nStep " + std::to_string(step) + " - each head spends its weights on its own V slice\n";
  for (std::size_t i = 0; i < t.heads.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    out += block("  Z_" + n + " = A_" + n + " V_" + n, t.heads[i].Z);
  }
  out += "\nStep " + std::to_string(step + 1) + " - lay the heads side by side\n";
  const std::string last = std::to_string(t.heads.size());
  const std::string heads = t.heads.size() == 1 ? "Z_1" : t.heads.size() == 2 ? "Z_1, Z_2" : "Z_1, ..., Z_" + last;
  out += block("  Concat(" + heads + ")", t.concat);
  out += "\nStep " + std::to_string(step + 2) + " - W^O does the mixing\n";
  out += block("  output = Concat W^O", t.output);
  return out;
}

nlohmann::json to_json(const LayerAnalysis& t) {
  nlohmann::json j;
  j["n"] = t.X.size();
  j["d_model"] = t.shape.d_model;
  j["h"] = t.shape.heads;
  j["d_k"] = t.shape.d_k;
  j["d_v"] = t.shape.d_v;
  j["tier"] = t.tier;
  j["bits"] = t.precision_bits;
  j["digits"] = t.format.count;
  j["notation"] = t.format.kind == DecimalFormat::Kind::decimals ? "decimals" : "significant";
  j["certified"] = t.certified;
  j["enclosures"] = t.enclosures;
  if (!t.fallback.empty()) j["fallback"] = t.fallback;
  // One name when every head has the same mask ("none" without one), else
  // "per-head" and the list: a key keeps its type in every variant.
  if (t.masks.empty()) j["mask"] = "none";
  else if (std::all_of(t.masks.begin(), t.masks.end(), [&](const std::string& m) { return m == t.masks[0]; }))
    j["mask"] = t.masks[0];
  else j["mask"] = "per-head";
  if (!t.masks.empty()) j["head_masks"] = t.masks;
  j["X"] = text_matrix_json(t.X);
  j["Q"] = text_matrix_json(t.Q);
  j["K"] = text_matrix_json(t.K);
  j["V"] = text_matrix_json(t.V);
  for (const char* key : {"Q_heads", "K_heads", "V_heads", "scores", "scaled_scores", "A", "Z"})
    j[key] = nlohmann::json::array();
  for (const auto& h : t.heads) {
    j["Q_heads"].push_back(text_matrix_json(h.Q));
    j["K_heads"].push_back(text_matrix_json(h.K));
    j["V_heads"].push_back(text_matrix_json(h.V));
    j["scores"].push_back(text_matrix_json(h.scores));
    j["scaled_scores"].push_back(text_matrix_json(h.scaled));
    j["A"].push_back(text_matrix_json(h.A));
    j["Z"].push_back(text_matrix_json(h.Z));
  }
  j["concat"] = text_matrix_json(t.concat);
  j["output"] = text_matrix_json(t.output);
  return json_document(j, "layer");
}

}  // namespace attnrank
