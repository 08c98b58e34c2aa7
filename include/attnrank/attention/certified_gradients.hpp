#pragma once
// The backward pass of one attention head, certified in doubles: entrywise bounds
// on the exact gradients of O = softmax(s Q K^T) V (rows over the keys a mask
// allows) contracted with a given upstream gradient dO, and on the logsumexp of
// the scaled scores, for the exact values of the given doubles:
//   P = softmax(s Q K^T),  dV = P^T dO,  dP = dO V^T,  D_i = sum_l dO_il O_il,
//   dS = P o (dP - D 1^T),  dQ = s dS K,  dK = s dS^T Q,
//   lse_i = log sum_{j allowed} exp(s q_i . k_j),
// and with a sink logit z, dz = -sum_i p_iz D_i, p_iz = exp(z) / (exp(z) + sum_j exp(x_ij))
// the sink's own weight (the chain rule through every p_ij's denominator: dp_ij/dz =
// -p_ij p_iz, and sum_j p_ij dP_ij = D_i, with dropout too).
// D comes from the exact O (enclosed here), not from any kernel's output.
//
// The proof is a chain of enclosures, each of the exact value given enclosures of
// its inputs, on a block of query rows at a time (nothing N_q x N_k is stored but a
// block's rows; dK and dV are sums over the blocks, added in directed rounding):
//  * scores and weights as in attention/certified_attention.hpp: the scores from
//    a product pair (or one product with an a priori bound), scaled outward, a
//    variant's softcap and ALiBi applied (attention/score_modifiers.hpp), then
//    certified_softmax_bounds (with the sink's term in the denominator); O from the weights as an interval matrix times V,
//    clamped to V's column range (each O_il is a convex combination of V_jl);
//  * D_i = sum_l dO_il O_il in upward rounding (a lower end as -(sum of -terms));
//  * dP - D and P o (dP - D) entrywise in directed rounding (P >= 0, so each end
//    of the product is one product of ends; a weight of exactly 0, a masked key,
//    gives exactly 0, and 0 x inf is never formed);
//  * dQ, dK, dV as products of an interval matrix and a point matrix (Rump's
//    midpoint-radius product with a directed pair, or one product with an a priori
//    bound), the scale s in [scale.lo, scale.hi] applied outward;
//  * dz = -sum_i p_iz D_i: p_iz enclosed by the certified softmax as every weight, each
//    product one product of ends (p_iz >= 0), the sum in directed rounding;
//  * lse_i = x_ij - log p_ij for ANY allowed j (p_ij = exp(x_ij - lse_i) exactly);
//    the j with the largest lower weight bound (>= about 1/N) keeps log well
//    conditioned: lse_i in [x_lo - log p_hi, x_hi - log p_lo], log by
//    numbers/certified_log.hpp.
// Every pair returned is a band (numbers/bands.hpp): lo <= hi, no NaN, for any
// finite inputs; an end that overflows, or that met an unbounded enclosure, is
// infinite on its own side. Width for well-scaled inputs: about N u times the
// sizes involved with directed products (~10 N u with a priori ones), plus
// 2^-47 absolute on lse (the certified log's widening).

#include <attnrank/attention/certified_attention.hpp>
#include <attnrank/attention/score_modifiers.hpp>

namespace attnrank {

/// Which of the backward pass's results to enclose (the others are left empty); output:
/// the forward output O itself (a variant's forward check runs on this pass).
/// dsink: the gradient of the sink logit (with a sink only).
struct GradientsWanted {
  bool dq = true, dk = true, dv = true, lse = true, output = false, dsink = false;
  bool any_gradient() const { return dq || dk || dv || dsink; }
};

/// Bounds of the exact gradients and logsumexp of one head: dq (N_q x d), dk
/// (N_k x d), dv (N_k x d_v), lse (N_q x 1), output (N_q x d_v), dsink (1 x 1); empty
/// where not wanted.
struct GradientBounds {
  BoundsMatrix dq, dk, dv, lse, output, dsink;
};

/// The backward pass of softmax(s Q K^T) V for the double matrices Q (N_q x d),
/// K (N_k x d), V (N_k x d_v) and dO (N_q x d_v; may be empty when only lse is
/// wanted), with `mask` (N_q x N_k: a row per query, a column per key) or without (nullptr),
/// and a variant's score modifiers (attention/score_modifiers.hpp: softcap, ALiBi, sink) or
/// none. With a softcap, dS is taken through its derivative before dQ and dK (dS o (1 -
/// tanh^2(x / c))); with a sink, O lies between 0 and V's column range, and lse includes
/// the sink (log(exp(sink) + sum_j exp(x_ij)), the normaliser of the weights).
/// Throws input_error on mismatched shapes, a non-finite entry or an invalid modifier.
GradientBounds certified_attention_gradients(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                             const Eigen::MatrixXd& V, const Eigen::MatrixXd& dO,
                                             const ScaleBounds& scale, const Mask* mask = nullptr,
                                             AttentionProducts products = AttentionProducts::directed,
                                             const GradientsWanted& wanted = {},
                                             const ScoreModifiers& modifiers = {});

}  // namespace attnrank
