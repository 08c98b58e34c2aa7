#pragma once
// Reachability with fixed embeddings X (n x d_model): the scores a head can make
// are X M X^T / 1 with M = W^Q W^K^T / sqrt(d_k) of rank <= d_k.
//
// softmax(X M X^T) = A iff X M X^T = L + c 1^T (L = log A) for some c. Let the
// columns of N span the left null space of X (N^T X = 0; exact, X is rational).
// S = L + c 1^T is of the form X M X^T iff S N = 0 and N^T S = 0, and then
// M = X^+ S X^+T has rank(M) = rank(S). Two cases:
//  * 1^T N != 0 (the ones vector is not in col X): S N = 0 fixes c = -L n_j / s_j
//    for a column n_j with s_j = 1^T n_j != 0, so S is determined; reachable iff
//    the constraints hold and rank(S) <= d_k.
//  * 1^T N = 0: the constraints read L N = 0 and N^T L C = 0, and when they hold
//    c = -L 1 / n is allowed, so the question is the free one: rank(L C) <= d_k.
// When X has full row rank, N is empty and the two questions coincide.
// A constraint is proven violated when its interval excludes 0 (then no head on
// these embeddings produces A, at any width), and proven satisfied only exactly:
// for a rational target, log A = sum_t log(q_t) E_t over a coprime base, and a
// linear constraint with rational coefficients holds iff it holds for every E_t.

#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/reach/free.hpp>

#include <Eigen/QR>
#include <Eigen/SVD>

#include <string>

namespace attnrank {

struct EmbeddingsReach {
  ReachResult result;                  ///< verdict, bounds on rank(S), reason, hint
  bool x_full_row_rank = false;
  /// X has full row rank or the target has a zero entry: the free question
  /// decides (result is reach's), and the certificate is a free one.
  bool free_question_decides = false;
  std::string constraints = "none";    ///< "none", "hold (exact)", "violated (certified)", "unknown"
  /// The witness: d_model x d_k head weights, and a certified bound on
  /// max |softmax((X W^Q)(X W^K)^T / sqrt(d_k)) - Â| computed for exactly these
  /// doubles and the exact X, in MPFI at weights_error_bits. (result.witness holds
  /// Q = X W^Q and K = X W^K rounded to doubles, with their own certified bound.)
  /// Empty, with an infinite bound, when X is beyond the double range.
  Eigen::MatrixXd WQ, WK;
  double weights_max_abs_error = INFINITY;
  unsigned weights_error_bits = 64;
};

/// Decides whether a head of width dk on the embeddings X produces A.
EmbeddingsReach reach_with_embeddings(const Matrix<Rational>& A, const Matrix<Rational>& X, Eigen::Index dk,
                                      const ReachOptions& options = {});

namespace detail {
/// input_error unless A is a valid target, X is n x d_model (d_model >= 1) and
/// 1 <= d_k <= d_model.
void validate_embeddings_question(const Matrix<Rational>& A, const Matrix<Rational>& X, Eigen::Index dk);

/// Certified max |softmax((X WQ)(X WK)^T / sqrt(dk)) - Â|, all in MPFI at `bits`;
/// with `mask` the softmax over the allowed keys (0 elsewhere).
double certified_embedding_error(const Matrix<Rational>& A, const Matrix<Rational>& X, const Eigen::MatrixXd& WQ,
                                 const Eigen::MatrixXd& WK, unsigned bits, const Mask* mask = nullptr);
}  // namespace detail

/// The score matrix a head on X must make, and whether X can make it: for N
/// spanning the left null space of X, S = L + c 1^T with c fixed by S N = 0 when
/// 1^T N != 0, else S = L C; the constraints S N = 0, N^T S = 0 (or L N = 0,
/// N^T L C = 0) are certified violated, or exactly satisfied over the coprime
/// base, or neither. Works at the current precision.
struct AdmissibleScores {
  Matrix<Interval> S;
  std::vector<Integer> bases;
  std::vector<Matrix<Rational>> parts;  ///< S = sum_t log(bases[t]) parts[t], exactly
  bool violated = false, hold_exact = false;
};

AdmissibleScores admissible_scores(const Matrix<Rational>& A, const Matrix<Rational>& N, const DecompositionLimits& limits);

}  // namespace attnrank
