// attnrank example: every step of the tutorial's Section 2.2.2, exact or certified.
#include "commands.hpp"

#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/layer_analysis.hpp>

#include <attnrank/attention/mask.hpp>
#include <attnrank/tutorial/worked_example.hpp>

namespace attnrank::cli {

void add_example_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand("example", "Every step of Section 2.2.2 (\"I love LLMs\", d_model = 4, h = 2)");
  struct Options {
    int digits = 2;
    std::string mask = "none";
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("--digits", opt->digits,
                  "Decimals to print, each certified by interval arithmetic (default 2, as the tutorial prints)")
      ->check(CLI::Range(0, max_digits));
  cmd->add_option("--mask", opt->mask, "causal (each token attends to itself and the tokens before it), none, or a 3 x 3 file of 0s and 1s");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    const auto layer = worked_example::layer<Rational>();
    LayerQuestion q{LayerTier::interval, DecimalFormat::decimals(opt->digits), 0, {}};
    if (auto m = run.read_mask(opt->mask, worked_example::X().rows(), "the example's X")) q.masks.push_back(std::move(*m));
    const std::vector<Mask>& masks = q.masks;
    const LayerAnalysis t = analyze_layer(layer, worked_example::X(), q);
    const std::vector<std::string> tokens(std::begin(worked_example::tokens), std::end(worked_example::tokens));
    if (opt->json) {
      nlohmann::json j = to_json(t);
      j["source"] = "Section 2.2.2";
      j["tokens"] = tokens;
      run.print(json_document(j, "example"));
    } else {
      run.print("Section 2.2.2 - multi-head attention on \"I love LLMs\"" +
            std::string(masks.empty() ? "" : masks[0].is_causal() ? ", causally (each token sees itself and the tokens before it)" : ", masked") +
            "\n" + to_text(t, tokens));
    }
  });
}

}  // namespace attnrank::cli
