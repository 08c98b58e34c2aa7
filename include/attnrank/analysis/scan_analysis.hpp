#pragma once
// Every head of a model at once: a stack of attention patterns (..., n, n) --
// layers x heads, prompts, several files -- each slice asked the reach and width
// questions on a pool of threads, results handed back as heads finish.
//
// Guarantee: each head's numbers are those of analyze_reach and analyze_width on
// that slice alone (the same policy: the cheap certified band by default, the
// optimiser only when asked or when epsilon needs it, within the per-head time
// limit), so floor_lower <= floor <= floor_upper, error_lower <= E* <= error_upper
// at d_k, and width_lower <= w* <= width_upper are proven for that slice. A head
// whose search stopped at its time limit says so and keeps the bounds it has; no
// head is dropped. Heads run side by side; nothing is shared between them.

#include <attnrank/analysis/refinement.hpp>
#include <attnrank/attention/mask.hpp>
#include <attnrank/io/torch_weights.hpp>
#include <attnrank/reach/free.hpp>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace attnrank {

/// The heads to scan: n x n patterns with their place in the stack, held in
/// memory (`patterns`) or read one at a time when asked for (`read`: a stack in
/// files, read_head_stack), so that a stack of any size costs a few heads of memory.
struct HeadStack {
  std::vector<std::size_t> shape;  ///< the whole stack's shape, (..., n, n); several files: (files, ...)
  std::vector<std::vector<std::size_t>> index;  ///< each head's leading indices, in C order
  std::vector<Eigen::MatrixXd> patterns;        ///< each head's pattern (exact doubles), when held
  /// Otherwise head t's pattern, read when asked (from several threads at once).
  std::function<Eigen::MatrixXd(std::size_t)> read;
  std::string name;                             ///< for messages and the report

  std::size_t size() const { return read ? index.size() : patterns.size(); }
  /// Head t's pattern: held, or read now.
  Eigen::MatrixXd pattern(std::size_t t) const { return read ? read(t) : patterns.at(t); }
};

struct ScanQuestion {
  std::optional<Eigen::Index> dk;       ///< the verdict and error band at this width
  std::optional<double> epsilon;        ///< the minimal width band (and epsilon_verdict at d_k)
  std::optional<Mask> mask;             ///< every head is masked so (n must match)
  std::optional<Eigen::Index> max_dk;   ///< the widths tried for epsilon, in [1, n]; nullopt: min(n, 16)
  unsigned jobs = 0;                    ///< threads; 0: every core (ATTNRANK_THREADS caps both)
  std::uint64_t seed = 1;
  /// Per head: the optimiser's policy and time limit (refinement.hpp).
  RefineOptions refine;
};

/// The heads a model's attention layers make, as a stack to scan: for layer l and
/// head h, softmax((X_l W^Q_h)(X_l W^K_h)^T / sqrt(d_k)) under `mask`, computed by
/// the layer's double tier -- the patterns the weights define to about 1e-15, not
/// certified; the scan then certifies every bound for exactly these patterns. Shape
/// (layers, heads, n, n), index [l, h]. `inputs`: one X (n x d_model) for every
/// layer, or one per layer (each layer's own input, as the model computes it).
/// input_error naming the layer (`layer_names`) when a shape does not fit.
HeadStack attention_head_stack(const std::vector<AttentionWeights>& layers, const std::vector<Matrix<Rational>>& inputs,
                               Eigen::Index heads, const std::optional<Mask>& mask,
                               const std::vector<std::string>& layer_names, const std::string& name);

/// One head's answer.
struct HeadScan {
  std::vector<std::size_t> index;
  Eigen::Index n = 0;
  bool zero_entry = false;              ///< a zero entry outside the mask: no finite scores produce it
  Eigen::Index zero_entries = 0;        ///< how many (exact zeros where the mask allows a key)
  double smallest_weight = 0;           ///< the head's smallest positive weight
  /// Why a head is what it is, when the input is the likely cause (empty: nothing to say): zeros
  /// exactly causal without the causal mask, or zeros a low-precision save may have made.
  std::string note;
  Eigen::Index floor_lower = 0, floor_upper = 0;
  std::optional<Verdict> verdict;       ///< with d_k
  std::optional<double> error_lower, error_upper;  ///< at d_k (n <= 512, or with epsilon)
  std::optional<std::string> epsilon_verdict;      ///< with d_k and epsilon
  std::optional<Eigen::Index> width_lower;         ///< with epsilon
  std::optional<Eigen::Index> width_upper;         ///< with epsilon; nullopt: none up to max_dk
  Eigen::Index max_dk = 0;
  bool refined = false;                 ///< the optimiser ran for this head
  bool time_limit_reached = false;      ///< ... and stopped at the limit: more time may sharpen
  /// ... and spent its fixed work while still improving: the full search
  /// (time limit 0) would likely sharpen (Refinement::still_improving).
  bool still_improving = false;
  double seconds = 0;                   ///< wall time of this head
};

/// How much of a head's minimal width is known: "exact" (width_lower = width_upper),
/// "upper" (a certified witness at width_upper, no narrower width proven to miss:
/// width_lower is 1 only because nothing better is proven), "range" (both bounds,
/// apart), "lower" (no witness within epsilon up to max_dk). Empty without epsilon.
std::string width_known(const HeadScan& h);

/// The heads of every argument (a .npy of shape (..., n, n), F.safetensors:NAME, a
/// matrix file), in order; several arguments add a leading file index. Binary
/// arrays are mapped and each head read when the scan asks for it
/// (MatrixStackFile); text is read whole. input_error for an argument that cannot
/// be read, or none.
HeadStack read_head_stack(const std::vector<std::string>& arguments, const ParseLimits& limits = {});

/// The heads of `stack` read as above: input_error naming the slice (its index)
/// when a pattern is not square, not finite, has a row that does not sum to a
/// positive number, or does not fit the mask; nothing is computed then.
void validate(const HeadStack& stack, const ScanQuestion& q);
/// The question's options alone (epsilon, the refinement), as validate checks
/// them: for a caller that sends the heads elsewhere (Python's Dask path).
void validate(const ScanQuestion& q);

/// Scans every head, `jobs` at a time; `on_head` is called (from the worker
/// threads, one call at a time) as each head finishes, in completion order. The
/// result holds every head in stack order. input_error as validate.
std::vector<HeadScan> analyze_scan(const HeadStack& stack, const ScanQuestion& q,
                                   const std::function<void(const HeadScan&)>& on_head = {});

/// One head as a JSON object (one line of --jsonl): "index", "n", "floor_lower", ...
nlohmann::json to_json(const HeadScan& h);

/// A note on a stack as a whole ("" when there is none): a stack of shape (1, n, n)
/// is one head, and it is the shape of torch's nn.MultiheadAttention weights with
/// need_weights=True, which are the average over its heads unless
/// average_attn_weights=False. The command line prints it as a note, Python warns.
std::string stack_note(const std::vector<std::size_t>& shape);
/// The whole scan ("attnrank/scan/1", docs/schema/scan.schema.json).
nlohmann::json scan_document(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads);
/// A table for people: one line per head, then each note once with the heads it concerns.
std::string scan_text(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads);

}  // namespace attnrank
