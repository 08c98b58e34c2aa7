#pragma once
// A kernel question (analysis/kernel_analysis.hpp) turned into what check_kernel and
// check_kernel_gradients read: one matrix per query head (and per K/V head) of every
// tensor, and the options with each head's mask and modifiers. Everything a question
// can get wrong is refused here with an input_error naming the tensor; what comes out
// is checked as it is.
//
// Dense tensors (..., N, d) give heads of one size. Packed sequences (FlashAttention's
// varlen: cu_seqlens) give one head per (sequence, head), each of its own length,
// built by preparing each sequence as a dense question of shape (H, N_b, d) and
// joining the results.

#include <attnrank/analysis/kernel_analysis.hpp>

#include <iterator>
#include <string>
#include <vector>

namespace attnrank::detail {

/// The backward results in KernelInputs::gradients' order, as flags and reports name them.
inline constexpr const char* kernel_roles[] = {"dq", "dk", "dv", "lse", "dsinks"};
inline constexpr std::size_t kernel_role_count = std::size(kernel_roles);

/// One matrix per head: borrowed from a question's tensor (no copy) or owned.
class HeadList {
 public:
  /// A question's matrices, read in place: they must outlive the list.
  static HeadList borrow(const std::vector<Eigen::MatrixXd>& matrices) {
    HeadList l;
    l.borrowed_ = &matrices;
    return l;
  }
  static HeadList own(std::vector<Eigen::MatrixXd> matrices) {
    HeadList l;
    l.owned_ = std::move(matrices);
    return l;
  }
  const std::vector<Eigen::MatrixXd>& get() const { return borrowed_ ? *borrowed_ : owned_; }
  std::vector<Eigen::MatrixXd>& owned() { return owned_; }  ///< the list to append to (for joined heads)

 private:
  std::vector<Eigen::MatrixXd> owned_;
  const std::vector<Eigen::MatrixXd>* borrowed_ = nullptr;
};

struct KernelInputs {
  HeadList q, k, v;  ///< FP8 codes decoded, descale factors applied
  /// The results given (empty lists: not given), in check_kernel_gradients' order.
  HeadList candidate, reference, dout;
  HeadList gradients[kernel_role_count], reference_gradients[kernel_role_count];  ///< dq, dk, dv, lse, dsinks
  KernelCheckOptions options;                      ///< kv_heads, masks and modifiers per query head
  std::string mask_name;                           ///< as reports name it ("causal", "per-head", ...)
  /// Packed sequences: query head t is head h of sequence b, packed_heads[t] = b H + h (a
  /// sequence without queries has none; its K/V heads are all there). Empty: dense.
  std::vector<std::size_t> packed_heads;
  std::vector<std::size_t> cu_seqlens_q, cu_seqlens_k;  ///< packed: the validated offsets; empty: dense
  bool backward = false;                           ///< some backward result is given
};

/// The dense question's inputs (every tensor (..., N, d) with Q's leading dimensions, or
/// fewer K/V heads dividing Q's): all validation of analyze_kernel but the tolerances'.
KernelInputs dense_kernel_inputs(const KernelQuestion& q);

/// The packed question's inputs (q.cu_seqlens_q given): one head per sequence and head. With
/// `movable` (the same question, the caller's to give up), a sequence that spans a whole
/// packed tensor read head by head takes its matrices instead of copying them.
KernelInputs varlen_kernel_inputs(const KernelQuestion& q, KernelQuestion* movable = nullptr);

/// The candidate's and reference's dsinks of `q` (shape (H,): a head's sink is shared by every
/// batch and sequence, its gradient their sum) into in.gradients[4] as one H x 1 matrix each,
/// entries as given (a NaN is an infinite error, not refused); in.options.sink_params maps query
/// head t = b H + h onto h. input_error without sinks or for another shape.
void add_sink_gradients(const KernelQuestion& q, std::size_t heads, KernelInputs& in);

/// FlashAttention's window_size (left, right) as reports name it: "causal" or "window(l, r)".
std::string window_mask_name(long left, long right);

}  // namespace attnrank::detail
