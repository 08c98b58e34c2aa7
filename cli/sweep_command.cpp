// attnrank sweep: the d_k = 1 head of Section 2.5.4 (Figure 8), row by row.
#include "commands.hpp"
#include <attnrank/analysis/document.hpp>

#include <attnrank/numbers/decimal.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/tutorial/single_key_head.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

namespace attnrank::cli {
namespace {

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
  if (text.find(':') == std::string::npos) return parse_list(text, "--q");
  std::vector<Rational> parts = parse_list([&] { std::string t = text; std::replace(t.begin(), t.end(), ':', ','); return t; }(), "--q");
  if (parts.size() != 3) throw input_error("--q '" + text + "' must be FROM:TO:STEP or a comma list");
  const Rational from = parts[0], to = parts[1], step = parts[2];
  if (step == 0) throw input_error("--q step must not be 0");
  if ((to - from) / step < 0) throw input_error("--q '" + text + "': the step goes away from TO");
  if ((to - from) / step > 10000) throw input_error("--q '" + text + "' has more than 10001 values");
  std::vector<Rational> q;
  for (Rational x = from; step > 0 ? x <= to : x >= to; x += step) q.push_back(x);
  return q;
}

}  // namespace

void add_sweep_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand("sweep", "The d_k = 1 head (Section 2.5.4, Figure 8): softmax(q k) for each query q");
  struct Options {
    std::string keys = "2,0,1", q = "-2:2:1", mask = "none";
    long position = 0;
    int digits = 4;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("--keys", opt->keys, "Keys k, comma separated (default 2,0,1 as in the tutorial)");
  cmd->add_option("--q", opt->q, "Queries: FROM:TO:STEP or a comma list (default -2:2:1)");
  cmd->add_option("--mask", opt->mask, "none (default) or causal: the query at --position sees keys 1..position only")
      ->check(CLI::IsMember({"none", "causal"}));
  cmd->add_option("--position", opt->position, "With --mask causal: the query's position, 1-based (default: the last token)");
  cmd->add_option("--digits", opt->digits, "Certified decimals (default 4)")->check(CLI::Range(0, max_digits));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    const std::vector<Rational> keys = parse_list(opt->keys, "--keys");
    if (keys.size() > 10000) throw input_error("--keys has more than 10000 values");
    const std::vector<Rational> qs = parse_queries(opt->q);
    const bool causal = opt->mask == "causal";
    if (!causal && opt->position != 0) throw input_error("--position needs --mask causal");
    const auto n = static_cast<long>(keys.size());
    const long position = opt->position == 0 ? n : opt->position;
    if (causal && (position < 1 || position > n))
      throw input_error("--position " + std::to_string(position) + " is outside 1.." + std::to_string(n) + " (one per key)");
    const PrecisionScope scope(bits_for_decimals(opt->digits));
    const Matrix<Interval> W = causal ? certified_single_key_sweep(keys, qs, position) : certified_single_key_sweep(keys, qs);
    const std::vector<Rational> seen(keys.begin(), keys.begin() + (causal ? position : n));
    nlohmann::json rows = nlohmann::json::array();
    std::ostringstream s;
    s << "d_k = 1 head, keys k = (" << opt->keys << "): row weights softmax(q k), certified to " << opt->digits << " decimals";
    if (causal) s << "; causal mask, the query at position " << position << " sees keys 1.." << position;
    s << "\n";
    // Labels carry every digit the queries have (at least two decimals, as the
    // tutorial prints them); a query without a terminating decimal shows as p/q.
    int label_decimals = 2;
    for (const Rational& q : qs)
      if (const auto d = terminating_decimals(q)) label_decimals = std::max(label_decimals, std::min(*d, max_digits));
    const auto label = [&](const Rational& q) { return terminating_decimals(q) ? format_fixed(q, label_decimals) : q.str(); };
    for (std::size_t r = 0; r < qs.size(); ++r) {
      nlohmann::json weights = nlohmann::json::array();
      s << "  q = " << label(qs[r]) << ":";
      for (std::size_t j = 0; j < keys.size(); ++j) {
        const Interval& w = W(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j));
        const std::string text = certified_or_enclosure(w, opt->digits);
        weights.push_back(text);
        s << " " << text;
      }
      std::vector<Eigen::Index> top = top_tokens(seen, qs[r]);
      for (auto& t : top) ++t;
      s << "   top: ";
      if (top.empty()) s << "none (flat row)";
      for (std::size_t t = 0; t < top.size(); ++t) s << (t ? ", " : "") << "token " << top[t];
      s << "\n";
      rows.push_back({{"q", qs[r].str()}, {"weights", weights}, {"top", top}});
    }
    const auto one_based = [](std::vector<Eigen::Index> v) {
      for (auto& t : v) ++t;
      return v;
    };
    const auto list = [](const std::vector<Eigen::Index>& v) {
      std::string text;
      for (std::size_t t = 0; t < v.size(); ++t) text += (t ? ", token " : "token ") + std::to_string(v[t]);
      return text.empty() ? std::string("none (the keys are all equal: every row is flat)") : text;
    };
    const std::vector<Eigen::Index> winners = one_based(possible_winners(seen));
    s << "tokens that can ever take the top weight" << (causal ? " at position " + std::to_string(position) : std::string())
      << ": " << list(winners) << " (argmax k for q > 0, argmin k for q < 0" << (causal ? ", over keys 1..position" : "") << ")\n";
    nlohmann::json j{{"keys", opt->keys}, {"rows", rows}, {"possible_winners", winners}, {"mask", opt->mask}};
    if (causal) {
      const std::vector<Eigen::Index> anywhere = one_based(causal_possible_winners(keys));
      s << "at any position: " << list(anywhere)
        << " (the running records: a key at least every earlier key, or at most every earlier one)\n";
      j["position"] = position;
      j["causal_possible_winners"] = anywhere;
    }
    if (opt->json) run.print(json_document(j, "sweep"));
    else run.print(s.str());
  });
}

}  // namespace attnrank::cli
