// The example question (attnrank/analysis/example_analysis.hpp).
#include <attnrank/analysis/example_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/tutorial/worked_example.hpp>

#include <iterator>

namespace attnrank {

ExampleAnalysis analyze_example(const ExampleQuestion& q) {
  LayerQuestion lq{LayerTier::interval, DecimalFormat::decimals(q.digits), 0, {}};
  ExampleAnalysis e;
  if (q.mask) {
    lq.masks.push_back(*q.mask);
    e.masking = q.mask->is_causal() ? "causally" : "masked";
  }
  e.layer = analyze_layer(worked_example::layer<Rational>(), worked_example::X(), lq);
  e.tokens.assign(std::begin(worked_example::tokens), std::end(worked_example::tokens));
  return e;
}

nlohmann::json to_json(const ExampleAnalysis& e) {
  nlohmann::json j = to_json(e.layer);
  j["source"] = "Section 2.2.2";
  j["tokens"] = e.tokens;
  return json_document(j, "example");
}

std::string to_text(const ExampleAnalysis& e) {
  const std::string how = e.masking == "causally" ? ", causally (each token sees itself and the tokens before it)"
                          : e.masking.empty()     ? ""
                                                  : ", " + e.masking;
  return "Section 2.2.2 - multi-head attention on \"I love LLMs\"" + how + "\n" + to_text(e.layer, e.tokens);
}

}  // namespace attnrank
