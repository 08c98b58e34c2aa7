// attnrank check-kernel: the certified error of an attention kernel's output
// (and of a reference's), against the exact attention of the same Q, K, V.
#include "commands.hpp"

#include <attnrank/analysis/kernel_analysis.hpp>

#include <cmath>
#include <memory>
#include <optional>
#include <tuple>

namespace attnrank::cli {

void add_check_kernel_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "check-kernel", "check_kernel");
  struct Options {
    std::string q, k, v, candidate, reference, mask, fallback = "auto";
    std::string from, reference_from, dout, dq, dk, dv, lse, dsinks, reference_dq, reference_dk, reference_dv,
        reference_lse, reference_dsinks;
    std::optional<double> ratio_atol;
    std::vector<long> window;
    std::string align = "bottom-right", empty_rows = "refuse";
    double softcap = 0;
    std::string alibi_slopes, sinks, bias, fp8, q_descale, k_descale, v_descale, dropout_mask;
    std::string cu_seqlens_q, cu_seqlens_k;
    std::optional<std::size_t> max_seqlen_q, max_seqlen_k;
    double dropout_p = 0;
    std::string scale;
    unsigned bits = default_fallback_bits;
    std::string max_error;
    std::optional<double> rtol, max_ratio, max_ulps;
    std::string profile;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  // Each flag's text is the library's (option_help), with where the command line reads it from.
  const auto h = [](const char* option) { return option_help("check_kernel", option); };
  const std::string file = " (.npy or F.safetensors:NAME)";
  const std::string list = " (comma-separated, or an array file)";
  cmd->add_option("--q", opt->q, h("q") + file);
  cmd->add_option("--k", opt->k, h("k") + file);
  cmd->add_option("--v", opt->v, h("v") + file);
  cmd->add_option("--candidate", opt->candidate, h("candidate") + file);
  cmd->add_option("--reference", opt->reference, h("reference") + file);
  cmd->add_option("--dout", opt->dout, h("dout") + file);
  cmd->add_option("--dq", opt->dq, h("dq") + file);
  cmd->add_option("--dk", opt->dk, h("dk") + file);
  cmd->add_option("--dv", opt->dv, h("dv") + file);
  cmd->add_option("--lse", opt->lse, h("lse") + file);
  cmd->add_option("--dsinks", opt->dsinks, h("dsinks") + file);
  cmd->add_option("--reference-dq", opt->reference_dq, h("reference_dq") + file);
  cmd->add_option("--reference-dk", opt->reference_dk, h("reference_dk") + file);
  cmd->add_option("--reference-dv", opt->reference_dv, h("reference_dv") + file);
  cmd->add_option("--reference-lse", opt->reference_lse, h("reference_lse") + file);
  cmd->add_option("--reference-dsinks", opt->reference_dsinks, h("reference_dsinks") + file);
  cmd->add_option("--from", opt->from,
                  "A safetensors file holding any of q, k, v, out, dout, dq, dk, dv, lse, dsinks (a flag given wins)");
  cmd->add_option("--reference-from", opt->reference_from,
                  "A safetensors file holding a reference's out, dq, dk, dv, lse, dsinks (a flag given wins)");
  cmd->add_option("--mask", opt->mask, h("mask") + " (a matrix file, or an .npy / safetensors array per head)");
  cmd->add_option("--window", opt->window, h("window_size"))
      ->delimiter(',')
      ->expected(2)
      ->type_name("LEFT,RIGHT");
  cmd->add_option("--align", opt->align, h("alignment"))->check(CLI::IsMember({"bottom-right", "top-left"}));
  cmd->add_option("--empty-rows", opt->empty_rows, h("empty_rows"))->check(CLI::IsMember({"refuse", "zero"}));
  cmd->add_option("--softcap", opt->softcap, h("softcap"));
  cmd->add_option("--alibi-slopes", opt->alibi_slopes, h("alibi_slopes") + list)->type_name("LIST|FILE");
  cmd->add_option("--sinks", opt->sinks, h("sinks") + list)->type_name("LIST|FILE");
  cmd->add_option("--bias", opt->bias, h("attn_bias") + file);
  cmd->add_option("--fp8", opt->fp8, h("fp8_format") + "; safetensors F8_E4M3 / F8_E5M2 tensors need no flag")
      ->check(CLI::IsMember({"e4m3", "e5m2"}));
  for (auto [flag, field, option] :
       {std::tuple{"--q-descale", &Options::q_descale, "q_descale"},
        std::tuple{"--k-descale", &Options::k_descale, "k_descale"},
        std::tuple{"--v-descale", &Options::v_descale, "v_descale"}})
    cmd->add_option(flag, (*opt).*field, h(option) + list)->type_name("LIST|FILE");
  cmd->add_option("--dropout-mask", opt->dropout_mask, h("dropout_mask") + file);
  cmd->add_option("--dropout-p", opt->dropout_p, h("dropout_p"));
  cmd->add_option("--cu-seqlens-q", opt->cu_seqlens_q, h("cu_seqlens_q") + list)->type_name("LIST|FILE");
  cmd->add_option("--cu-seqlens-k", opt->cu_seqlens_k, h("cu_seqlens_k") + list)->type_name("LIST|FILE");
  cmd->add_option("--max-seqlen-q", opt->max_seqlen_q, h("max_seqlen_q"));
  cmd->add_option("--max-seqlen-k", opt->max_seqlen_k, h("max_seqlen_k"));
  cmd->add_option("--scale", opt->scale,
                  h("scale"))
      ->type_name("FLOAT")  // a decimal, checked as every numeric option is (run.cpp); kept as text to round once
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            return (end && *end == '\0' && std::isfinite(x) && x > 0) ? "" : "'" + v + "' is not a positive number";
          },
          "", "positive number"));
  cmd->add_option("--fallback", opt->fallback,
                  h("fallback"))
      ->check(CLI::IsMember({"auto", "never", "always"}));
  cmd->add_option("--bits", opt->bits, h("bits"))
      ->check(CLI::Range(53u, max_precision_bits));
  cmd->add_option("--max-error", opt->max_error,
                  h("max_error") + " (exit 3 when exceeded, for CI)")
      ->type_name("FLOAT");
  const CLI::Validator non_negative(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        return (end && *end == '\0' && std::isfinite(x) && x >= 0) ? "" : "'" + v + "' is not a non-negative number";
      },
      "", "non-negative number");
  cmd->add_option("--rtol", opt->rtol,
                  h("rtol"))
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_option("--max-ratio", opt->max_ratio,
                  h("max_ratio") + " (exit 3 when exceeded)")
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_option("--ratio-atol", opt->ratio_atol,
                  h("ratio_atol"))
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_option("--max-ulps", opt->max_ulps, h("max_ulps") + " (exit 3 when exceeded)")
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_option("--profile", opt->profile, h("profile") + " (exit 3 when exceeded)")->type_name("NAME|FILE.json");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    KernelQuestion q;
    if (!opt->profile.empty()) q.profile = profile_from_argument(opt->profile);
    q.max_ulps = opt->max_ulps;
    // A kernel's NaN or infinity is a finding to report (nonfinite), not bad input.
    // Packed sequences' tensors are read head by head: each sequence is then a block of rows.
    const bool packed = !opt->cu_seqlens_q.empty() || !opt->cu_seqlens_k.empty();
    const auto read = [&](const std::string& path, NonFiniteElements nonfinite = NonFiniteElements::refuse) {
      return NamedTensor{packed ? read_packed_tensor(path, run.limits, nonfinite)
                                : read_double_tensor(path, run.limits, nonfinite),
                         path};
    };
    const auto read_lse = [&](const std::string& path) {
      return NamedTensor{read_row_stack(path, run.limits, NonFiniteElements::keep), path};
    };
    const auto maybe = [&](std::optional<NamedTensor>& slot, const std::string& path, bool lse = false,
                           NonFiniteElements nonfinite = NonFiniteElements::keep) {
      if (!path.empty()) slot = lse ? read_lse(path) : read(path, nonfinite);
    };
    if (!opt->q.empty()) q.q = read(opt->q);
    if (!opt->k.empty()) q.k = read(opt->k);
    if (!opt->v.empty()) q.v = read(opt->v);
    maybe(q.candidate, opt->candidate);
    maybe(q.reference, opt->reference);
    maybe(q.dout, opt->dout, false, NonFiniteElements::refuse);
    maybe(q.dq, opt->dq);
    maybe(q.dk, opt->dk);
    maybe(q.dv, opt->dv);
    maybe(q.lse, opt->lse, true);
    maybe(q.dsinks, opt->dsinks, true);
    maybe(q.reference_dq, opt->reference_dq);
    maybe(q.reference_dk, opt->reference_dk);
    maybe(q.reference_dv, opt->reference_dv);
    maybe(q.reference_lse, opt->reference_lse, true);
    maybe(q.reference_dsinks, opt->reference_dsinks, true);
    // The offsets first: --from reads packed tensors head by head when they are given.
    if (!opt->cu_seqlens_q.empty())
      q.cu_seqlens_q = read_per_head_argument(opt->cu_seqlens_q, "--cu-seqlens-q", run.limits);
    if (!opt->cu_seqlens_k.empty())
      q.cu_seqlens_k = read_per_head_argument(opt->cu_seqlens_k, "--cu-seqlens-k", run.limits);
    if (!opt->from.empty()) read_kernel_tensors(q, opt->from, false, run.limits);
    if (!opt->reference_from.empty()) read_kernel_tensors(q, opt->reference_from, true, run.limits);
    if (q.q.tensor.matrices.empty() || q.k.tensor.matrices.empty() || q.v.tensor.matrices.empty())
      throw input_error("check-kernel needs Q, K and V: --q, --k, --v, or tensors named q, k, v in a --from file");
    if (!opt->max_error.empty()) {
      char* end = nullptr;
      q.max_error = std::strtod(opt->max_error.c_str(), &end);
      if (!(end && *end == '\0')) q.max_error = -1;  // refused by the analysis, with the text
      q.max_error_text = opt->max_error;
    }
    q.rtol = opt->rtol;
    q.max_ratio = opt->max_ratio;
    q.ratio_atol = opt->ratio_atol;
    if (!opt->scale.empty()) q.options.scale = std::strtod(opt->scale.c_str(), nullptr);
    q.max_seqlen_q = opt->max_seqlen_q;
    q.max_seqlen_k = opt->max_seqlen_k;
    q.options.empty_rows = empty_rows_from_name(opt->empty_rows);
    read_kernel_mask_argument(q, opt->mask, run.limits);
    if (!opt->window.empty()) q.window = std::pair<long, long>(opt->window[0], opt->window[1]);
    q.alignment = mask_alignment_from_name(opt->align);
    q.options.softcap = opt->softcap;
    if (!opt->alibi_slopes.empty()) q.alibi_slopes = read_per_head_argument(opt->alibi_slopes, "--alibi-slopes", run.limits);
    if (!opt->sinks.empty()) q.sinks = read_per_head_argument(opt->sinks, "--sinks", run.limits);
    q.fp8_format = opt->fp8;
    if (!opt->q_descale.empty()) q.q_descale = read_per_head_argument(opt->q_descale, "--q-descale", run.limits);
    if (!opt->k_descale.empty()) q.k_descale = read_per_head_argument(opt->k_descale, "--k-descale", run.limits);
    if (!opt->v_descale.empty()) q.v_descale = read_per_head_argument(opt->v_descale, "--v-descale", run.limits);
    if (!opt->dropout_mask.empty())
      q.dropout_mask = NamedTensor{read_double_tensor(opt->dropout_mask, run.limits), opt->dropout_mask};
    q.dropout_p = opt->dropout_p;
    if (!opt->bias.empty())
      q.bias = NamedTensor{read_double_tensor(opt->bias, run.limits, NonFiniteElements::keep), opt->bias};
    q.options.fallback = fallback_policy_from_name(opt->fallback);
    q.options.fallback_bits = opt->bits;
    const KernelAnalysis k = analyze_kernel(std::move(q));
    if (opt->json) run.print(to_json(k));
    else run.print(to_text(k));
    if (opt->json) run.notes.insert(run.notes.end(), k.notes.begin(), k.notes.end());  // the text has them already
    if (!k.exceeded.empty()) run.exit_code = 3;
  });
}

}  // namespace attnrank::cli
