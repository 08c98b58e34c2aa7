// attnrank check-kernel: the certified error of an attention kernel's output
// (and of a reference's), against the exact attention of the same Q, K, V.
#include "commands.hpp"

#include <attnrank/analysis/kernel_analysis.hpp>

#include <cmath>
#include <memory>
#include <optional>

namespace attnrank::cli {

void add_check_kernel_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand(
      "check-kernel", "Certified error of an attention kernel's output O against the exact softmax(s Q K^T) V");
  struct Options {
    std::string q, k, v, candidate, reference, mask, fallback = "auto";
    std::string scale;
    unsigned bits = 128;
    std::string max_error;
    std::optional<double> rtol, max_ratio;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  const std::string arrays = " (.npy or F.safetensors:NAME; shape (N, d), (H, N, d) or (B, H, N, d); any float dtype)";
  cmd->add_option("--q", opt->q, "Queries Q" + arrays)->required();
  cmd->add_option("--k", opt->k, "Keys K, (..., N_k, d)")->required();
  cmd->add_option("--v", opt->v, "Values V, (..., N_k, d_v)")->required();
  cmd->add_option("--candidate", opt->candidate, "The kernel's output O, (..., N, d_v)")->required();
  cmd->add_option("--reference", opt->reference, "A reference output (float32 or float64 attention, say) to compare with");
  cmd->add_option("--mask", opt->mask, "causal, none, or an N x N file of 0s and 1s (1: the query may attend)");
  cmd->add_option("--scale", opt->scale,
                  "Softmax scale s (default 1/sqrt(d)); the double nearest to it, as Python's float() reads it")
      ->type_name("FLOAT")  // a decimal, checked as every numeric option is (run.cpp); kept as text to round once
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            return (end && *end == '\0' && std::isfinite(x) && x > 0) ? "" : "'" + v + "' is not a positive number";
          },
          "", "positive number"));
  cmd->add_option("--fallback", opt->fallback,
                  "Recompute with MPFI when the double enclosures are too wide: auto (default: when affordable), "
                  "never, always")
      ->check(CLI::IsMember({"auto", "never", "always"}));
  cmd->add_option("--bits", opt->bits, "Precision of the MPFI fallback in bits (default 128)")
      ->check(CLI::Range(53u, max_precision_bits));
  cmd->add_option("--max-error", opt->max_error,
                  "Exit 3 when the candidate's certified max |O - exact| lower bound exceeds this (for CI)")
      ->type_name("FLOAT");
  const CLI::Validator non_negative(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        return (end && *end == '\0' && std::isfinite(x) && x >= 0) ? "" : "'" + v + "' is not a non-negative number";
      },
      "", "non-negative number");
  cmd->add_option("--rtol", opt->rtol,
                  "With --max-error: the tolerance is max_error + rtol max |exact| (torch.testing's form, on the max)")
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_option("--max-ratio", opt->max_ratio,
                  "Exit 3 when the candidate's error is proven above this multiple of the reference's "
                  "(FlashAttention's rule is 2)")
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    KernelQuestion q;
    // A kernel's NaN or infinity is a finding to report (nonfinite), not bad input.
    const auto read = [&](const std::string& path, NonFiniteElements nonfinite = NonFiniteElements::refuse) {
      return NamedTensor{read_double_tensor(path, run.limits, nonfinite), path};
    };
    q.q = read(opt->q);
    q.k = read(opt->k);
    q.v = read(opt->v);
    q.candidate = read(opt->candidate, NonFiniteElements::keep);
    if (!opt->reference.empty()) q.reference = read(opt->reference, NonFiniteElements::keep);
    if (!opt->max_error.empty()) {
      char* end = nullptr;
      q.max_error = std::strtod(opt->max_error.c_str(), &end);
      if (!(end && *end == '\0')) q.max_error = -1;  // refused by the analysis, with the text
      q.max_error_text = opt->max_error;
    }
    q.rtol = opt->rtol;
    q.max_ratio = opt->max_ratio;
    if (!opt->scale.empty()) q.options.scale = std::strtod(opt->scale.c_str(), nullptr);
    if (!opt->mask.empty()) q.options.mask = run.read_mask(opt->mask, q.q.tensor.matrices[0].rows(), opt->q + " (Q)");
    q.options.fallback = opt->fallback == "never"    ? FallbackPolicy::never
                         : opt->fallback == "always" ? FallbackPolicy::always
                                                     : FallbackPolicy::automatic;
    q.options.fallback_bits = opt->bits;
    const KernelAnalysis k = analyze_kernel(q);
    if (opt->json) run.print(to_json(k));
    else run.print(to_text(k));
    if (k.max_error_exceeded || k.ratio_verdict == ToleranceVerdict::exceeded) run.exit_code = 3;
  });
}

}  // namespace attnrank::cli
