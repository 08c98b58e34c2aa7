// attnrank example: every step of the tutorial's Section 2.2.2, exact or certified.
#include "commands.hpp"

#include <attnrank/analysis/example_analysis.hpp>
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
    ExampleQuestion q{opt->digits, run.read_mask(opt->mask, worked_example::X().rows(), "the example's X")};
    const ExampleAnalysis e = analyze_example(q);
    if (opt->json) run.print(to_json(e));
    else run.print(to_text(e));
  });
}

}  // namespace attnrank::cli
