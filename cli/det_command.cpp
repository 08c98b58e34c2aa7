// attnrank det: exact or certified determinant of a square matrix (analysis/det_analysis.hpp).
#include "commands.hpp"

#include <attnrank/analysis/det_analysis.hpp>

#include <memory>

namespace attnrank::cli {

void add_det_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "det", "det");
  struct Options {
    std::string matrix, mode = "exact";
    DetQuestion question;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, option_help("det", "M") + matrix_source)->required();
  cmd->add_option("--mode", opt->mode, option_help("det", "mode"))->check(CLI::IsMember({"exact", "certified"}));
  cmd->add_option("--bits", opt->question.bits, option_help("det", "bits"))
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--digits", opt->question.digits,
                  option_help("det", "digits"))
      ->check(CLI::Range(1, max_digits));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    const Matrix<Rational> A = run.read(opt->matrix);
    DetQuestion q = opt->question;
    q.certified = det_mode_is_certified(opt->mode);
    q.matrix_name = opt->matrix;
    const DetAnalysis d = analyze_det(A, q);
    if (opt->json) run.print(to_json(d));
    else run.print(to_text(d));
  });
}

}  // namespace attnrank::cli
