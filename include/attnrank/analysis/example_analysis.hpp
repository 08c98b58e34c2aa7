#pragma once
// The example question: every step of Section 2.2.2 of the tutorial "Multi-Head
// Attention" (Hao Ma, haoma7.github.io) -- "I love LLMs", d_model = 4, h = 2 -- as
// the layer analysis computes it in the interval tier, with its two writers.
//
// Guarantee: the layer analysis's (every printed digit proven, or printed as its
// certified enclosure); the tokens and the section are the tutorial's.

#include <attnrank/analysis/layer_analysis.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

struct ExampleQuestion {
  int digits = 2;           ///< decimals, each certified (the tutorial prints 2)
  std::optional<Mask> mask;  ///< one mask for both heads (3 x 3); none when empty
};

struct ExampleAnalysis {
  LayerAnalysis layer;
  std::vector<std::string> tokens;  ///< "I", "love", "LLMs"
  std::string masking;              ///< "" without a mask, "causally" or "masked"
};

/// The worked example's layer on its X, in the interval tier at q.digits decimals.
ExampleAnalysis analyze_example(const ExampleQuestion& q);

/// The document "attnrank/example/1" (docs/schema/example.schema.json): the layer's
/// trace, the section it reproduces and the tokens.
nlohmann::json to_json(const ExampleAnalysis& e);
/// The trace for people, its rows labelled by the tokens.
std::string to_text(const ExampleAnalysis& e);

}  // namespace attnrank
