// The masked witness's alternating least squares (attnrank/reach/detail/masked_fit.hpp).
#include <attnrank/reach/detail/masked_fit.hpp>

#include <Eigen/Cholesky>

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnrank::detail {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

AllowedSums::AllowedSums(const Mask& mask) : n_(mask.size()), staircase_(staircase_of(mask)) {
  if (staircase_) {
    // Row position p allows the keys cols[0 .. width[p]); the widths do not
    // decrease, so key q's rows are the positions from the first with width > q.
    first_row_.assign(static_cast<std::size_t>(n_), n_);
    Index p = 0;
    for (Index q = 0; q < n_; ++q) {
      while (p < n_ && staircase_->width[static_cast<std::size_t>(p)] <= q) ++p;
      first_row_[static_cast<std::size_t>(q)] = p;
    }
    return;
  }
  indicator_.resize(n_, n_);
  for (Index j = 0; j < n_; ++j)
    for (Index i = 0; i < n_; ++i) indicator_(i, j) = mask.allows(i, j) ? 1.0 : 0.0;
}

MatrixXd AllowedSums::over_keys(const MatrixXd& F) const {
  if (!staircase_) return indicator_ * F;
  const Staircase& st = *staircase_;
  MatrixXd out(n_, F.cols());
  Eigen::RowVectorXd running = Eigen::RowVectorXd::Zero(F.cols());
  Index added = 0;  // keys cols[0 .. added) are in `running`
  for (Index p = 0; p < n_; ++p) {
    for (const Index width = st.width[static_cast<std::size_t>(p)]; added < width; ++added)
      running += F.row(st.cols[static_cast<std::size_t>(added)]);
    out.row(st.rows[static_cast<std::size_t>(p)]) = running;
  }
  return out;
}

MatrixXd AllowedSums::over_queries(const MatrixXd& F) const {
  if (!staircase_) return indicator_.transpose() * F;
  const Staircase& st = *staircase_;
  MatrixXd out(n_, F.cols());
  Eigen::RowVectorXd running = Eigen::RowVectorXd::Zero(F.cols());
  Index from = n_;  // row positions [from, n) are in `running`
  for (Index q = n_ - 1; q >= 0; --q) {
    for (const Index first = first_row_[static_cast<std::size_t>(q)]; from > first;)
      running += F.row(st.rows[static_cast<std::size_t>(--from)]);
    out.row(st.cols[static_cast<std::size_t>(q)]) = running;
  }
  return out;
}

double AllowedSums::flops(Index m) const {
  const double n = static_cast<double>(n_), w = static_cast<double>(m);
  return staircase_ ? 2 * n * w : 2 * n * n * w;
}

namespace {

struct Residual {
  double max = 0, squares = 0;
};

/// max and sum of squares of Q K^T + c 1^T - L over the allowed set, with the mask
/// as a 0/1 matrix M and ML = M o L; S is scratch space for Q K^T.
Residual allowed_residual(const MatrixXd& ML, const MatrixXd& M, const MatrixXd& Q, const MatrixXd& K,
                          const VectorXd& c, MatrixXd& S) {
  S.noalias() = Q * K.transpose();
  S.colwise() += c;
  S = S.cwiseProduct(M) - ML;
  return {S.cwiseAbs().maxCoeff(), S.squaredNorm()};
}

/// Row j of the result: vec(f_j f_j^T) for the first `width` columns f of F.
MatrixXd outer_products(const MatrixXd& F, Index width) {
  MatrixXd O(F.rows(), width * width);
  for (Index a = 0; a < width; ++a)
    for (Index b = 0; b < width; ++b) O.col(a * width + b) = F.col(a).cwiseProduct(F.col(b));
  return O;
}

/// Row i of `out` solves (gram_i + ridge I) x = rhs_i, for the rows in `which`.
void solve_rows(const MatrixXd& grams, const MatrixXd& rhs, Index width, double ridge, MatrixXd& out,
                const std::vector<bool>& which) {
  MatrixXd G(width, width);
  for (Index i = 0; i < grams.rows(); ++i) {
    if (!which[static_cast<std::size_t>(i)]) continue;
    for (Index a = 0; a < width; ++a)
      for (Index b = 0; b < width; ++b) G(a, b) = grams(i, a * width + b);
    G.diagonal().array() += ridge;
    out.row(i) = G.ldlt().solve(rhs.row(i).transpose()).transpose();
  }
}

}  // namespace

std::pair<MatrixXd, MatrixXd> fit_masked_scores(const MaskedWitnessStarts::Start& start, const Mask& mask, Index dk,
                                                int sweeps) {
  const MatrixXd& T = start.completion;
  const Index n = T.rows();
  VectorXd c = start.row_means;
  const Index kept = std::min<Index>(dk, start.singular_values.size());
  const VectorXd root = start.singular_values.head(kept).cwiseSqrt();
  MatrixXd Q = MatrixXd::Zero(n, dk), K = MatrixXd::Zero(n, dk);
  Q.leftCols(kept) = start.U.leftCols(kept) * root.asDiagonal();
  K.leftCols(kept) = start.V.leftCols(kept) * root.asDiagonal();
  const double scale = std::max(1.0, T.cwiseAbs().maxCoeff());
  const double ridge = 1e-13 * scale * scale;
  const AllowedSums sums(mask);
  const Index w = dk + 1;
  // One sweep: the Gram sums (w^2 and dk^2 columns), the right-hand sides
  // (M o L) K~ and (M o L)^T Q, and the residual's Q K^T, each about 2 n^2 dk.
  const double nn = static_cast<double>(n) * static_cast<double>(n);
  const double sweep_cost = sums.flops(w * w) + sums.flops(dk * dk) + 2 * nn * static_cast<double>(w + 2 * dk);
  const int affordable = static_cast<int>(std::min<double>(sweeps, 2e9 / std::max(sweep_cost, 1.0)));
  MatrixXd M(n, n), ML(n, n);  // the mask as 0/1, and L on the allowed set, 0 elsewhere
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) {
      const bool allowed = mask.allows(i, j);
      M(i, j) = allowed ? 1.0 : 0.0;
      ML(i, j) = allowed ? T(i, j) : 0.0;
    }
  MatrixXd scratch(n, n);
  MatrixXd bestQ = Q, bestK = K;
  const Residual first = allowed_residual(ML, M, Q, K, c, scratch);
  double best = first.max, squares = first.squares;
  int idle = 0;
  const std::vector<bool> every_row(static_cast<std::size_t>(n), true);
  std::vector<bool> attended(static_cast<std::size_t>(n));
  {
    const MatrixXd counts = sums.over_queries(VectorXd::Ones(n));
    for (Index j = 0; j < n; ++j) attended[static_cast<std::size_t>(j)] = counts(j, 0) > 0;
  }
  for (int sweep = 0; sweep < affordable && best > 1e-15 * scale; ++sweep) {
    // Rows: (sum_j M_ij k~_j k~_j^T + ridge) x_i = sum_j M_ij k~_j L_ij with k~_j = (K_j, 1).
    MatrixXd Kt(n, w);
    Kt << K, VectorXd::Ones(n);
    MatrixXd X(n, w);
    solve_rows(sums.over_keys(outer_products(Kt, w)), ML * Kt, w, ridge, X, every_row);
    Q = X.leftCols(dk);
    c = X.col(dk);
    // Keys: (sum_i M_ij q_i q_i^T + ridge) k_j = sum_i M_ij q_i (L_ij - c_i); a key
    // nobody attends to keeps its value (any k_j serves).
    const MatrixXd key_rhs = ML.transpose() * Q - sums.over_queries(c.asDiagonal() * Q);
    solve_rows(sums.over_queries(outer_products(Q, dk)), key_rhs, dk, ridge, K, attended);
    const Residual now = allowed_residual(ML, M, Q, K, c, scratch);
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

}  // namespace attnrank::detail
