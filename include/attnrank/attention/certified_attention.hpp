#pragma once
// Certified attention in doubles: entrywise bounds lo <= O <= hi on the exact
// real output O = softmax(s Q K^T) V of one head (rows normalised over the keys a
// mask allows), computed with doubles and directed rounding only, at the cost of
// a few GEMMs and two vectorised exp passes; no MPFR.
//
// Every input is taken exactly: a double (or a float16, bfloat16, float32 widened
// to one) is the dyadic rational it stores. The proof is three steps, each an
// enclosure of the exact value given enclosures of its inputs:
//  * scores: Q K^T by a directed GEMM pair (numbers/directed_rounding.hpp), times
//    the scale enclosure [s_lo, s_hi] rounded outward;
//  * weights: certified_softmax_bounds (attention/certified_softmax.hpp);
//  * output: the weights as a midpoint-radius ball times V (Rump's product).
// Width for well-scaled inputs: about (2 N + 20 + 2 |s_ij - max_j s_ij|) u
// relative on the weights (N keys, u = 2^-53), and what the product adds,
// about N u |P| |V|.
//
// With AttentionProducts::a_priori the two products are each ONE GEMM in
// round-to-nearest with an a priori bound on its error (numbers/a_priori_product.hpp),
// and a row block's scale, softmax and normalisation are one fused pass
// (attention/detail/a_priori_head.hpp): the scores within gamma_d ||q_i|| ||k_j||,
// the unnormalised output within (gamma_N + ball radii) max_j |V(j, l)|, then
// divided by the enclosed row sum. Two GEMMs per head instead of five, for bounds
// about 10x wider (~3 N u max |V| on the output): what check_kernel tries first.
// Every bound of that path is finite and within V's column range (a row whose
// arithmetic overflowed gets that range). On the directed path a bound that
// overflows becomes infinite on its own side (+inf above, -inf below; an end that
// came out NaN, where an infinite ball met another product, is made so too).
// Either way every pair returned is a band (numbers/bands.hpp): lo <= hi, no NaN,
// for any finite inputs up to DBL_MAX.

#include <attnrank/attention/mask.hpp>
#include <attnrank/numbers/a_priori_product.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/scaling.hpp>

namespace attnrank {

/// How the two products of a head are bounded (see the header comment).
enum class AttentionProducts { directed, a_priori };

/// Bounds of softmax(s Q K^T) V for the double matrices Q (N_q x d), K (N_k x d)
/// and V (N_k x d_v), with `mask` (N_q x N_k: a row per query, a column per key) or without
/// (nullptr). Throws input_error on mismatched shapes or a non-finite entry.
BoundsMatrix certified_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                 const ScaleBounds& scale, const Mask* mask = nullptr,
                                 AttentionProducts products = AttentionProducts::directed);

}  // namespace attnrank
