// attnrank sweep: the d_k = 1 head of Section 2.5.4 (Figure 8), row by row
// (analysis/sweep_analysis.hpp).
#include "commands.hpp"

#include <attnrank/analysis/sweep_analysis.hpp>

#include <memory>
#include <string>

namespace attnrank::cli {

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
    SweepQuestion q;
    q.keys = opt->keys;
    q.queries = opt->q;
    q.causal = opt->mask == "causal";
    q.position = opt->position;
    q.digits = opt->digits;
    const SweepAnalysis s = analyze_sweep(q);
    if (opt->json) run.print(to_json(s));
    else run.print(to_text(s));
  });
}

}  // namespace attnrank::cli
