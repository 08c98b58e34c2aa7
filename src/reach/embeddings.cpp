// The fixed-embeddings decision of attnrank/reach/embeddings.hpp.
#include <attnrank/reach/embeddings.hpp>

#include <attnrank/linalg/detail/balanced_factors.hpp>
#include <attnrank/linalg/detail/dense_decompositions.hpp>
#include <attnrank/linalg/product.hpp>

#include <tuple>

namespace attnrank {

namespace detail {

/// Certified max |softmax((X WQ)(X WK)^T / sqrt(dk)) - Â|, all in MPFI.
double certified_embedding_error(const Matrix<Rational>& A, const Matrix<Rational>& X, const Eigen::MatrixXd& WQ,
                                        const Eigen::MatrixXd& WK, unsigned bits, const Mask* mask) {
  const PrecisionScope scope(std::max(bits, 64u));
  const Matrix<Interval> Xi = from_rational<Interval>(X);
  const Matrix<Interval> Q = multiply(Xi, Matrix<Interval>(WQ.cast<Interval>()));
  const Matrix<Interval> K = multiply(Xi, Matrix<Interval>(WK.cast<Interval>()));
  Matrix<Interval> S = multiply(Q, Matrix<Interval>(K.transpose()));
  scale_by_root_dk(S, WQ.cols());
  return softmax_distance(A, S, mask);
}

/// Does every entry of the rational-coefficient constraint F(E) = 0 vanish for
/// every exponent matrix? `apply` maps an exponent matrix to the constraint matrix.
template <class Apply>
bool holds_for_every_exponent(const LogDecomposition& d, Apply apply) {
  for (const Matrix<Integer>& E : d.exponents) {
    const Matrix<Rational> F = apply(Matrix<Rational>(E.unaryExpr([](const Integer& z) { return Rational(z); })));
    for (Eigen::Index i = 0; i < F.rows(); ++i)
      for (Eigen::Index j = 0; j < F.cols(); ++j)
        if (F(i, j) != 0) return false;
  }
  return true;
}

/// true when some entry of the interval matrix certainly differs from 0.
bool certainly_nonzero(const Matrix<Interval>& F) {
  for (Eigen::Index i = 0; i < F.rows(); ++i)
    for (Eigen::Index j = 0; j < F.cols(); ++j)
      if (lower_bound(F(i, j)) > 0 || upper_bound(F(i, j)) < 0) return true;
  return false;
}

}  // namespace detail

AdmissibleScores admissible_scores(const Matrix<Rational>& A, const Matrix<Rational>& N, const DecompositionLimits& limits) {
  using Eigen::Index;
  const Index n = A.rows();
  AdmissibleScores a;
  const Matrix<Interval> L = A.unaryExpr([](const Rational& q) { return Interval(log(scalar_traits<Interval>::from_rational(q))); });
  const Matrix<Interval> Ni = from_rational<Interval>(N);
  const Matrix<Rational> ones_N = Matrix<Rational>::Ones(1, n) * N;
  Index j0 = -1;
  for (Index j = 0; j < N.cols(); ++j)
    if (ones_N(0, j) != 0) j0 = j;
  const std::optional<LogDecomposition> d = decompose_log(A, limits);
  if (d) a.bases = d->bases;
  const Matrix<Rational> C = Matrix<Rational>::Identity(n, n) - Matrix<Rational>::Constant(n, n, Rational(1, n));
  const auto rational = [](const Matrix<Integer>& E) { return Matrix<Rational>(E.unaryExpr([](const Integer& z) { return Rational(z); })); };
  if (j0 >= 0) {
    const Matrix<Rational> nj = N.col(j0) / ones_N(0, j0);  // c = -L nj
    const Matrix<Interval> c = -multiply(L, from_rational<Interval>(nj));
    a.S = L + c * Matrix<Interval>::Ones(1, n);
    a.violated = detail::certainly_nonzero(multiply(a.S, Ni)) ||
                 detail::certainly_nonzero(multiply(Matrix<Interval>(Ni.transpose()), a.S));
    if (d) {
      for (const Matrix<Integer>& E : d->exponents) {
        const Matrix<Rational> Er = rational(E);
        a.parts.push_back(Matrix<Rational>(Er - Matrix<Rational>(Er * nj) * Matrix<Rational>::Ones(1, n)));
      }
      a.hold_exact = detail::holds_for_every_exponent(*d, [&](const Matrix<Rational>& E) {
        const Matrix<Rational> St = E - Matrix<Rational>(E * nj) * Matrix<Rational>::Ones(1, n);
        Matrix<Rational> both = Matrix<Rational>::Zero(St.rows() + N.cols(), N.cols() + St.cols());
        both.topLeftCorner(St.rows(), N.cols()) = St * N;
        both.bottomRightCorner(N.cols(), St.cols()) = N.transpose() * St;
        return both;
      });
    }
  } else {
    a.S = multiply(L, from_rational<Interval>(C));
    a.violated = detail::certainly_nonzero(multiply(L, Ni)) ||
                 detail::certainly_nonzero(multiply(Matrix<Interval>(Ni.transpose()), a.S));
    if (d) {
      for (const Matrix<Integer>& E : d->exponents) a.parts.push_back(Matrix<Rational>(rational(E) * C));
      a.hold_exact = detail::holds_for_every_exponent(*d, [&](const Matrix<Rational>& E) {
        Matrix<Rational> both = Matrix<Rational>::Zero(n + N.cols(), N.cols() + n);
        both.topLeftCorner(n, N.cols()) = E * N;
        both.bottomRightCorner(N.cols(), n) = N.transpose() * E * C;
        return both;
      });
    }
  }
  return a;
}

namespace detail {
void validate_embeddings_question(const Matrix<Rational>& A, const Matrix<Rational>& X, Eigen::Index dk) {
  validate_target(A, "target");
  const Eigen::Index n = A.rows();
  if (X.rows() != n)
    throw input_error("the embeddings X have " + std::to_string(X.rows()) + " rows, but the target has n = " +
                      std::to_string(n) + " tokens (X must be n x d_model)", "embeddings X");
  if (X.cols() < 1) throw input_error("the embeddings X have no columns", "embeddings X");
  if (dk < 1 || dk > X.cols())
    throw input_error("d_k = " + std::to_string(dk) + " is out of range: with d_model = " + std::to_string(X.cols()) +
                      " a head has 1 <= d_k <= d_model");
}
}  // namespace detail

EmbeddingsReach reach_with_embeddings(const Matrix<Rational>& A, const Matrix<Rational>& X, Eigen::Index dk,
                                             const ReachOptions& o) {
  using Eigen::Index;
  detail::validate_embeddings_question(A, X, dk);
  const Index n = A.rows();
  EmbeddingsReach out;
  const Matrix<Rational> N = exact_kernel_basis(Matrix<Rational>(X.transpose()));  // n x k, N^T X = 0
  const Index free_dk = std::min(dk, n);
  Eigen::MatrixXd witness_scores;  // the score matrix the witness aims at (doubles)
  if (N.cols() == 0 || !zero_entries(A).empty()) {
    // Full row rank: every n x n matrix is X M X^T, so the free question decides.
    // A zero entry: unreachable whatever the scores.
    out.x_full_row_rank = N.cols() == 0;
    out.free_question_decides = true;
    ReachOptions free_options = o;
    free_options.witness = false;  // the witness below acts through X
    out.result = reach(A, free_dk, free_options);
    out.result.dk = dk;
    if (dk > n && out.result.verdict == Verdict::reachable)
      out.result.reason = "floor <= " + std::to_string(out.result.floor.upper) + " < n = " + std::to_string(n) +
                          " < d_k = " + std::to_string(dk) + ": every score matrix of rank <= n is reachable through X";
  } else {
    const PrecisionScope scope(std::max(o.bits, 128u));
    ReachResult& r = out.result;
    r.n = n;
    r.dk = dk;
    const AdmissibleScores a = admissible_scores(A, N, o.limits);
    const Matrix<Interval>& S = a.S;
    const bool violated = a.violated, hold_exact = a.hold_exact;
    const std::vector<Matrix<Rational>>& S_parts = a.parts;
    r.floor.bases = a.bases;
    out.constraints = violated ? "violated (certified)" : hold_exact ? "hold (exact)" : "unknown";
    witness_scores = S.unaryExpr([](const Interval& x) { return approx_midpoint(x); });
    // Bounds on rank(S): certified lower; exact upper from the common kernel of the parts.
    const CertifiedRank rb = certified_rank(S);
    r.floor.lower = rb.lower;
    r.floor.minor_rows = rb.pivot_rows;
    r.floor.minor_cols = rb.pivot_cols;
    r.floor.minor_residual = rb.residual_bound;
    r.floor.lower_bits = rb.bits;
    r.floor.upper = n;
    r.floor.upper_reason = "rank(S) <= n";
    if (!S_parts.empty()) {
      Matrix<Rational> stacked(static_cast<Index>(S_parts.size()) * n, n);
      for (std::size_t t = 0; t < S_parts.size(); ++t) stacked.middleRows(static_cast<Index>(t) * n, n) = S_parts[t];
      const ExactRank er = exact_rank(stacked);
      if (er.rank < r.floor.upper) {
        r.floor.upper = er.rank;
        r.floor.kernel = er.kernel;
        r.floor.upper_reason = "exact: rational kernel common to every exponent part of S";
      }
    }
    if (violated) {
      r.verdict = Verdict::unreachable;
      r.reason = "no score matrix X M X^T equals log A + c 1^T for any c: a linear constraint is violated by a certified margin";
    } else if (dk < r.floor.lower) {
      r.verdict = Verdict::unreachable;
      r.reason = "the only admissible score matrix S has rank >= " + std::to_string(r.floor.lower) + " > d_k";
    } else if (hold_exact && r.floor.upper <= dk) {
      r.verdict = Verdict::reachable;
      r.reason = "the constraints hold exactly and rank(S) <= " + std::to_string(r.floor.upper) + " <= d_k";
    } else {
      r.verdict = Verdict::undecided;
      r.reason = "constraints " + out.constraints + ", " + std::to_string(r.floor.lower) + " <= rank(S) <= " +
                 std::to_string(r.floor.upper);
      r.hint = hold_exact ? "raise the precision (bits) to raise the lower bound" : "exact constraints need rational structure in log A";
    }
  }
  // Witness weights: M = X^+ S X^+T (S from the free centering when undecided),
  // truncated to rank dk.
  const Eigen::MatrixXd Xd = X.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
  out.result.witness.reset();
  if (!Xd.allFinite()) return out;  // no double weights can act on X: no witness
  if (witness_scores.size() == 0) witness_scores = approx_centered_log(A);
  const Eigen::MatrixXd Xp = Xd.completeOrthogonalDecomposition().pseudoInverse();
  const Eigen::MatrixXd M = Xp * witness_scores * Xp.transpose() * std::sqrt(static_cast<double>(dk));
  const Index k = std::min<Index>(dk, M.rows());
  if (!M.allFinite()) return out;
  const TruncatedSvd svd = approx_truncated_svd(M, k);
  std::tie(out.WQ, out.WK) = detail::balanced_factors(svd.U, svd.s, svd.V, dk, 1.0);
  if (!out.WQ.allFinite() || !out.WK.allFinite()) return out;
  // Each bound is computed for the object it is stated for: the weights on the
  // exact X, and the rounded products Q, K that the free certificate carries.
  const unsigned error_bits = std::max(o.bits, 64u);
  out.weights_error_bits = error_bits;
  out.weights_max_abs_error = detail::certified_embedding_error(A, X, out.WQ, out.WK, error_bits);
  Witness w;
  w.Q = Xd * out.WQ;
  w.K = Xd * out.WK;
  w.error_bits = error_bits;
  w.max_abs_error = certified_witness_error(A, w.Q, w.K, error_bits);
  out.result.witness = std::move(w);
  return out;
}

}  // namespace attnrank
