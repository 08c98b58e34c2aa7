// attnrank det: exact or certified determinant of a square matrix (analysis/det_analysis.hpp).
#include "commands.hpp"

#include <attnrank/analysis/det_analysis.hpp>

#include <memory>

namespace attnrank::cli {

void add_det_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand("det", "Determinant of a square matrix: exact, or a certified enclosure");
  struct Options {
    std::string matrix, mode = "exact";
    DetQuestion question;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, matrix_help)->required();
  cmd->add_option("--mode", opt->mode, "exact (default) or certified")->check(CLI::IsMember({"exact", "certified"}));
  cmd->add_option("--bits", opt->question.bits, "Certified mode: working precision in bits (default 53: doubles)")
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--digits", opt->question.digits,
                  "Significant digits to print, of the exact value and of the enclosure (default 17)")
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
