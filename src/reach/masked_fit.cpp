// The masked witness's alternating least squares (attnrank/reach/detail/masked_fit.hpp).
#include <attnrank/reach/detail/masked_fit.hpp>

#include <attnrank/numbers/detail/parallel.hpp>

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

// Both sums run column by column: within a column the terms come in the same
// order as a row-at-a-time running sum would add them, and the loads stay in
// one column (rows of a column-major matrix are n doubles apart).
MatrixXd AllowedSums::over_keys(const MatrixXd& F) const {
  if (!staircase_) return indicator_ * F;
  const Staircase& st = *staircase_;
  MatrixXd out(n_, F.cols());
  for (Index c = 0; c < F.cols(); ++c) {
    const double* f = F.col(c).data();
    double* o = out.col(c).data();
    double running = 0;
    Index added = 0;  // keys cols[0 .. added) are in `running`
    for (Index p = 0; p < n_; ++p) {
      for (const Index width = st.width[static_cast<std::size_t>(p)]; added < width; ++added)
        running += f[st.cols[static_cast<std::size_t>(added)]];
      o[st.rows[static_cast<std::size_t>(p)]] = running;
    }
  }
  return out;
}

MatrixXd AllowedSums::over_queries(const MatrixXd& F) const {
  if (!staircase_) return indicator_.transpose() * F;
  const Staircase& st = *staircase_;
  MatrixXd out(n_, F.cols());
  for (Index c = 0; c < F.cols(); ++c) {
    const double* f = F.col(c).data();
    double* o = out.col(c).data();
    double running = 0;
    Index from = n_;  // row positions [from, n) are in `running`
    for (Index q = n_ - 1; q >= 0; --q) {
      for (const Index first = first_row_[static_cast<std::size_t>(q)]; from > first;)
        running += f[st.rows[static_cast<std::size_t>(--from)]];
      o[st.cols[static_cast<std::size_t>(q)]] = running;
    }
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

// The products below run in blocks of fixed size dealt to the cores: the same
// blocks, so the same sums and the same fit, on any number of threads. Each
// block is a product of about 2 n x 64 x d_k flops; for_row_blocks counts
// multi-precision operations, about a hundred flops each.
constexpr Index product_block = 64;

double block_operations(Index n, Index width) {
  return 2 * static_cast<double>(n) * static_cast<double>(product_block) * static_cast<double>(width) / 100;
}

/// max and sum of squares of Q K^T + c 1^T - L over the allowed set, with the mask
/// as a 0/1 matrix M and ML = M o L, a block of columns at a time.
Residual allowed_residual(const MatrixXd& ML, const MatrixXd& M, const MatrixXd& Q, const MatrixXd& K,
                          const VectorXd& c) {
  const Index n = ML.rows(), blocks = (n + product_block - 1) / product_block;
  std::vector<Residual> part(static_cast<std::size_t>(blocks));
  for_row_blocks(static_cast<long>(blocks), static_cast<double>(blocks) * block_operations(n, Q.cols()),
                 [&](long begin, long end) {
                   MatrixXd S;
                   for (long b = begin; b < end; ++b) {
                     const Index first = b * product_block, cols = std::min(product_block, n - first);
                     S.noalias() = Q * K.middleRows(first, cols).transpose();
                     S.colwise() += c;
                     S = S.cwiseProduct(M.middleCols(first, cols)) - ML.middleCols(first, cols);
                     part[static_cast<std::size_t>(b)] = {S.cwiseAbs().maxCoeff(), S.squaredNorm()};
                   }
                 });
  Residual r;
  for (const Residual& p : part) {  // in block order
    r.max = std::max(r.max, p.max);
    r.squares += p.squares;
  }
  return r;
}

/// ML F, or ML^T F when `transposed`, a block of the result's rows at a time.
MatrixXd times(const MatrixXd& ML, const MatrixXd& F, bool transposed) {
  const Index n = ML.rows(), blocks = (n + product_block - 1) / product_block;
  MatrixXd out(n, F.cols());
  for_row_blocks(static_cast<long>(blocks), static_cast<double>(blocks) * block_operations(n, F.cols()),
                 [&](long begin, long end) {
                   for (long b = begin; b < end; ++b) {
                     const Index first = b * product_block, rows = std::min(product_block, n - first);
                     if (transposed) out.middleRows(first, rows).noalias() = ML.middleCols(first, rows).transpose() * F;
                     else out.middleRows(first, rows).noalias() = ML.middleRows(first, rows) * F;
                   }
                 });
  return out;
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
  MatrixXd bestQ = Q, bestK = K;
  const Residual first = allowed_residual(ML, M, Q, K, c);
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
    solve_rows(sums.over_keys(outer_products(Kt, w)), times(ML, Kt, false), w, ridge, X, every_row);
    Q = X.leftCols(dk);
    c = X.col(dk);
    // Keys: (sum_i M_ij q_i q_i^T + ridge) k_j = sum_i M_ij q_i (L_ij - c_i); a key
    // nobody attends to keeps its value (any k_j serves).
    const MatrixXd key_rhs = times(ML, Q, true) - sums.over_queries(c.asDiagonal() * Q);
    solve_rows(sums.over_queries(outer_products(Q, dk)), key_rhs, dk, ridge, K, attended);
    const Residual now = allowed_residual(ML, M, Q, K, c);
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
