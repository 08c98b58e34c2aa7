#pragma once
// One attention head in the certified double tier, shared by certified_attention
// (check-kernel) and certified_double_forward (the layer's trace). The rows of a
// head are independent, so it runs row block by row block (64 rows at a time; 256
// in the fused a priori pass of attention/detail/a_priori_head.hpp) on the machine's cores: scores, scale, softmax and the product with V for a block
// stay in cache instead of making a dozen passes over N x N matrices, which at
// N = 4096 (134 MB each) cost more than the GEMMs.

#include <attnrank/attention/certified_attention.hpp>

#include <string>

namespace attnrank::detail {

/// Bounds of one head's steps for Q, K, V given as balls (N_q x d, N_k x d,
/// N_k x d_v; shapes and finiteness checked by the caller): the scores Q K^T,
/// the scaled scores, the weights (masked entries exactly 0) and the output
/// A V. `scores`, `scaled` and `weights` are filled only when `keep_trace` is set.
/// AttentionProducts::a_priori applies to point Q, K, V only (balls use the directed products).
struct HeadBounds {
  BoundsMatrix scores, scaled, weights, output;
};
/// input_error, its message starting with `what` ("attention", "attention backward"),
/// unless Q, K, V have consistent shapes and finite entries, the scale bounds are a
/// positive band and the mask fits: the contract of every certified head, forward and
/// backward.
void require_attention_inputs(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                              const ScaleBounds& scale, const Mask* mask, const std::string& what);

HeadBounds certified_head(const BallMatrix& Q, const BallMatrix& K, const BallMatrix& V, const ScaleBounds& scale,
                          const Mask* mask, bool keep_trace,
                          AttentionProducts products = AttentionProducts::directed);

}  // namespace attnrank::detail
