#pragma once
// Rump's preconditioning twice over, for matrices too ill-conditioned for one
// double preconditioner (condition numbers up to about 1e28 instead of 1e15).
//
// Guarantee: when `precondition_two_stage(A)` returns a value, then for every real
// matrix X in the double-double ball A,
//     Y = L2i Q (Li P X Ui) U2i   lies within the returned bounds of I - Y, and ||I - Y||_inf <= eps,
// where P, Q are permutations, Li, L2i unit lower triangular and Ui, U2i upper
// triangular doubles. If eps < 1 (false for NaN), X is nonsingular and
//     det X = sign det(Y) / (prod_k Ui_kk prod_k U2i_kk).
// Stage 1: double LU of hi(A) and triangular inverses; Z = Li P X Ui is enclosed
// to double-double accuracy (linalg/accurate_product.hpp), which is what one
// double stage lacks: Z is then only as ill-conditioned as about cond(A) u n.
// Stage 2: the same preconditioning of Z's midpoint, with directed-rounding GEMMs
// (numbers/directed_rounding.hpp). Nothing is returned when a factor is not finite
// or a product cannot be enclosed.

#include <attnrank/linalg/accurate_product.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <optional>

namespace attnrank::detail {

/// P M ~ L U by partial-pivot LU, with Li ~ L^-1 (unit lower triangular, exactly)
/// and Ui ~ U^-1 (upper triangular, exactly); nothing when an inverse is not
/// finite or U^-1 has a zero on its diagonal.
struct TriangularPreconditioner {
  Eigen::PermutationMatrix<Eigen::Dynamic, Eigen::Dynamic> P;
  int sign = 1;  ///< det P
  Eigen::MatrixXd Li, Ui;
  /// min |U_kk| / max |U_kk| before any zero pivot was moved: below u, one
  /// double stage cannot succeed (its rounding is about u / pivot_ratio).
  double pivot_ratio = 1;
};
std::optional<TriangularPreconditioner> triangular_preconditioner(const Eigen::MatrixXd& M);

struct TwoStagePreconditioned {
  BoundsMatrix identity_minus_y;  ///< bounds of I - Y
  double eps = 0;                 ///< proven upper bound of ||I - Y||_inf (NaN: nothing proven)
  int sign = 1;                   ///< det P det Q
  Eigen::VectorXd diagonal;       ///< the 2n diagonal entries of Ui and U2i
};
/// `first`: factors for stage 1 already computed (of A.hi, or of any matrix close
/// to it: they only need to be good, not exact); computed here when null.
std::optional<TwoStagePreconditioned> precondition_two_stage(const DoubleDoubleBall& A,
                                                             const TriangularPreconditioner* first = nullptr);

}  // namespace attnrank::detail
