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
      "check-kernel",
      "Certified error of an attention kernel's output O = softmax(s Q K^T) V, its gradients and logsumexp");
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
    std::optional<double> rtol, max_ratio;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  const std::string arrays = " (.npy or F.safetensors:NAME; shape (N, d), (H, N, d) or (B, H, N, d); any float dtype)";
  cmd->add_option("--q", opt->q, "Queries Q" + arrays);
  cmd->add_option("--k", opt->k, "Keys K, (..., N_k, d)");
  cmd->add_option("--v", opt->v, "Values V, (..., N_k, d_v)");
  cmd->add_option("--candidate", opt->candidate, "The kernel's output O, (..., N, d_v)");
  cmd->add_option("--reference", opt->reference, "A reference output (float32 or float64 attention, say) to compare with");
  cmd->add_option("--dout", opt->dout, "The upstream gradient dO the backward pass ran with, (..., N, d_v)");
  cmd->add_option("--dq", opt->dq, "The kernel's dQ, (..., N, d)");
  cmd->add_option("--dk", opt->dk, "The kernel's dK, (..., N_k, d)");
  cmd->add_option("--dv", opt->dv, "The kernel's dV, (..., N_k, d_v)");
  cmd->add_option("--lse", opt->lse, "The kernel's logsumexp of the scaled scores (natural log), (..., N)");
  cmd->add_option("--dsinks", opt->dsinks,
                  "The kernel's gradient of the sink logits, (H,): each head's summed over batches and sequences "
                  "(needs --sinks)");
  cmd->add_option("--reference-dq", opt->reference_dq, "A reference's dQ");
  cmd->add_option("--reference-dk", opt->reference_dk, "A reference's dK");
  cmd->add_option("--reference-dv", opt->reference_dv, "A reference's dV");
  cmd->add_option("--reference-lse", opt->reference_lse, "A reference's logsumexp");
  cmd->add_option("--reference-dsinks", opt->reference_dsinks, "A reference's gradient of the sink logits");
  cmd->add_option("--from", opt->from,
                  "A safetensors file holding any of q, k, v, out, dout, dq, dk, dv, lse, dsinks (a flag given wins)");
  cmd->add_option("--reference-from", opt->reference_from,
                  "A safetensors file holding a reference's out, dq, dk, dv, lse, dsinks (a flag given wins)");
  cmd->add_option("--mask", opt->mask,
                  "causal, none, an N_q x N_k file of 0s and 1s (1: the query may attend) for every head, or an "
                  ".npy / safetensors array of shape (H, N_q, N_k) or (B, H, N_q, N_k): one mask per head");
  cmd->add_option("--window", opt->window,
                  "FlashAttention's window_size LEFT,RIGHT: query i sees keys p - LEFT .. p + RIGHT (-1: unbounded), "
                  "p = i + N_k - N_q (see --align); with --mask causal, RIGHT is 0")
      ->delimiter(',')
      ->expected(2)
      ->type_name("LEFT,RIGHT");
  cmd->add_option("--align", opt->align,
                  "Where queries sit among the keys when N_q != N_k, for --mask causal and --window: bottom-right "
                  "(FlashAttention, default) or top-left (PyTorch's is_causal)")
      ->check(CLI::IsMember({"bottom-right", "top-left"}));
  cmd->add_option("--empty-rows", opt->empty_rows,
                  "A query row whose mask allows no key: refuse (exit 2, default) or zero (FlashAttention's output 0, "
                  "logsumexp +inf, gradients 0)")
      ->check(CLI::IsMember({"refuse", "zero"}));
  cmd->add_option("--softcap", opt->softcap,
                  "FlashAttention's softcap c > 0: scores become c tanh(s q.k / c), before ALiBi and the mask "
                  "(default 0: none)");
  cmd->add_option("--alibi-slopes", opt->alibi_slopes,
                  "ALiBi: a slope per head, comma-separated (shape (H,)) or an array of shape (H,) or (B, H); "
                  "scores get -slope |i + N_k - N_q - j| (--align top-left: -slope |i - j|)")
      ->type_name("LIST|FILE");
  cmd->add_option("--sinks", opt->sinks,
                  "Attention sinks: a logit per head, comma-separated or an array of shape (H,); exp(sink) joins "
                  "each row's softmax denominator (lse includes it)")
      ->type_name("LIST|FILE");
  cmd->add_option("--bias", opt->bias,
                  "An additive bias (PyTorch's float attn_mask) of shape (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, "
                  "N_k), added to the scores after --softcap; -inf entries mask their keys");
  cmd->add_option("--fp8", opt->fp8,
                  "Read uint8 Q, K, V arrays as FP8 codes of this format: e4m3 (float8_e4m3fn) or e5m2 (float8_e5m2); "
                  "safetensors F8_E4M3 / F8_E5M2 tensors need no flag")
      ->check(CLI::IsMember({"e4m3", "e5m2"}));
  for (auto [flag, field] : {std::pair{"--q-descale", &Options::q_descale}, std::pair{"--k-descale", &Options::k_descale},
                             std::pair{"--v-descale", &Options::v_descale}})
    cmd->add_option(flag, (*opt).*field,
                    std::string("FlashAttention-3's ") + (flag + 2) + " factors, shape (B, H_kv) or (H_kv,): a list or a "
                    "file; each multiplies its heads exactly")
        ->type_name("LIST|FILE");
  cmd->add_option("--dropout-mask", opt->dropout_mask,
                  "Dropout: the kernel's keep-mask (1: kept) of shape (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, N_k); "
                  "O = (P o Z) V / (1 - p), FlashAttention's");
  cmd->add_option("--dropout-p", opt->dropout_p, "Dropout's probability p, 0 <= p < 1 (with --dropout-mask)");
  cmd->add_option("--cu-seqlens-q", opt->cu_seqlens_q,
                  "Packed sequences (FlashAttention's varlen): B + 1 offsets of each sequence's queries, a list or "
                  "a file; Q, the output, dout and dQ are (total_q, H, d), lse (H, total_q)")
      ->type_name("LIST|FILE");
  cmd->add_option("--cu-seqlens-k", opt->cu_seqlens_k,
                  "With --cu-seqlens-q: the offsets of each sequence's keys; K, V, dK, dV are (total_k, H_kv, d). "
                  "Masks, bias and dropout masks come padded to (B, H, max_seqlen_q, max_seqlen_k)")
      ->type_name("LIST|FILE");
  cmd->add_option("--max-seqlen-q", opt->max_seqlen_q,
                  "FlashAttention's max_seqlen_q, checked against the offsets (optional)");
  cmd->add_option("--max-seqlen-k", opt->max_seqlen_k,
                  "FlashAttention's max_seqlen_k, checked against the offsets (optional)");
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
                  "plus --ratio-atol (FlashAttention's rule: 2 or 3)")
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_option("--ratio-atol", opt->ratio_atol,
                  "With --max-ratio: the floor a of the rule err <= max_ratio err(reference) + a (default 0)")
      ->type_name("FLOAT")
      ->check(non_negative);
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    KernelQuestion q;
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
    if (!k.exceeded.empty()) run.exit_code = 3;
  });
}

}  // namespace attnrank::cli
