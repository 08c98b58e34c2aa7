// attnrank reach: can a head of width d_k produce this attention pattern?
// Parses the options, asks the library's reach analysis (free or masked, with or
// without embeddings) and prints its report, certificate and figure.
#include "commands.hpp"
#include "figures.hpp"
#include "svg.hpp"

#include <attnrank/analysis/reach_analysis.hpp>
#include <attnrank/analysis/reach_picture.hpp>
#include <attnrank/reach/certificate.hpp>

#include <filesystem>
#include <memory>

namespace attnrank::cli {

void add_reach_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand("reach", "Can a head of width d_k produce this attention pattern? Yes, no or undecided, with a certificate");
  struct Options {
    std::string target, certificate, check, x, svg, mask = "none";
    ReachQuestion question;
    RefineFlags refine;
    double epsilon = -1;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  ReachQuestion& q = opt->question;
  cmd->add_option("TARGET", opt->target, "Target attention matrix: a matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or diag:N:P")->required();
  CLI::Option* dk_option = cmd->add_option("--dk", q.dk, "Head width d_k (1 <= d_k <= n); REQUIRED unless --check");
  cmd->add_option("--bits", q.bits, "Precision of the floor's lower bound (53: doubles; more: MPFI)")
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--x", opt->x, "Fixed embeddings X (n x d_model, a matrix file): decide for scores X M X^T instead of free scores");
  CLI::Option* epsilon_option =
      cmd->add_option("--epsilon", opt->epsilon, "Also decide whether some head of width d_k comes within this max entrywise error, in [0, 1]");
  cmd->add_option("--seed", q.seed, "Seed of the optimiser's restarts for the error bounds (printed)");
  cmd->add_option("--mask", opt->mask,
                  "causal, none, or a file of 0s and 1s (1: the query may attend): decide for a masked head, whose "
                  "masked scores are -inf (the target must be 0 exactly there)");
  add_refine_options(cmd, opt->refine);
  cmd->add_flag("--full-floor", q.full_floor, "Always bound the whole floor, not only what the verdict needs");
  cmd->add_option("--certificate", opt->certificate, "Also write the certificate (JSON) to this file");
  cmd->add_option("--check", opt->check, "Re-verify a certificate file against TARGET (with the --x X and --mask M it was made for) instead of deciding");
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
    if (!opt->certificate.empty()) write_text_file(opt->certificate, r.certificate.dump(1) + "\n");
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
