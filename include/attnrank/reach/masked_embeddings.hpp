#pragma once
// A masked head on fixed embeddings X (n x d_model): scores X M X^T with
// M = W^Q W^K^T / sqrt(d_k) of rank <= d_k, masked scores -inf.
//
// A head produces A iff some S = X M X^T has S = L + c 1^T on the allowed set
// Omega (L = log A there). Two facts decide what is proven here:
//  * every such S is one of the free masked question's completions, so the free
//    masked floor's lower bound holds with X too: d_k below it is unreachable;
//  * when X has full row rank every n x n matrix is X M X^T (M = X^+ S X^+T,
//    rank M = rank S), so the free masked answer is the answer, for d_k up to
//    d_model (d_k > n: reachable, the floor is at most n - 1).
// Otherwise S must also satisfy S N = 0 and N^T S = 0 (N spanning the left null
// space of X), which couples the masked entries of S with the allowed ones; that
// constrained minimal-rank completion is not decided here, so from the lower
// bound up the verdict is `undecided`, and the reason says so.
//
// The witness is head weights W^Q, W^K (d_model x d_k): the free masked
// witness mapped through X's pseudo-inverse, its error certified for exactly
// those doubles on the exact X (MPFI, masked softmax). approx_error_bounds adds
// an L-BFGS search over the weights on the masked softmax.

#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/masked.hpp>

#include <limits>

namespace attnrank {

struct MaskedEmbeddingsReach {
  /// The verdict and the free masked floor bounds (floor.* and the blocks are
  /// the free masked question's; with X of full row rank they decide).
  /// result.witness holds Q = X W^Q and K = X W^K rounded to doubles, with
  /// their own certified masked error.
  MaskedReachResult result;
  bool x_full_row_rank = false;
  /// Head weights (d_model x d_k) and the certified masked error of exactly
  /// these doubles on the exact X, in MPFI at weights_error_bits. Empty, with
  /// an infinite bound, when X is beyond the double range.
  Eigen::MatrixXd WQ, WK;
  double weights_max_abs_error = std::numeric_limits<double>::infinity();
  unsigned weights_error_bits = 64;
};

/// Decides whether a masked head of width dk on the embeddings X produces A
/// (see the top of this header). input_error on a bad target, X, mask or dk
/// (1 <= dk <= d_model).
MaskedEmbeddingsReach reach_with_embeddings(const Matrix<Rational>& A, const Matrix<Rational>& X, Eigen::Index dk,
                                            const Mask& mask, const ReachOptions& options = {});

/// error_lower <= E*_{X, Omega}(A, d_k) <= error_upper: the lower bound is the
/// free masked one at width min(d_k, rank X) (X M X^T is one score matrix of
/// that rank); the upper bound the certified error of head weights on X, the
/// better of the mapped free masked witness and an L-BFGS search over the
/// weights from it (with options.optimise). WQ, WK and weights_error_bits hold
/// the weights; witness is empty (its max_abs_error infinite), as for the
/// unmasked embeddings question.
ApproxBounds approx_error_bounds(const Matrix<Rational>& A, const Matrix<Rational>& X, Eigen::Index dk,
                                 const Mask& mask, const ApproxOptions& options = {});

}  // namespace attnrank
