#pragma once
// An attention kernel's forward and backward results checked as one analysis
// (attention/kernel_check.hpp, attention/gradient_check.hpp): tensors of one or
// more heads in, certified bounds on the true error of the candidate's output O,
// gradients dq, dk, dv (for an upstream gradient dout) and logsumexp (and of a
// reference's, with their ratio) out, and one JSON writer and one text writer for
// the CLI and Python.
//
// Guarantee: max_abs_error_lower <= max |O - softmax(s Q K^T) V| <= max_abs_error_upper
// for the exact attention of the exact inputs, and the same for each gradient
// against the exact gradient of that function contracted with dout, and for the
// logsumexp. With a tolerance (max_error + rtol max |exact|, or max_ratio times the
// reference's error plus ratio_atol: FlashAttention's rule), applied to every
// tensor checked, each verdict is proven either way or `undecided`
// (attention/kernel_tolerance.hpp); `max_error_exceeded` is true only when an
// error is proven larger, `exceeded` lists every tensor proven outside a tolerance.
// With a precision profile, the output and the logsumexp are also judged against the
// profile's certified error budget (attention/error_budget.hpp): "exceeded" then
// proves that no correct kernel of the profile gives that error on these inputs.

#include <attnrank/attention/error_budget.hpp>
#include <attnrank/attention/gradient_check.hpp>
#include <attnrank/attention/kernel_check.hpp>
#include <attnrank/attention/kernel_tolerance.hpp>
#include <attnrank/io/double_tensor.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace attnrank {

/// One tensor of the question with the name messages and reports use for it.
struct NamedTensor {
  DoubleTensor tensor;
  std::string name;
};

struct KernelQuestion {
  NamedTensor q, k, v;
  std::optional<NamedTensor> candidate;  ///< the kernel's output O (the forward check)
  std::optional<NamedTensor> reference;  ///< a reference's output
  std::optional<NamedTensor> dout;       ///< the upstream gradient (Q's rows x V's columns); needed by dq, dk, dv
  /// The kernel's backward results and a reference's (lse: Q's shape without its last dimension;
  /// dsinks: (H,), the gradient of each head's sink logit, summed over batches and sequences).
  std::optional<NamedTensor> dq, dk, dv, lse, dsinks, reference_dq, reference_dk, reference_dv, reference_lse,
      reference_dsinks;
  KernelCheckOptions options;         ///< scale, mask (a pattern file's), fallback policy and bits
  /// FlashAttention's causal and window_size = (left, right) (-1: unbounded), built into the
  /// N_q x N_k mask by analyze_kernel (Mask::window; causal is window (left, 0)), aligned
  /// bottom-right (FlashAttention) or top-left (PyTorch's is_causal) when N_q != N_k.
  bool causal = false;
  std::optional<std::pair<long, long>> window;
  MaskAlignment alignment = MaskAlignment::bottom_right;  ///< also where ALiBi's distance is measured from
  /// FlashAttention's alibi_slopes, shape (H,) or (B, H), and sink logits, shape (H,) (one per
  /// query head), as row stacks (read_per_head_argument); analyze_kernel gives each query head
  /// its value in options.alibi_slopes / options.sinks. The softcap is options.softcap.
  std::optional<NamedTensor> alibi_slopes, sinks;
  /// Per-head masks: 0/1 (or boolean) of shape (H, N_q, N_k) or (B, H, N_q, N_k), 1 where the
  /// query may attend (PyTorch's boolean attn_mask convention); (H, ...) serves every batch.
  /// Not with options.mask, causal or window.
  std::optional<NamedTensor> masks;
  /// An additive bias (PyTorch's float attn_mask) of shape (N_q, N_k), (H, N_q, N_k) or (B, H,
  /// N_q, N_k), added to the scores after the softcap; its -inf entries mask their keys (with
  /// any mask given), +inf and NaN are refused. Read with non-finite elements kept.
  std::optional<NamedTensor> bias;
  /// FP8 inputs: Q, K and V arrays of one-byte unsigned codes (uint8, what a framework without
  /// float8 dtypes stores) are read as FP8 values of this format ("e4m3": float8_e4m3fn, "e5m2":
  /// float8_e5m2), exactly; empty: none. Safetensors F8_E4M3 / F8_E5M2 tensors need no format.
  std::string fp8_format;
  /// FlashAttention-3's descale factors, shape (B, H_kv) or (H_kv,): query head h of batch b is
  /// q_descale[b, h / (H / H_kv)] times its Q, K and V heads k_descale and v_descale times theirs.
  /// Each product must be exactly a double (FP8 codes times float32 descales always are).
  std::optional<NamedTensor> q_descale, k_descale, v_descale;
  /// Dropout with the kernel's own keep-mask (1: kept) of shape (N_q, N_k), (H, N_q, N_k) or
  /// (B, H, N_q, N_k), and its probability p: O = (P o Z) V / (1 - p), FlashAttention's.
  std::optional<NamedTensor> dropout_mask;
  double dropout_p = 0;
  /// Packed sequences (FlashAttention's varlen functions): Q of shape (total_q, H, d), K and V
  /// (total_k, H_kv, d), every output and gradient packed the same way, lse (H, total_q);
  /// sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of Q and the results, and
  /// cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 of K and V. Each sequence is its own attention:
  /// causal and windows aligned within it, ALiBi slopes and descales (B, H) by sequence. Arrays
  /// with an entry per query and key (per-head masks, bias, dropout mask) come padded, FlashAttention's
  /// padded layout: (M_q, M_k), (H, M_q, M_k) or (B, H, M_q, M_k) with M_q and M_k at least every
  /// sequence's length, sequence b reading the top-left N_q x N_k block. Both or neither given.
  std::optional<NamedTensor> cu_seqlens_q, cu_seqlens_k;
  /// FlashAttention's max_seqlen_q / max_seqlen_k: optional; refused when below a sequence's length.
  std::optional<std::size_t> max_seqlen_q, max_seqlen_k;
  std::optional<double> max_error;    ///< a CI gate: exceeded when proven larger
  std::string max_error_text;         ///< max_error as the user wrote it (printed back; empty: its shortest decimal)
  std::optional<double> rtol;         ///< with max_error: the tolerance max_error + rtol max |E|
  std::optional<double> max_ratio;    ///< candidate error <= max_ratio x reference error + ratio_atol (needs a reference)
  std::optional<double> ratio_atol;   ///< with max_ratio: FlashAttention's floor a (default 0)
  /// A tolerance on the output's error in ulps of its dtype (OutputError::ulps): every
  /// entry's |O - E| / ulp(E) at most this (within), or some entry's proven above it (exceeded).
  std::optional<double> max_ulps;
  /// Judge the output (and the logsumexp, when given) against this profile's certified
  /// error budget; nullopt: none. Not with packed sequences, descales or the variants
  /// the budget does not model (input_error).
  std::optional<PrecisionProfile> profile;
};

/// One backward result of the kernel checked: its files, bounds and verdicts.
struct GradientReport {
  std::string role;  ///< "dq", "dk", "dv", "lse" or "dsinks"
  std::string candidate_name, candidate_dtype, reference_name, reference_dtype;
  TensorCheck check;
  std::optional<ToleranceVerdict> error_verdict, ratio_verdict;
};

struct KernelAnalysis {
  std::vector<std::size_t> q_shape, k_shape, v_shape;
  std::string q_dtype, candidate_name, candidate_dtype, reference_name, reference_dtype;
  std::size_t heads = 0;
  DoubleTensor layout;     ///< Q's shape (for the worst entry's batch and head), no data; packed: (B, H, 1, 1)
  DoubleTensor kv_layout;  ///< K's shape (dK's and dV's worst entries), no data; packed: (B, H_kv, 1, 1)
  /// Packed sequences: the offsets of each sequence's first query and key (B + 1 each); a
  /// worst entry at row r of sequence b is packed token cu_seqlens_q[b] + r. Empty: dense.
  std::vector<std::size_t> cu_seqlens_q, cu_seqlens_k;
  /// Packed sequences: b H + h of each checked query head t (a worst entry's matrix index),
  /// sequences without queries left out. heads counts these.
  std::vector<std::size_t> packed_heads;
  std::string scale_text;  ///< the scale as used: 17 digits, or "1/sqrt(d)"
  std::string mask_name = "none";
  /// With EmptyRows::zero: the query rows (over every head) whose mask allows no key, each
  /// checked against FlashAttention's output 0; nullopt when rows without a key are refused.
  std::optional<std::size_t> empty_rows;
  double softcap = 0;                          ///< 0: none
  std::vector<double> alibi_slopes, sinks;     ///< one per query head, as checked (empty: none)
  std::string alibi_alignment;                 ///< "bottom-right" or "top-left", with ALiBi
  std::string bias_name;                       ///< the additive bias's source, with one
  std::string fp8_format;                      ///< with uint8 inputs read as FP8 codes
  std::vector<std::string> descaled;           ///< "q", "k", "v": the inputs descale factors multiplied
  std::optional<double> dropout_p;             ///< with a dropout mask
  std::optional<KernelCheck> result;     ///< the output's check (with a candidate)
  std::optional<GradientCheck> backward;  ///< the backward pass's enclosure (with dq, dk, dv or lse)
  std::vector<GradientReport> gradients;  ///< in the order dq, dk, dv, lse, dsinks
  std::string dout_name, dout_dtype;
  std::optional<double> max_error;
  std::string max_error_text;
  std::optional<double> rtol, max_ratio, ratio_atol;
  std::optional<ToleranceVerdict> error_verdict, ratio_verdict;  ///< the output's, with max_error / max_ratio
  std::optional<double> max_ulps;
  std::optional<ToleranceVerdict> ulps_verdict;  ///< the output's, with max_ulps
  bool max_error_exceeded = false;  ///< some tensor's error_verdict is exceeded
  /// Every tensor ("out", "dq", ...) with a verdict proven exceeded: exit 3 in the CLI.
  std::vector<std::string> exceeded;
  /// With a profile: the output's and the logsumexp's budget verdicts (those given).
  std::optional<PrecisionProfile> profile;
  std::optional<BudgetVerdict> out_budget, lse_budget;
  /// What the inputs make doubtful, in words (inexact_reference_note: a reference proven
  /// outside its dtype's default tolerance); the CLI prints them, Python warns.
  std::vector<std::string> notes;
};

/// Every tolerance verdict of the check in one place, in the order out, dq, dk,
/// dv, lse, dsinks: (tensor, criterion "max_error", "max_ratio", "max_ulps" or "budget", verdict).
struct TensorVerdict {
  std::string tensor, criterion;
  ToleranceVerdict verdict = ToleranceVerdict::undecided;
};
std::vector<TensorVerdict> tensor_verdicts(const KernelAnalysis& k);
/// combined_verdict of them all: nullopt without a tolerance.
std::optional<ToleranceVerdict> overall_verdict(const KernelAnalysis& k);

/// Fills the tensors of `q` not given yet (an empty name, or nullopt) from a
/// safetensors file, by name: q, k, v, out (the candidate's output), dout, dq, dk,
/// dv, lse, dsinks; with `as_reference`, the file holds a reference computation's out, dq,
/// dk, dv, lse, dsinks instead. What a GPU run saves with safetensors.torch.save_file.
/// Other names are ignored; input_error when the file has none of them.
void read_kernel_tensors(KernelQuestion& q, const std::string& path, bool as_reference, const ParseLimits& limits = {});

/// A kernel check's mask argument into `q`: "causal" (q.causal), "none", an N_q x N_k 0/1
/// matrix in any format read_mask_argument reads (q.options.mask), or an .npy or safetensors
/// array of shape (H, N_q, N_k) or (B, H, N_q, N_k) (q.masks, one mask per head). Q and K
/// must be read already (their rows size the mask). With packed sequences (q.cu_seqlens_q
/// given first) a file must be an .npy or safetensors array, padded (q.masks). input_error
/// names the file and entry.
void read_kernel_mask_argument(KernelQuestion& q, const std::string& argument, const ParseLimits& limits = {});

/// A list argument (ALiBi slopes, sinks, cu_seqlens offsets): comma-separated decimals ("0.5,0.25", shape
/// (H,)), or an array of shape (H,) or (B, H) in any format read_row_stack reads. input_error
/// names `what` and the entry that is not a number.
NamedTensor read_per_head_argument(const std::string& argument, const std::string& what, const ParseLimits& limits = {});

/// Checks the shapes (packed sequences: see KernelQuestion::cu_seqlens_q; dense: every tensor has Q's leading dimensions, except K, V, dK and dV,
/// which may have fewer heads when their number divides Q's: grouped-query and
/// multi-query attention, query head h reading K/V head h / (H / H_kv); a mask needs as
/// many queries as keys; ALiBi slopes of shape (H,) or (B, H) and sinks of shape (H,) with Q's
/// H and B) and runs check_kernel. input_error names the tensor.
KernelAnalysis analyze_kernel(const KernelQuestion& q);
/// The same, free to take over the question's packed tensors: a sequence that spans a whole
/// packed tensor (one sequence) then reads it in place instead of a copy.
KernelAnalysis analyze_kernel(KernelQuestion&& q);

nlohmann::json to_json(const KernelAnalysis& k);  ///< "attnrank/check-kernel/1"
std::string to_text(const KernelAnalysis& k);

}  // namespace attnrank
