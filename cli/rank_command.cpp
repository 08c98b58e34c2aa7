// attnrank rank: exact, certified or numeric rank of a matrix (analysis/rank_analysis.hpp).
#include "commands.hpp"

#include <attnrank/analysis/rank_analysis.hpp>
#include <attnrank/io/matrix_spec.hpp>

#include <memory>

namespace attnrank::cli {

void add_rank_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "rank", "rank");
  struct Options {
    std::string matrix, mode = "exact";
    unsigned bits = 53;
    double tol = -1;
    long top = 0;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, option_help("rank", "M") + matrix_source)->required();
  cmd->add_option("--mode", opt->mode, option_help("rank", "mode"))
      ->check(CLI::IsMember({"exact", "certified", "numeric"}));
  cmd->add_option("--bits", opt->bits, option_help("rank", "bits"))
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--tol", opt->tol, option_help("rank", "tol"))
      ->check(CLI::Range(0.0, 1e308));
  cmd->add_option("--top", opt->top, option_help("rank", "top"))
      ->check(CLI::Range(1L, max_spec_size));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    RankQuestion q;
    q.mode = parse_rank_mode(opt->mode);
    q.bits = opt->bits;
    if (opt->tol >= 0) q.tolerance = opt->tol;
    q.top = opt->top;
    q.matrix_name = opt->matrix;
    const RankAnalysis r = analyze_rank_argument(opt->matrix, q, run.limits, &run.notes);
    if (opt->json) run.print(to_json(r));
    else run.print(to_text(r));
  });
}

}  // namespace attnrank::cli
