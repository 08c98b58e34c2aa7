// attnrank rank: exact, certified or numeric rank of a matrix (analysis/rank_analysis.hpp).
#include "commands.hpp"

#include <attnrank/analysis/rank_analysis.hpp>
#include <attnrank/io/matrix_spec.hpp>

#include <memory>

namespace attnrank::cli {

void add_rank_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand("rank", "Rank of a matrix: exact, certified bounds, or numeric (SVD)");
  struct Options {
    std::string matrix, mode = "exact";
    unsigned bits = 53;
    double tol = -1;
    long top = 0;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, matrix_help)->required();
  cmd->add_option("--mode", opt->mode, "exact (default), certified or numeric")
      ->check(CLI::IsMember({"exact", "certified", "numeric"}));
  cmd->add_option("--bits", opt->bits, "Certified mode: working precision in bits (default 53: doubles)")
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--tol", opt->tol, "Numeric mode: singular values above it count (default sigma_max max(m,n) eps)")
      ->check(CLI::Range(0.0, 1e308));
  cmd->add_option("--top", opt->top, "Numeric mode: only the K largest singular values (Lanczos), and the distance to rank K")
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
