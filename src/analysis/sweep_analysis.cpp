// The sweep question and its writers (analysis/sweep_analysis.hpp).
#include <attnrank/analysis/sweep_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/tutorial/single_key_head.hpp>

#include <algorithm>
#include <sstream>

namespace attnrank {
namespace {

constexpr int most_label_decimals = 1000;  // a query label's decimals, at most

std::vector<Rational> parse_list(const std::string& text, const std::string& what) {
  std::vector<Rational> v;
  std::stringstream s(text);
  std::string cell;
  while (std::getline(s, cell, ',')) {
    try {
      v.push_back(parse_rational(cell));
    } catch (const input_error& e) {
      throw input_error(what + ": " + e.what());
    }
  }
  if (v.empty()) throw input_error(what + " is empty");
  return v;
}

/// "a:b:s" (from a to b in steps of s, exactly) or a comma list.
std::vector<Rational> parse_queries(const std::string& text) {
  if (text.find(':') == std::string::npos) return parse_list(text, "queries");
  std::vector<Rational> parts = parse_list([&] { std::string t = text; std::replace(t.begin(), t.end(), ':', ','); return t; }(), "queries");
  if (parts.size() != 3) throw input_error("queries '" + text + "' must be FROM:TO:STEP or a comma list");
  const Rational from = parts[0], to = parts[1], step = parts[2];
  if (step == 0) throw input_error("queries '" + text + "': the step must not be 0");
  if ((to - from) / step < 0) throw input_error("queries '" + text + "': the step goes away from TO");
  if ((to - from) / step > 10000) throw input_error("queries '" + text + "' has more than 10001 values");
  std::vector<Rational> q;
  for (Rational x = from; step > 0 ? x <= to : x >= to; x += step) q.push_back(x);
  return q;
}

}  // namespace

namespace {

std::vector<long> numbered_from_one(const std::vector<Eigen::Index>& tokens) {
  std::vector<long> v;
  for (const Eigen::Index t : tokens) v.push_back(static_cast<long>(t) + 1);
  return v;
}

std::string token_list(const std::vector<long>& v) {
  std::string text;
  for (std::size_t t = 0; t < v.size(); ++t) text += (t ? ", token " : "token ") + std::to_string(v[t]);
  return text.empty() ? std::string("none (the keys are all equal: every row is flat)") : text;
}

}  // namespace

SweepAnalysis analyze_sweep(const SweepQuestion& q) {
  const std::vector<Rational> keys = parse_list(q.keys, "keys");
  if (keys.size() > 10000) throw input_error("keys: more than 10000 values");
  const std::vector<Rational> qs = parse_queries(q.queries);
  const bool causal = q.causal;
  if (!causal && q.position != 0) throw input_error("a position needs the causal mask (without it the query sees every key)");
  const auto n = static_cast<long>(keys.size());
  const long position = q.position == 0 ? n : q.position;
  if (causal && (position < 1 || position > n))
    throw input_error("position " + std::to_string(position) + " is outside 1.." + std::to_string(n) + " (one per key)");
  const PrecisionScope scope(bits_for_decimals(q.digits));
  const Matrix<Interval> W = causal ? certified_single_key_sweep(keys, qs, position) : certified_single_key_sweep(keys, qs);
  const std::vector<Rational> seen(keys.begin(), keys.begin() + (causal ? position : n));
  SweepAnalysis out;
  out.question = q;
  out.position = position;
  for (std::size_t r = 0; r < qs.size(); ++r) {
    SweepAnalysis::Row row{qs[r], {}, numbered_from_one(top_tokens(seen, qs[r]))};
    for (std::size_t j = 0; j < keys.size(); ++j)
      row.weights.push_back(
          certified_or_enclosure(W(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j)), q.digits));
    out.rows.push_back(std::move(row));
  }
  out.possible_winners = numbered_from_one(possible_winners(seen));
  if (causal) out.causal_possible_winners = numbered_from_one(causal_possible_winners(keys));
  return out;
}

std::string to_text(const SweepAnalysis& t) {
  const SweepQuestion& q = t.question;
  std::ostringstream s;
  s << "d_k = 1 head, keys k = (" << q.keys << "): row weights softmax(q k), certified to " << q.digits << " decimals";
  if (q.causal) s << "; causal mask, the query at position " << t.position << " sees keys 1.." << t.position;
  s << "\n";
  // Labels carry every digit the queries have (at least two decimals, as the
  // tutorial prints them); a query without a terminating decimal shows as p/q.
  int label_decimals = 2;
  for (const SweepAnalysis::Row& row : t.rows)
    if (const auto d = terminating_decimals(row.query))
      label_decimals = std::max(label_decimals, std::min(*d, most_label_decimals));
  const auto label = [&](const Rational& x) { return terminating_decimals(x) ? format_fixed(x, label_decimals) : x.str(); };
  for (const SweepAnalysis::Row& row : t.rows) {
    s << "  q = " << label(row.query) << ":";
    for (const std::string& w : row.weights) s << " " << w;
    s << "   top: ";
    if (row.top.empty()) s << "none (flat row)";
    for (std::size_t k = 0; k < row.top.size(); ++k) s << (k ? ", " : "") << "token " << row.top[k];
    s << "\n";
  }
  s << "tokens that can ever take the top weight" << (q.causal ? " at position " + std::to_string(t.position) : std::string())
    << ": " << token_list(t.possible_winners) << " (argmax k for q > 0, argmin k for q < 0"
    << (q.causal ? ", over keys 1..position" : "") << ")\n";
  if (q.causal)
    s << "at any position: " << token_list(t.causal_possible_winners)
      << " (the running records: a key at least every earlier key, or at most every earlier one)\n";
  return s.str();
}

nlohmann::json to_json(const SweepAnalysis& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const SweepAnalysis::Row& row : t.rows)
    rows.push_back({{"q", row.query.str()}, {"weights", row.weights}, {"top", row.top}});
  nlohmann::json j{{"keys", t.question.keys},
                   {"rows", rows},
                   {"possible_winners", t.possible_winners},
                   {"mask", t.question.causal ? "causal" : "none"}};
  if (t.question.causal) {
    j["position"] = t.position;
    j["causal_possible_winners"] = t.causal_possible_winners;
  }
  return json_document(j, "sweep");
}

}  // namespace attnrank
