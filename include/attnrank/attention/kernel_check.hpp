#pragma once
// The true error of an attention kernel's output, certified. For heads
// (Q_t, K_t, V_t), t = 1..T (one per batch and head), and an output O_t that a
// kernel computed, the exact output is E_t = softmax(s Q_t K_t^T) V_t (rows over
// the keys a mask allows); check_kernel proves
//   max_abs_error_lower <= max_t,i,j |O_t(i, j) - E_t(i, j)| <= max_abs_error_upper
// and the same divided by max |E|, from enclosures lo <= E <= hi:
//   |O - E| >= max(O - hi, lo - O, 0)   and   |O - E| <= max(O - lo, hi - O),
// each rounded outward. For a candidate and a reference, their ratio (the
// number kernel tests compare with "at most twice the reference's error") is
// enclosed as [c_lower / r_upper, c_upper / r_lower].
//
// The enclosures come from the certified double tier (certified_attention),
// first with a priori bounded products (width ~ 3 N u max |V|), then, if that
// leaves an error unpinned but within reach, with directed products (~ N u). When they are too wide for the question -- an output's error is
// not known to 1% (its bounds differ by more than 1% of the upper one) -- the
// check recomputes every head with MPFI at `fallback_bits` (width ~ N 2^-bits)
// and says so; with FallbackPolicy::automatic only when the work (the
// multiply-adds of all heads) is below `fallback_budget`, otherwise the wide
// bounds stand and `fallback_skipped` explains what would tighten them.
// The mean absolute error and the RMS error over all entries are bounded the
// same way (FlexAttention and FlashInfer compare those). A non-finite entry of an
// output is an infinite error at that entry: the bounds are +inf and the entry is
// reported, never skipped.

#include <attnrank/attention/certified_attention.hpp>
#include <attnrank/attention/precision_profile.hpp>
#include <attnrank/attention/score_modifiers.hpp>

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace attnrank {

/// Proven bounds on one output's error against the exact attention.
/// A tensor's error in units in the last place of the exact value, entry by entry,
/// |O - E| / ulp(E) in a format (NumberFormat::ulp over E's enclosure: the lower end over
/// the largest ulp, the upper over the smallest): its certified max and how many entries'
/// upper ends fall in each of the bins [0, 0.5], (0.5, 1], (1, 2], (2, 4], (4, 16], (16, inf]
/// ulps. Non-finite entries are not counted. (Outside OutputError: a nested class with
/// default member initializers is not default-constructible for std::optional inside its
/// enclosing class, in clang.)
struct UlpReport {
  std::string format;
  double max_lower = 0, max_upper = 0;
  std::array<std::size_t, 6> histogram{};
};

struct OutputError {
  double max_abs_error_lower = 0, max_abs_error_upper = 0;  ///< on max |O - E|
  double max_rel_error_lower = 0, max_rel_error_upper = 0;  ///< on max |O - E| / max |E|
  double max_abs_exact_lower = 0, max_abs_exact_upper = 0;  ///< on max |E|
  double mean_abs_error_lower = 0, mean_abs_error_upper = 0;  ///< on the mean of |O - E| over every entry
  double rms_error_lower = 0, rms_error_upper = 0;  ///< on sqrt(mean of (O - E)^2) over every entry
  /// Where the error is largest as far as proven: the entry with the largest
  /// lower bound (the largest upper bound when every lower bound is 0), or the
  /// first entry with an infinite error (infinite()) in C order when there is one, as
  /// (matrix index t, row, column), 0-based.
  std::size_t worst_matrix = 0;
  Eigen::Index worst_row = 0, worst_column = 0;
  std::size_t nonfinite = 0;  ///< entries of O that are NaN or infinite
  /// Entries of O that are finite where the exact value is +inf (FlashAttention's logsumexp of
  /// a query row without a key): each a proven infinite error, placed as nonfinite ones are.
  std::size_t infinity_missed = 0;
  /// Some entry's error is infinite (proven): nonfinite or infinity_missed entries.
  bool infinite() const { return nonfinite > 0 || infinity_missed > 0; }
  /// With the output's format (KernelCheckOptions::output_format): its error in ulps.
  std::optional<UlpReport> ulps;
  /// True when the bounds pin the error to 1%: upper - lower <= upper / 100.
  bool tight() const;
  /// True when a tenth of the spread would pin it (upper - lower <= upper / 8): worth the
  /// directed products (about 10x narrower) before MPFI.
  bool within_reach() const { return tight() || max_abs_error_upper - max_abs_error_lower <= max_abs_error_upper / 8; }
};

/// When to recompute with MPFI (see the header comment).
enum class FallbackPolicy { automatic, never, always };
/// "auto", "never", "always"; input_error naming them otherwise.
FallbackPolicy fallback_policy_from_name(const std::string& name);
/// The fallback precision's default, bits (MPFI).
inline constexpr unsigned default_fallback_bits = 128;

struct KernelCheckOptions {
  std::optional<double> scale;  ///< s (positive, finite); default 1 / sqrt(d) for d = columns of Q
  /// Grouped-query (GQA) and multi-query (MQA) attention: query head t reads the K and V
  /// matrices kv_heads[t]. A K/V matrix no query head reads (the keys of a packed sequence
  /// without queries) changes no output, and its exact dK and dV are 0. Empty: one K and one
  /// V per query head, kv_heads[t] = t.
  std::vector<std::size_t> kv_heads;
  std::optional<Mask> mask;          ///< one mask for every head (N_q x N_k)
  /// A query row whose mask allows no key: refused (the default), or FlashAttention's output 0
  /// (logsumexp +inf, or the sink with one; gradients 0) with EmptyRows::zero.
  EmptyRows empty_rows = EmptyRows::refuse;
  /// Per-head masks: masks[t] for query head t (each N_q x N_k of its head); empty: `mask`
  /// for every head. Not both.
  std::vector<Mask> masks;
  /// Variants (attention/score_modifiers.hpp): FlashAttention's softcap c (0: none); ALiBi
  /// slopes and sink logits, one per query head t (empty: none); where ALiBi's distance is
  /// measured from when N_q != N_k (a mask carries its own alignment).
  double softcap = 0;
  std::vector<double> alibi_slopes, sinks;
  /// Which sink parameter query head t's logit is: sinks are learned per head and shared by the
  /// batches (FlashAttention-4's learnable_sink of shape (H,)), so the gradient a kernel returns
  /// for parameter g is the sum over the query heads t with sink_params[t] = g. Heads sharing a
  /// parameter have equal sinks. Empty: one parameter per query head.
  std::vector<std::size_t> sink_params;
  /// Additive biases, one N_q x N_k matrix per query head t (finite; empty: none).
  std::vector<Eigen::MatrixXd> biases;
  /// Dropout: a keep-mask per query head t (N_q x N_k, 0/1; empty: no dropout) and its p.
  std::vector<Eigen::MatrixXd> dropout_keep;
  double dropout_p = 0;
  MaskAlignment alignment = MaskAlignment::bottom_right;
  FallbackPolicy fallback = FallbackPolicy::automatic;
  unsigned fallback_bits = 128;
  double fallback_budget = 1.5e8;  ///< multiply-adds (N_q N_k (d + d_v) per head)
  /// The candidate's format, for its error in ulps (OutputError::ulps); nullopt: none.
  std::optional<NumberFormat> output_format;
};

struct KernelCheck {
  OutputError candidate;
  std::optional<OutputError> reference;
  /// Bounds on candidate error / reference error (hi = +inf when the reference's
  /// lower bound is 0; [0, +inf] when the reference has a non-finite entry, whose
  /// error is infinite); only with a reference.
  double ratio_lower = 0, ratio_upper = 0;
  std::string method;      ///< "double" (certified double tier) or "mpfi"
  /// With method "double": "a_priori" (one GEMM per product, an a priori error
  /// bound) or "directed" (directed-rounding pairs, when the first was too wide
  /// but a tenth of its spread would pin the errors); empty for "mpfi".
  std::string products;
  unsigned bits = 53;      ///< precision of the enclosures used
  double enclosure_width = 0;  ///< largest hi - lo of the enclosures used (rounded up)
  std::string fallback_skipped;  ///< why the MPFI recomputation did not run, when it was wanted
};

/// kv_heads for Q with leading dimensions (batches, heads) and K, V with (batches,
/// kv_heads), kv_heads dividing heads: query head h of batch b reads K/V head
/// h / (heads / kv_heads) of batch b (FlashAttention's and PyTorch's enable_gqa grouping).
/// input_error when kv_heads does not divide heads.
std::vector<std::size_t> grouped_kv_heads(std::size_t batches, std::size_t heads, std::size_t kv_heads);

/// The K/V matrix query head t reads.
inline std::size_t kv_head_of(const KernelCheckOptions& options, std::size_t t) {
  return options.kv_heads.empty() ? t : options.kv_heads[t];
}

/// Query head t's mask (nullptr: none).
inline const Mask* mask_of(const KernelCheckOptions& options, std::size_t t) {
  return !options.masks.empty() ? &options.masks[t] : options.mask ? &*options.mask : nullptr;
}

/// Query head t's score modifiers.
ScoreModifiers modifiers_of(const KernelCheckOptions& options, std::size_t t);

/// The sink parameter query head t's logit is (KernelCheckOptions::sink_params).
inline std::size_t sink_param_of(const KernelCheckOptions& options, std::size_t t) {
  return options.sink_params.empty() ? t : options.sink_params[t];
}

/// How many sink parameters `queries` query heads have (0 without sinks).
std::size_t sink_param_count(std::size_t queries, const KernelCheckOptions& options);

/// Checks `candidate` (and `reference`, if given) against the exact attention of
/// the heads q[t], k[kv_head_of(t)], v[kv_head_of(t)]. Every list has one matrix per head, and every
/// output matrix the shape of its head's exact output (rows of Q x columns of V).
/// Throws input_error on a shape mismatch (naming the head and both shapes),
/// a non-finite entry of Q, K or V, or a mask of the wrong size. `enclosures`, when
/// given, are certified enclosures of each head's exact output computed elsewhere (the
/// error budget's pass, attention/error_budget.hpp, which computes them anyway): they
/// serve as the first, a priori run's instead of computing it again (no modifiers only).
KernelCheck check_kernel(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                         const std::vector<Eigen::MatrixXd>& v, const std::vector<Eigen::MatrixXd>& candidate,
                         const std::vector<Eigen::MatrixXd>* reference = nullptr,
                         const KernelCheckOptions& options = {},
                         const std::vector<BoundsMatrix>* enclosures = nullptr);

namespace detail {
/// input_error (naming `who`) unless there are as many K as V matrices and options.kv_heads
/// maps the query heads onto them (empty: one per query head).
void check_kv_heads(std::size_t queries, std::size_t keys, std::size_t values, const KernelCheckOptions& options,
                    const char* who);
/// input_error (naming `who`) unless the modifiers are valid, alibi_slopes, sinks and masks are
/// empty or have one entry per query head, not both mask and masks are given, no mask leaves a
/// query row without a key unless empty_rows is EmptyRows::zero, and sink_params
/// is empty or maps every query head (with sinks) onto parameters 0 .. G - 1 whose heads share
/// one logit.
void check_modifiers(std::size_t queries, const KernelCheckOptions& options, const char* who);
/// Why the MPFI recomputation of `what` did not run: over the automatic budget.
std::string fallback_skipped_note(const std::string& what, double width, const KernelCheckOptions& options,
                                  double work);
}  // namespace detail

}  // namespace attnrank
