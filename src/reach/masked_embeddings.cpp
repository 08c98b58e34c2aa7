// A masked head on fixed embeddings (attnrank/reach/masked_embeddings.hpp).
#include <attnrank/reach/masked_embeddings.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/reach/detail/witness_search.hpp>
#include <attnrank/reach/embeddings.hpp>

#include <cmath>
#include <utility>

namespace attnrank {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;

MatrixXd doubles_of(const Matrix<Rational>& X) {
  return X.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
}

/// A free masked witness (n x w) as head weights of width dk >= w on X: W = X^+ Q
/// (and K), zero columns added and both scaled by (dk / w)^(1/4) so that the
/// scores Q K^T / sqrt(d_k) stay those of the witness (for X of full row rank
/// X X^+ = I, and the weights make exactly the witness's scores).
std::pair<MatrixXd, MatrixXd> mapped_weights(const Witness& w, const MatrixXd& pinv, Index dk) {
  const Index width = w.Q.cols();
  const double scale = std::pow(static_cast<double>(dk) / static_cast<double>(width), 0.25);
  MatrixXd WQ = MatrixXd::Zero(pinv.rows(), dk), WK = MatrixXd::Zero(pinv.rows(), dk);
  WQ.leftCols(width) = pinv * w.Q * scale;
  WK.leftCols(width) = pinv * w.K * scale;
  return {std::move(WQ), std::move(WK)};
}

Index row_rank(const Matrix<Rational>& X) {
  return X.rows() - exact_kernel_basis(Matrix<Rational>(X.transpose())).cols();  // exact
}

}  // namespace

MaskedEmbeddingsReach reach_with_embeddings(const Matrix<Rational>& A, const Matrix<Rational>& X, Index dk,
                                            const Mask& mask, const ReachOptions& o) {
  detail::validate_embeddings_question(A, X, dk);
  validate_masked_target(A, mask, "target");
  const Index n = A.rows();
  MaskedEmbeddingsReach out;
  out.x_full_row_rank = row_rank(X) == n;
  ReachOptions free_options = o;
  free_options.witness = true;  // the start of the weights below
  out.result = reach(A, std::min(dk, n), mask, free_options);
  MaskedReachResult& r = out.result;
  const std::optional<Witness> free_witness = std::move(r.witness);
  r.witness.reset();
  r.dk = dk;
  if (!r.has_zero_entry && !out.x_full_row_rank && r.verdict != Verdict::unreachable) {
    r.verdict = Verdict::undecided;
    r.reason = "the floor is at least " + std::to_string(r.floor.lower) +
               " (every score matrix X M X^T is a completion of the free masked question), but X does not have full "
               "row rank, so its score matrices also satisfy S N = 0 and N^T S = 0 (N spanning the left null space "
               "of X), and that constrained completion is not decided";
    r.hint = "only d_k below the free masked floor's lower bound is decided for such X (unreachable); with X of full "
             "row rank the free masked answer is the answer";
  } else if (out.x_full_row_rank && dk > n && r.verdict == Verdict::reachable) {
    r.reason = "floor <= " + std::to_string(r.floor.upper) + " < n = " + std::to_string(n) + " < d_k = " +
               std::to_string(dk) + ": every score matrix of rank <= n is reachable through X";
  }
  const MatrixXd Xd = doubles_of(X);
  if (!free_witness || !Xd.allFinite()) return out;  // no double weights act on X: no witness
  const MatrixXd pinv = Xd.completeOrthogonalDecomposition().pseudoInverse();
  std::tie(out.WQ, out.WK) = mapped_weights(*free_witness, pinv, dk);
  if (!out.WQ.allFinite() || !out.WK.allFinite()) return out;
  // Each bound for its own object: the weights on the exact X, and the rounded
  // products Q = X W^Q, K = X W^K.
  const unsigned bits = std::max(o.bits, 64u);
  out.weights_error_bits = bits;
  out.weights_max_abs_error = detail::certified_embedding_error(A, X, out.WQ, out.WK, bits, &mask);
  Witness w;
  w.Q = Xd * out.WQ;
  w.K = Xd * out.WK;
  w.error_bits = bits;
  w.max_abs_error = certified_masked_witness_error(A, mask, w.Q, w.K, bits);
  r.witness = std::move(w);
  return out;
}

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, const Matrix<Rational>& X, Index dk, const Mask& mask,
                                 const ApproxOptions& o) {
  detail::validate_embeddings_question(A, X, dk);
  validate_masked_target(A, mask, "target");
  const Index n = A.rows(), rank = row_rank(X);
  // The free masked bounds at width min(d_k, rank X): their lower bound holds
  // here, and their witness is the weights' start.
  ApproxOptions lower_only = o;
  lower_only.optimise = false;
  ApproxBounds b;
  if (rank >= 1) {
    b = approx_error_bounds(A, std::min(dk, rank), mask, lower_only);
  } else {  // X = 0: every head is uniform over the allowed keys; no lower bound is attempted
    b.witness.Q = b.witness.K = MatrixXd::Zero(n, 1);
    b.lower_reason = "X = 0, no lower bound attempted";
  }
  b.n = n;
  b.dk = dk;
  const Witness start = std::move(b.witness);
  b.witness = Witness{};
  b.witness.max_abs_error = std::numeric_limits<double>::infinity();  // the weights are the witness
  b.error_upper = b.start_error = std::numeric_limits<double>::infinity();
  const MatrixXd Xd = doubles_of(X);
  if (!Xd.allFinite() || start.Q.size() == 0) return b;
  const MatrixXd pinv = Xd.completeOrthogonalDecomposition().pseudoInverse();
  auto [WQ, WK] = mapped_weights(start, pinv, dk);
  if (!WQ.allFinite() || !WK.allFinite()) return b;
  const unsigned bits = std::max(o.bits, 64u);
  double error = detail::certified_embedding_error(A, X, WQ, WK, bits, &mask);
  b.start_error = error;
  if (o.optimise) {
    const Index m = X.cols();
    Eigen::VectorXd x(2 * m * dk);
    x << WQ.reshaped(), WK.reshaped();
    const Eigen::VectorXd best = detail::search_witness(approx_normalized_target(A), dk, &Xd, {x}, o, &mask);
    if (best.size()) {
      const MatrixXd SQ = Eigen::Map<const MatrixXd>(best.data(), m, dk), SK = Eigen::Map<const MatrixXd>(best.data() + m * dk, m, dk);
      const double searched = detail::certified_embedding_error(A, X, SQ, SK, bits, &mask);
      if (searched < error) {
        error = searched;
        WQ = SQ;
        WK = SK;
      }
    }
  }
  b.WQ = std::move(WQ);
  b.WK = std::move(WK);
  b.weights_error_bits = bits;
  b.error_upper = error;
  return b;
}

}  // namespace attnrank
