// attnrank svd: certified bounds on the k largest singular values (analysis/svd_analysis.hpp).
#include "commands.hpp"

#include <attnrank/analysis/svd_analysis.hpp>

#include <memory>

namespace attnrank::cli {

void add_svd_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "svd", "svd");
  struct Options {
    std::string matrix;
    long top = 0;
    bool gaps = false, json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, option_help("svd", "M") + matrix_source)->required();
  CLI::Option* top = cmd->add_option("--top", opt->top, option_help("svd", "top"));
  cmd->add_flag("--gaps", opt->gaps, option_help("svd", "gaps"));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, top, &run] {
    SvdQuestion q{std::nullopt, opt->gaps, opt->matrix};
    if (top->count() > 0) q.top = opt->top;
    const SvdAnalysis s = analyze_svd_argument(opt->matrix, q, run.limits, &run.notes);
    if (opt->json) run.print(to_json(s));
    else run.print(to_text(s));
  });
}

}  // namespace attnrank::cli
