#pragma once
// The true errors of a kernel's backward pass, certified: for heads (Q_t, K_t, V_t),
// an upstream gradient dO_t and the gradients and logsumexp a kernel computed, proven
// bounds on each one's max absolute, max relative, mean absolute and RMS error
// against the exact gradients of softmax(s Q K^T) V contracted with dO
// (attention/certified_gradients.hpp: D from the exact output, never the kernel's),
// and the same for a reference's with the ratio of the two max errors, as
// check_kernel does for the output (attention/kernel_check.hpp).
//
// The enclosure policy is the forward's: the certified double tier with a priori
// bounded products first, directed products when that leaves an error unpinned
// but within reach, and MPFI at `fallback_bits` when the double enclosures cannot
// pin an error to 1% (under FallbackPolicy::automatic only within
// `fallback_budget` multiply-adds; otherwise `fallback_skipped` says why not).

#include <attnrank/attention/kernel_check.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

/// A backward pass's results, one matrix per head each: dq (N_q x d), dk (N_k x d),
/// dv (N_k x d_v), lse (N_q x 1, natural log of the scaled scores' row sums, as
/// FlashAttention's softmax_lse); and dsinks, ONE matrix of G x 1, the gradient of each
/// sink parameter (KernelCheckOptions::sink_params; G of them): the sum over its query
/// heads of -sum_i p_iz D_i (attention/certified_gradients.hpp). An empty list is a result
/// not given.
struct KernelGradients {
  std::vector<Eigen::MatrixXd> dq, dk, dv, lse, dsinks;
};

/// One checked tensor: the candidate's proven error, and with a reference its
/// error and the bounds on candidate / reference max error (as in KernelCheck).
struct TensorCheck {
  OutputError candidate;
  std::optional<OutputError> reference;
  double ratio_lower = 0, ratio_upper = 0;
};

struct GradientCheck {
  std::optional<TensorCheck> dq, dk, dv, lse, dsinks;  ///< those the candidate gave
  std::string method;    ///< "double" or "mpfi" (as KernelCheck::method)
  std::string products;  ///< "a_priori" or "directed" with "double"; empty for "mpfi"
  unsigned bits = 53;
  double enclosure_width = 0;  ///< largest hi - lo of the enclosures used (rounded up)
  std::string fallback_skipped;
};

/// Checks the candidate's gradients (and the reference's: only tensors the
/// candidate gives too) against the exact backward pass of every head. dout
/// may be empty when only lse is checked. Throws input_error on a count or shape
/// mismatch (naming the tensor, head and both shapes), a non-finite entry of Q,
/// K, V or dO, a reference tensor without its candidate, dsinks without sinks, or
/// nothing to check.
GradientCheck check_kernel_gradients(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                                     const std::vector<Eigen::MatrixXd>& v, const std::vector<Eigen::MatrixXd>& dout,
                                     const KernelGradients& candidate, const KernelGradients* reference = nullptr,
                                     const KernelCheckOptions& options = {});

}  // namespace attnrank
