#pragma once
// The sweep question: the d_k = 1 head of Section 2.5.4 of the tutorial
// "Multi-Head Attention" (Hao Ma, haoma7.github.io), Figure 8: the row weights
// softmax(q k) for each query q, certified, the tokens that take the top weight,
// and which tokens can ever take it (with the causal mask: at one position, and
// at any).
//
// Guarantee: every weight printed is certified to its digits (or printed as its
// enclosure); the top tokens and possible winners are exact (rational keys).

#include <attnrank/numbers/tiers.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace attnrank {

struct SweepQuestion {
  std::string keys = "2,0,1";     ///< the keys k, exact numbers separated by commas
  std::string queries = "-2:2:1"; ///< FROM:TO:STEP (exactly, at most 10 001) or a comma list
  bool causal = false;            ///< the query sees keys 1..position only
  long position = 0;              ///< with causal: the query's position, 1-based (0: the last token)
  int digits = 4;                 ///< certified decimals
};

struct SweepAnalysis {
  struct Row {
    Rational query;
    std::vector<std::string> weights;  ///< each certified to the digits asked, or its enclosure "[lo, hi]"
    std::vector<long> top;             ///< the tokens (1-based) with the top weight; empty: a flat row
  };
  SweepQuestion question;
  long position = 0;                   ///< resolved: 1..n with causal, n without
  std::vector<Row> rows;               ///< one per query, in order
  std::vector<long> possible_winners;  ///< tokens (1-based) that top some row (at `position` with causal)
  std::vector<long> causal_possible_winners;  ///< with causal: tokens that top a row at some position
};

/// input_error for keys or queries that are not exact numbers, too many of them,
/// a position without the causal mask or outside 1..n.
SweepAnalysis analyze_sweep(const SweepQuestion& q);

std::string to_text(const SweepAnalysis& s);
/// The document of docs/schema/sweep.schema.json.
nlohmann::json to_json(const SweepAnalysis& s);

}  // namespace attnrank
