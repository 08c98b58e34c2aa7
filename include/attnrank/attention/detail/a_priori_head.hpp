#pragma once
// One attention head with a priori bounded products, row block by row block, in
// one fused pass: proven bounds lo <= O <= hi on the exact O = softmax(s Q K^T) V
// for point Q, K, V (rows over the keys a mask allows) and s in [scale.lo, scale.hi].
//
// The proof, for the rows of a block:
//  * C = fl(Q K^T) in round-to-nearest; each score lies within C_ij +- r_ij,
//    r_ij = gamma_d ||q_i|| ||k_j|| + d 2^-1074 (numbers/a_priori_product.hpp), and
//    scaled within [lo_ij, hi_ij], every end rounded outward;
//  * e_ij = exp(x_ij - m_i) for any shift m_i (m_i = max_j hi_ij: no overflow):
//    bounds e_lo <= e <= e_hi as in attention/certified_softmax.hpp (exp's 4u error
//    widened to 8u, one exp for narrow intervals by exp(lo) >= exp(hi) (1 - w));
//  * O_il = (sum_j e_ij V_jl) / (sum_j e_ij): the numerator from ONE GEMM of the
//    midpoints M of the e-balls, within (gamma_N sum_j M_ij + sum_j rad_ij) max_j |V_jl|
//    + N 2^-1074 of the exact sum; the denominator within [sum e_lo, sum e_hi]; the
//    quotient of the two enclosures rounded outward;
//  * O_il is a convex combination of the V_jl, so it lies in [min_j V_jl, max_j V_jl]:
//    the bounds are clamped to that, and a row whose arithmetic overflowed (an
//    infinite or NaN bound anywhere) gets exactly that range.
// Every directed operation is written in upward rounding (a lower bound of a op b is
// -((-a) op b)), so a tile of columns needs three mode switches: upward, nearest
// for exp (its error bound holds there), upward. Nothing N x N is stored but the
// block's scores and midpoints; the rest stays in a tile of a few columns.
// Width for well-scaled inputs: about (3 N + 2 d^2 |q| |k| s) u max|V|.

#include <attnrank/attention/mask.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/scaling.hpp>

namespace attnrank::detail {

/// A head's K^T, V and the bounds every row block shares. Q, K and V must be
/// finite with consistent shapes (certified_attention checks), and outlive this.
class APrioriHead {
 public:
  APrioriHead(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V, const ScaleBounds& scale,
              const Mask* mask);

  /// Bounds of rows first .. first + count - 1 of the output (count x columns of V).
  /// Sets the rounding mode itself and restores it; call from any thread.
  BoundsMatrix rows(Eigen::Index first, Eigen::Index count) const;

 private:
  const Eigen::MatrixXd& Q_;
  Eigen::MatrixXd KT_;
  const Eigen::MatrixXd& V_;
  ScaleBounds scale_;
  const Mask* mask_;
  Eigen::VectorXd q_norms_, k_norms_;  // upper bounds on the rows' Euclidean norms
  Eigen::RowVectorXd v_abs_max_, v_min_, v_max_;  // per column of V, exact
  double gamma_d_, eta_d_, gamma_n_, eta_n_;  // a priori error constants of the two products
};

}  // namespace attnrank::detail
