#pragma once
// One attention head with a priori bounded products, row block by row block, in
// one fused pass: proven bounds lo <= O <= hi on the exact O = softmax(s Q K^T) V
// for point Q, K, V (rows over the keys a mask allows) and s in [scale.lo, scale.hi].
// Every bound is a band (lo <= hi, no NaN) within V's column range, for any finite
// inputs: a row whose arithmetic cannot be bounded gets exactly that range.
//
// The proof, for the rows of a block:
//  * C = fl(Q K^T) in round-to-nearest; each score lies within C_ij +- r_ij,
//    r_ij = gamma_d ||q_i|| ||k_j|| + d 2^-1074 (numbers/a_priori_product.hpp), and
//    scaled within [lo_ij, hi_ij], every end rounded outward;
//  * e_ij = exp(x_ij - m_i) for any shift m_i; m_i = max_j hi_ij + ln 2 bit_width(N)
//    makes every e_ij <= 1/N, so the row sums stay near or below 1 and the
//    numerator below max |V| (see "Overflow" below): bounds e_lo <= e <= e_hi as in
//    attention/certified_softmax.hpp (exp's 4u error widened to 8u, one exp for
//    narrow intervals by exp(lo) >= exp(hi) (1 - w));
//  * O_il = (sum_j e_ij V_jl) / (sum_j e_ij): the numerator from ONE GEMM of the
//    midpoints M of the e-balls, within (gamma_N sum_j M_ij + sum_j rad_ij) max_j |V_jl|
//    + N 2^-1074 of the exact sum; the denominator within [sum e_lo, sum e_hi]; the
//    quotient of the two enclosures rounded outward;
//  * O_il is a convex combination of the V_jl, so it lies in [min_j V_jl, max_j V_jl]:
//    the bounds are clamped to that.
//
// Overflow and underflow, step by step. Only the two round-to-nearest GEMMs give
// values that are not themselves bounds; everything else is a directed bound, which
// an overflow turns into a bound of the right sign (+inf above, -inf below: upward
// rounding never overflows to -inf) and which the clamp then replaces by V's range.
//  * scores: fl(q_i . k_j) can overflow to +-inf, or to NaN, while the radius stays
//    finite (a partial sum past DBL_MAX; ||q|| ||k|| itself need not be). A -inf there
//    would read as a weight of 0, which is false, so a row with any non-finite score
//    at an allowed key is not bounded: it gets V's range. A radius or a scaled end
//    that overflows (to +inf above, -inf below) is a true bound; the row sums then
//    come out infinite and the row gets V's range.
//  * exp: its arguments are <= 0 (no overflow); underflow to 0 or a subnormal is
//    covered by the absolute term 2^-1021 added to e_hi (e_lo is rounded down to 0).
//  * row sums: at most N terms each <= 1/N (1 + 8u) + 2^-1021: no overflow; a sum of
//    e_lo that underflows to 0 leaves the row unbounded (V's range), not divided by 0.
//  * numerator: |fl(M V)| <= (sum_j M_ij) max|V| (1 + gamma_N) <= max|V| (1 + (N+8) u)
//    roughly, so it overflows only for |V| within about N u of DBL_MAX; a non-finite
//    entry there (or NaN from inf - inf) gives that entry V's range. Products that
//    underflow are covered by N 2^-1074.
//  * division: a quotient of two bounds rounded outward; past DBL_MAX it is +inf
//    above (clamped) and never below the exact value.
// Every directed operation is written in upward rounding (a lower bound of a op b is
// -((-a) op b)), so a tile of columns needs three mode switches: upward, nearest
// for exp (its error bound holds there), upward. Nothing N x N is stored but the
// block's scores and midpoints; the rest stays in a tile of a few columns.
// Width for well-scaled inputs: about (3 N + 2 d^2 |q| |k| s) u max|V|.
//
// A variant's scores (softcap, ALiBi, a bias: attention/score_modifiers.hpp) are modified
// on each tile of [lo, hi] before the shift (attention/detail/score_tile.hpp, every end
// outward); the shift is then any upper bound of the modified scores (with a softcap:
// c tanh(max_j hi_ij / c) plus the largest ALiBi and bias term, tanh being increasing).
// A sink adds its term exp(sink - m_i), enclosed as the keys' are, to both row sums and
// nothing to the numerator, and O then lies between 0 and V's column range. Dropout is
// not fused (its weights are scaled past the convex combination's range).

#include <attnrank/attention/mask.hpp>
#include <attnrank/attention/score_modifiers.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/scaling.hpp>

namespace attnrank::detail {

/// A head's K^T, V and the bounds every row block shares. Q, K and V must be
/// finite with consistent shapes (certified_attention checks), and outlive this.
class APrioriHead {
 public:
  /// `modifiers`: a variant's softcap, ALiBi, bias and sink (validated by the caller; no dropout).
  APrioriHead(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V, const ScaleBounds& scale,
              const Mask* mask, const ScoreModifiers& modifiers = {});

  /// Bounds of rows first .. first + count - 1 of the output (count x columns of V).
  /// Sets the rounding mode itself and restores it; call from any thread.
  BoundsMatrix rows(Eigen::Index first, Eigen::Index count) const;

 private:
  const Eigen::MatrixXd& Q_;
  Eigen::MatrixXd KT_;
  const Eigen::MatrixXd& V_;
  ScaleBounds scale_;
  const Mask* mask_;
  ScoreModifiers modifiers_;
  Eigen::VectorXd q_norms_, k_norms_;  // upper bounds on the rows' Euclidean norms
  Eigen::RowVectorXd v_abs_max_, v_min_, v_max_;  // per column of V, exact
  double gamma_d_, eta_d_, gamma_n_, eta_n_;  // a priori error constants of the two products
  double shift_;  // ln 2 bit_width(N) >= ln N, added to each row's shift: every e_ij <= 1/N
};

/// The whole head through APrioriHead, row blocks on the library's threads: bounds of
/// softmax(s Q K^T) V with the variant's modifiers. Checks its inputs as certified_attention
/// does (input_error for bad shapes, a non-finite entry, an invalid modifier or dropout).
/// Defined in certified_attention.cpp, beside the plain head's use of the same loop.
BoundsMatrix a_priori_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                const ScaleBounds& scale, const Mask* mask, const ScoreModifiers& modifiers);

}  // namespace attnrank::detail
