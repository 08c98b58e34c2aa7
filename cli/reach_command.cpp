// attnrank reach: can a head of width d_k produce this attention pattern?
// Parses the options, asks the library's reach analysis (free or masked, with or
// without embeddings) and prints its report, certificate and figure.
#include "commands.hpp"
#include "figures.hpp"
#include "svg.hpp"

#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/reach_analysis.hpp>
#include <attnrank/analysis/reach_picture.hpp>
#include <attnrank/reach/certificate.hpp>

#include <filesystem>
#include <memory>

namespace attnrank::cli {

void add_reach_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "reach", "reach");
  struct Options {
    std::string target, certificate, check, x, svg, mask = "none";
    ReachQuestion question;
    RefineFlags refine;
    double epsilon = -1;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  ReachQuestion& q = opt->question;
  cmd->add_option("TARGET", opt->target, option_help("reach", "A") + matrix_source)->required();
  CLI::Option* dk_option = cmd->add_option("--dk", q.dk, option_help("reach", "d_k") + "; REQUIRED unless --check");
  cmd->add_option("--bits", q.bits, option_help("reach", "bits"))
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--x", opt->x, option_help("reach", "x") + " (a matrix file)");
  CLI::Option* epsilon_option =
      cmd->add_option("--epsilon", opt->epsilon, option_help("reach", "epsilon"));
  cmd->add_option("--seed", q.seed, option_help("reach", "seed"));
  cmd->add_option("--mask", opt->mask,
                  option_help("reach", "mask") + " (a matrix file)");
  add_refine_options(cmd, opt->refine, "reach");
  cmd->add_flag("--full-floor", q.full_floor, option_help("reach", "full_floor"));
  cmd->add_option("--certificate", opt->certificate, "Also write the certificate (JSON) to this file");
  cmd->add_option("--check", opt->check,
                  "Instead of deciding: a certificate file. " + option_help("check_certificate", "certificate") +
                      " (--x, --mask)");
  cmd->add_option("--svg", opt->svg, "Also draw the target, the best width-d_k head and the spectrum of log(A) C (SVG file)");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, dk_option, epsilon_option, &run] {
    const Matrix<Rational> A = run.read(opt->target);
    validate_target(A, opt->target);
    ReachQuestion q = opt->question;
    q.target_name = opt->target;
    q.x_name = opt->x;
    q.mask = run.read_mask(opt->mask, A.rows(), opt->target);
    if (!opt->x.empty()) q.x = run.read(opt->x);
    if (!opt->check.empty()) {
      const nlohmann::json cert = parse_certificate(read_text_file(opt->check, run.limits), opt->check);
      const CertificateAnalysis c = analyze_certificate(A, cert, q.mask, q.x, opt->check, opt->target);
      if (opt->json) run.print(to_json(c));
      else run.print(to_text(c));
      return;
    }
    if (dk_option->count() == 0) throw input_error("--dk is required (the head width to decide)");
    if (epsilon_option->count() > 0) q.epsilon = opt->epsilon;
    q.refine = refine_options(opt->refine, run, "refining error_upper");
    const ReachAnalysis r = analyze_reach(A, q);
    if (!opt->certificate.empty()) write_text_file(opt->certificate, certificate_file_text(r));
    if (opt->json && !r.rows_sum_to_one) run.notes.push_back(opt->target + ": " + rows_not_normalised_note);
    if (!opt->svg.empty()) {
      const ReachPicture p = reach_picture(A, q.mask, r);
      write_text_file(opt->svg, reach_figure(p.target, p.pattern ? &*p.pattern : nullptr, p.spectrum, p.dk, p.caption,
                                             p.spectrum_title));
    }
    if (opt->json) run.print(to_json(r));
    else run.print(to_text(r));
  });
}

}  // namespace attnrank::cli
