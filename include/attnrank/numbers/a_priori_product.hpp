#pragma once
// Rigorous matrix products on doubles from ONE product in round-to-nearest and
// an a priori bound on its rounding error, instead of a directed pair
// (numbers/directed_rounding.hpp): half the GEMMs or fewer, for wider bounds.
//
// Why this is sound: computed in IEEE double with round-to-nearest by any
// order of multiplications, additions and fused multiply-adds (Eigen's blocked
// GEMM included), a dot product of length k satisfies
//     |fl(x . y) - x . y| <= gamma_k sum_l |x_l y_l| + k 2^-1074,
// gamma_k = k u / (1 - k u), u = 2^-53 (Higham, Accuracy and Stability of
// Numerical Algorithms, 2nd ed., section 3.1, for any summation tree; the
// second term covers underflow: each product or FMA may lose 2^-1075
// absolutely, additions of subnormals are exact). The sum is then bounded
// without a second product:
//  * by Cauchy-Schwarz, sum_l |x_l y_l| <= ||x||_2 ||y||_2 (a_priori_product_bounds);
//  * for a weighted sum, sum_j |p_j v_j| <= (sum_j |p_j|) max_j |v_j|
//    (a_priori_interval_product_bounds, where P is itself an interval matrix).
// Every bound is computed with upward rounding; an overflow gives an infinite
// bound on its own side (+inf above, -inf below), never an inverted one: where the
// nearest product itself overflowed (+-inf or NaN, possible while the radius is
// finite, e.g. two terms of 1e308), it is no midpoint, and both ends there are
// infinite. NaN arises only from NaN inputs. Needs the same as the
// directed products: no -ffast-math, no external BLAS, -frounding-math.

#include <attnrank/numbers/directed_rounding.hpp>

namespace attnrank {

/// gamma_k = k u / (1 - k u), rounded up; +inf when k u >= 1/2: a length-k dot
/// product in round-to-nearest errs by at most gamma_k sum_l |x_l y_l| plus
/// a_priori_underflow(k).
double a_priori_gamma(Eigen::Index k);
/// k 2^-1074 rounded up, as a normal number (no subnormal operand where it is added).
double a_priori_underflow(Eigen::Index k);

/// Upper bounds on the Euclidean norms of the rows of M (+inf on overflow).
Eigen::VectorXd row_norms_upper(const Eigen::MatrixXd& M);

/// Bounds lo <= A B <= hi for point A (m x k) and B (k x n), given upper bounds
/// on the norms of A's rows and of B's columns (row_norms_upper of A and of B^T).
/// One GEMM in round-to-nearest on the calling thread, plus O(m n) bound arithmetic.
BoundsMatrix a_priori_product_bounds(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B,
                                     const Eigen::VectorXd& a_row_norms, const Eigen::VectorXd& b_column_norms);

/// The two halves of a_priori_product_bounds, for callers that bound a computed
/// product in pieces: C = fl(A B) in round-to-nearest (whatever the caller's mode),
/// and the bounds of the rows first .. first + rows - 1 of A B around those rows of
/// C, for the inner dimension k. The bounds hold only for a C from nearest_product.
Eigen::MatrixXd nearest_product(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B);
BoundsMatrix a_priori_bounds_around(const Eigen::MatrixXd& C, Eigen::Index first, Eigen::Index rows, Eigen::Index k,
                                    const Eigen::VectorXd& a_row_norms, const Eigen::VectorXd& b_column_norms);

/// An upper bound on ||I - R M||_inf (max row sum of |I - R M|) for square R and M
/// of one size k, from ONE GEMM C = fl(R M) in round-to-nearest:
/// |(I - R M)_ij| <= |delta_ij - C_ij| + gamma_k ||r_i|| ||m^j|| + a_priori_underflow(k),
/// summed over j in upward rounding without storing the radius (its row sum is
/// gamma_k ||r_i|| sum_j ||m^j||). +inf when anything overflows or is NaN.
/// What a nonsingularity proof needs (< 1) at half the GEMMs of a directed pair.
double a_priori_residual_norm_upper(const Eigen::MatrixXd& R, const Eigen::MatrixXd& M);

/// Bounds lo <= X V <= hi for every X in the interval matrix [P.lo, P.hi]
/// (m x k) and point V (k x n), given v_column_max(l) >= max_j |V(j, l)|:
/// one GEMM of P's midpoint in round-to-nearest; the radius is
/// (gamma_k sum_j |mid_ij| + sum_j rad_ij) v_column_max(l) + k 2^-1074.
/// Tight when P's rows sum to about 1 and V's entries are of one size (attention weights and values).
BoundsMatrix a_priori_interval_product_bounds(const BoundsMatrix& P, const Eigen::MatrixXd& V,
                                              const Eigen::RowVectorXd& v_column_max);

}  // namespace attnrank
