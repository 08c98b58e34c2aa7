// A masked head near a target, and its certified error (attnrank/reach/masked.hpp).
//
// Alternating least squares on S = Q K^T + c 1^T over the allowed set: with K
// fixed, each row's (q_i, c_i) is a least-squares fit of L_i on its allowed
// keys; with Q and c fixed, each key's k_j a fit of L_ij - c_i on the rows
// allowing it. Each half-step cannot increase the sum of squared residuals; a
// small ridge keeps rows with fewer allowed keys than unknowns (causal row 1)
// determined. The best iterate by max |residual| is kept. Uncertified: only
// its softmax distance to the target is proven, by certified_masked_witness_error.
#include <attnrank/reach/masked.hpp>

#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/softmax.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>

#include <cmath>
#include <limits>

namespace attnrank {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

/// Solves (M^T M + ridge I) x = M^T y.
VectorXd ridge_solve(const MatrixXd& M, const VectorXd& y, double ridge) {
  MatrixXd G = M.transpose() * M;
  G.diagonal().array() += ridge;
  return G.ldlt().solve(M.transpose() * y);
}

struct Residual {
  double max = 0, squares = 0;
};

Residual residual(const MatrixXd& L, const Mask& mask, const MatrixXd& Q, const MatrixXd& K, const VectorXd& c) {
  const MatrixXd S = Q * K.transpose();
  Residual r;
  for (Index j = 0; j < L.cols(); ++j)
    for (Index i = 0; i < L.rows(); ++i)
      if (mask.allows(i, j)) {
        const double e = std::abs(S(i, j) + c(i) - L(i, j));
        r.max = std::max(r.max, e);
        r.squares += e * e;
      }
  return r;
}

/// For a nested mask: completes L on the masked positions, column by column in
/// the staircase's order, with the minimal-rank fill of a 2 x 2 block pattern.
/// Column p is known on a suffix of the rows (those allowing it, and the ones
/// row); with A the completed columns on the other rows, B on the suffix and C
/// column p there, X = A B^+ C gives rank [[A, X]; [B, C]] = rank [A; B] +
/// rank [B C] - rank B, the least possible; summed over the columns this is the
/// staircase formula, so the completion [T; 1^T] has the minimal rank
/// (numerically: B^+ C by a rank-revealing QR).
MatrixXd staircase_completion(const MatrixXd& L, const Staircase& st) {
  const Index n = L.rows();
  MatrixXd P(n + 1, n);  // rows in the staircase's order, then the ones row; columns likewise
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) P(i, j) = L(st.rows[static_cast<std::size_t>(i)], st.cols[static_cast<std::size_t>(j)]);
  P.row(n).setOnes();
  const double tolerance = 1e-11;
  for (Index p = 1; p < n; ++p) {
    Index known = 0;  // rows 0 .. known-1 do not allow column p; the widths are non-decreasing
    while (known < n && st.width[static_cast<std::size_t>(known)] <= p) ++known;
    if (known == 0) continue;
    const MatrixXd B = P.block(known, 0, n + 1 - known, p);
    Eigen::ColPivHouseholderQR<MatrixXd> qr(B);
    qr.setThreshold(tolerance);
    const VectorXd y = qr.solve(P.col(p).tail(n + 1 - known));
    P.col(p).head(known) = P.block(0, 0, known, p) * y;
  }
  MatrixXd T(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) T(st.rows[static_cast<std::size_t>(i)], st.cols[static_cast<std::size_t>(j)]) = P(i, j);
  return T;
}

}  // namespace

namespace {

/// Q, K (scores Q K^T + c 1^T, unscaled) from the truncated SVD of a completion
/// T of L, refined by alternating least squares over the allowed set.
std::pair<MatrixXd, MatrixXd> fit_from(const MatrixXd& T, const Mask& mask, Index dk, int sweeps) {
  const Index n = T.rows();
  const MatrixXd& L = T;  // only its allowed entries are fitted
  VectorXd c = T.rowwise().mean();
  const Eigen::BDCSVD<MatrixXd> svd(T.colwise() - c, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const VectorXd root = svd.singularValues().head(dk).cwiseSqrt();
  MatrixXd Q = svd.matrixU().leftCols(dk) * root.asDiagonal();
  MatrixXd K = svd.matrixV().leftCols(dk) * root.asDiagonal();
  const double scale = std::max(1.0, L.cwiseAbs().maxCoeff());
  const double ridge = 1e-13 * scale * scale;
  // Flops of one sweep (the Gram matrices); beyond a budget the start is the fit.
  const double sweep_cost = 2.0 * static_cast<double>(mask.allowed_count()) * static_cast<double>((dk + 1) * (dk + 1));
  const int affordable = static_cast<int>(std::min<double>(sweeps, 2e9 / std::max(sweep_cost, 1.0)));
  MatrixXd bestQ = Q, bestK = K;
  const Residual start = residual(L, mask, Q, K, c);
  double best = start.max, squares = start.squares;
  int idle = 0;
  for (int sweep = 0; sweep < affordable && best > 1e-15 * scale; ++sweep) {
    MatrixXd Kt(n, dk + 1);
    Kt << K, VectorXd::Ones(n);
    for (Index i = 0; i < n; ++i) {
      std::vector<Index> keys;
      for (Index j = 0; j < n; ++j)
        if (mask.allows(i, j)) keys.push_back(j);
      const VectorXd x = ridge_solve(Kt(keys, Eigen::all), L(i, keys).transpose(), ridge);
      Q.row(i) = x.head(dk).transpose();
      c(i) = x(dk);
    }
    for (Index j = 0; j < n; ++j) {
      std::vector<Index> queries;
      for (Index i = 0; i < n; ++i)
        if (mask.allows(i, j)) queries.push_back(i);
      if (queries.empty()) continue;  // a key nobody attends to: any k_j serves
      const VectorXd y = L(queries, j) - c(queries);
      K.row(j) = ridge_solve(Q(queries, Eigen::all), y, ridge).transpose();
    }
    const Residual now = residual(L, mask, Q, K, c);
    if (now.max < best) {
      best = now.max;
      bestQ = Q;
      bestK = K;
    }
    // The sum of squares falls every sweep (the max need not): stop after a few
    // sweeps that bring it no real progress.
    idle = now.squares < (1 - 1e-6) * squares ? 0 : idle + 1;
    squares = now.squares;
    if (idle >= 5) break;
  }
  return {bestQ, bestK};
}

}  // namespace

Witness approx_masked_witness(const Matrix<Rational>& A, const Mask& mask, Index dk, int sweeps) {
  const Index n = A.rows();
  mask.require_size(n, "the target");
  require_head_width(dk, n);
  // log A on the allowed set (accurate even for entries beyond the double range),
  // each row's masked positions filled with the row's mean.
  MatrixXd L = MatrixXd::Zero(n, n);
  for (Index i = 0; i < n; ++i) {
    double mean = 0;
    for (Index j = 0; j < n; ++j)
      if (mask.allows(i, j)) {
        L(i, j) = approx_log(A(i, j));
        mean += L(i, j);
      }
    mean /= static_cast<double>(mask.allowed_in_row(i));
    for (Index j = 0; j < n; ++j)
      if (!mask.allows(i, j)) L(i, j) = mean;
  }
  // Two starts: the row means, and for a nested mask the minimal-rank
  // completion (exact for a reachable target, up to rounding; for an
  // unreachable one the row means often fit a narrow head better). The one whose
  // masked softmax lies nearer the target (in doubles) is the witness.
  std::vector<std::pair<MatrixXd, MatrixXd>> fits{fit_from(L, mask, dk, sweeps)};
  if (const std::optional<Staircase> st = staircase_of(mask)) fits.push_back(fit_from(staircase_completion(L, *st), mask, dk, sweeps));
  // Scores Q K^T / sqrt(d_k): each factor takes d_k^(1/4); c is a row constant,
  // which softmax ignores.
  const double quarter = std::pow(static_cast<double>(dk), 0.25);
  const MatrixXd target = approx_normalized_target(A);
  Witness w;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [Q, K] : fits) {
    const MatrixXd P = softmax_rows<double>(MatrixXd(Q * K.transpose()), mask);
    const double distance = (P - target).cwiseAbs().maxCoeff();
    if (w.Q.size() == 0 || distance < best) {
      best = distance;
      w.Q = Q * quarter;
      w.K = K * quarter;
    }
  }
  return w;
}

double certified_masked_witness_error(const Matrix<Rational>& A, const Mask& mask, const MatrixXd& Q,
                                      const MatrixXd& K) {
  if (Q.rows() != A.rows() || K.rows() != A.rows() || Q.cols() != K.cols() || Q.cols() < 1)
    throw input_error("witness: Q and K must both be " + std::to_string(A.rows()) + " x d_k");
  if (!Q.allFinite() || !K.allFinite()) return std::numeric_limits<double>::infinity();
  const BoundsMatrix P = certified_softmax_bounds(certified_scaled_scores(Q, K), mask);
  return max_abs_difference_upper(P, normalized_target_bounds(A));
}

double certified_masked_witness_error(const Matrix<Rational>& A, const Mask& mask, const MatrixXd& Q, const MatrixXd& K,
                                      unsigned bits) {
  if (Q.rows() != A.rows() || K.rows() != A.rows() || Q.cols() != K.cols() || Q.cols() < 1)
    throw input_error("witness: Q and K must both be " + std::to_string(A.rows()) + " x d_k");
  mask.require_size(A.rows(), "witness");
  if (!Q.allFinite() || !K.allFinite()) return std::numeric_limits<double>::infinity();
  const PrecisionScope scope(std::max(bits, 64u));
  return detail::softmax_distance(A, detail::enclosed_witness_scores(Q, K), &mask);
}

MatrixXd approx_masked_witness_pattern(const Witness& w, const Mask& mask) {
  const MatrixXd S = w.Q * w.K.transpose() / std::sqrt(static_cast<double>(w.Q.cols()));
  return softmax_rows<double>(S, mask);
}

}  // namespace attnrank
