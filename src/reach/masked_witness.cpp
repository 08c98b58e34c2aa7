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

#include <attnrank/linalg/numeric_rank.hpp>

#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/softmax.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>
#include <attnrank/numbers/detail/parallel.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace attnrank {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

struct Residual {
  double max = 0, squares = 0;
};

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

/// max and sum of squares of |Q K^T + c 1^T - L| over the allowed set, with the mask as
/// a 0/1 matrix M and ML = M o L.
Residual masked_residual(const MatrixXd& ML, const MatrixXd& M, const MatrixXd& Q, const MatrixXd& K, const VectorXd& c) {
  const MatrixXd E = (Q * K.transpose() + c.replicate(1, M.cols())).cwiseProduct(M) - ML;
  return {E.cwiseAbs().maxCoeff(), E.squaredNorm()};
}

/// Q, K (scores Q K^T + c 1^T, unscaled) from the truncated SVD of a completion
/// T of L (computed once for every width: `start`), refined by alternating least
/// squares over the allowed set.
std::pair<MatrixXd, MatrixXd> fit_from(const MaskedWitnessStarts::Start& start, const Mask& mask, Index dk, int sweeps) {
  const MatrixXd& T = start.completion;
  const Index n = T.rows();
  const MatrixXd& L = T;  // only its allowed entries are fitted
  VectorXd c = start.row_means;
  const Index kept = std::min<Index>(dk, start.singular_values.size());
  const VectorXd root = start.singular_values.head(kept).cwiseSqrt();
  MatrixXd Q = MatrixXd::Zero(n, dk), K = MatrixXd::Zero(n, dk);
  Q.leftCols(kept) = start.U.leftCols(kept) * root.asDiagonal();
  K.leftCols(kept) = start.V.leftCols(kept) * root.asDiagonal();
  const double scale = std::max(1.0, L.cwiseAbs().maxCoeff());
  const double ridge = 1e-13 * scale * scale;
  // Flops of one sweep (the Gram matrices); beyond a budget the start is the fit.
  const double sweep_cost = 2.0 * static_cast<double>(mask.allowed_count()) * static_cast<double>((dk + 1) * (dk + 1));
  const int affordable = static_cast<int>(std::min<double>(sweeps, 2e9 / std::max(sweep_cost, 1.0)));
  // Each half-step solves, for every row i, the normal equations of its fit over
  // the allowed keys: (sum_j M_ij k_j k_j^T + ridge) x_i = sum_j M_ij k_j L_ij with
  // k_j = (K_j, 1). The Gram matrices of all rows at once are one product of the
  // 0/1 mask with the keys' outer products, the right-hand sides one of the
  // masked L with the keys: blocked products instead of a gather per row.
  MatrixXd M(n, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) M(i, j) = mask.allows(i, j) ? 1.0 : 0.0;
  const MatrixXd ML = M.cwiseProduct(L);
  MatrixXd bestQ = Q, bestK = K;
  const Residual first = masked_residual(ML, M, Q, K, c);
  double best = first.max, squares = first.squares;
  int idle = 0;
  const Index w = dk + 1;
  // Row j of the result: vec(f_j f_j^T) for the first w columns f of F.
  const auto outer_products = [](const MatrixXd& F, Index width) {
    MatrixXd O(F.rows(), width * width);
    for (Index a = 0; a < width; ++a)
      for (Index b = 0; b < width; ++b) O.col(a * width + b) = F.col(a).cwiseProduct(F.col(b));
    return O;
  };
  // Row i of `out` solves (gram_i + ridge I) x = rhs_i, for the rows in `which`.
  const auto solve_rows = [ridge](const MatrixXd& grams, const MatrixXd& rhs, Index width, MatrixXd& out,
                                  const std::vector<bool>& which) {
    for (Index i = 0; i < grams.rows(); ++i) {
      if (!which[static_cast<std::size_t>(i)]) continue;
      MatrixXd G(width, width);
      for (Index a = 0; a < width; ++a)
        for (Index b = 0; b < width; ++b) G(a, b) = grams(i, a * width + b);
      G.diagonal().array() += ridge;
      out.row(i) = G.ldlt().solve(rhs.row(i).transpose()).transpose();
    }
  };
  const std::vector<bool> every_row(static_cast<std::size_t>(n), true);
  std::vector<bool> attended(static_cast<std::size_t>(n));
  for (Index j = 0; j < n; ++j) attended[static_cast<std::size_t>(j)] = M.col(j).sum() > 0;
  for (int sweep = 0; sweep < affordable && best > 1e-15 * scale; ++sweep) {
    MatrixXd Kt(n, w);
    Kt << K, VectorXd::Ones(n);
    MatrixXd X(n, w);
    solve_rows(M * outer_products(Kt, w), ML * Kt, w, X, every_row);
    Q = X.leftCols(dk);
    c = X.col(dk);
    // Keys: (sum_i M_ij q_i q_i^T + ridge) k_j = sum_i M_ij q_i (L_ij - c_i); a key
    // nobody attends to keeps its value (any k_j serves).
    const MatrixXd key_grams = M.transpose() * outer_products(Q, dk);
    const MatrixXd centered = ML - M.cwiseProduct(c.replicate(1, n));
    const MatrixXd key_rhs = centered.transpose() * Q;
    MatrixXd Y = K;
    solve_rows(key_grams, key_rhs, dk, Y, attended);
    K = Y;
    const Residual now = masked_residual(ML, M, Q, K, c);
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

MaskedWitnessStarts::Start start_of(MatrixXd completion, Index widest) {
  MaskedWitnessStarts::Start s;
  s.row_means = completion.rowwise().mean();
  const MatrixXd centered = completion.colwise() - s.row_means;
  // The leading `widest` triplets only (Lanczos where that pays): a full SVD of a
  // 1024 x 1024 completion is about a second, and a scan asks for it twice a head.
  const TruncatedSvd svd = approx_truncated_svd(centered, std::min<Index>(widest, std::min(centered.rows(), centered.cols())));
  s.singular_values = svd.s;
  s.U = svd.U;
  s.V = svd.V;
  s.completion = std::move(completion);
  return s;
}

}  // namespace

MaskedWitnessStarts masked_witness_starts(const Matrix<Rational>& A, const Mask& mask, Index widest) {
  const Index n = A.rows();
  mask.require_size(n, "the target");
  require_head_width(widest, n);
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
  // unreachable one the row means often fit a narrow head better).
  MaskedWitnessStarts out(mask);
  out.widest = widest;
  out.target = approx_normalized_target(A);
  // The staircase completion costs a rank-revealing QR per column, about n^4 / 6
  // flops: beyond a budget (n of about 600) the row means start alone serves.
  const double completion_flops = std::pow(static_cast<double>(n), 4) / 6;
  if (const std::optional<Staircase> st = staircase_of(mask); st && completion_flops <= staircase_completion_budget)
    out.starts.push_back(start_of(staircase_completion(L, *st), widest));
  out.starts.insert(out.starts.begin(), start_of(std::move(L), widest));
  return out;
}

Witness approx_masked_witness(const MaskedWitnessStarts& starts, Index dk, int sweeps) {
  if (dk < 1 || dk > starts.widest)
    throw input_error("d_k = " + std::to_string(dk) + " is outside the widths these starts serve (1 .. " +
                      std::to_string(starts.widest) + ")");
  // The fit whose masked softmax lies nearer the target (in doubles) is the
  // witness. Scores Q K^T / sqrt(d_k): each factor takes d_k^(1/4); c is a row
  // constant, which softmax ignores.
  const double quarter = std::pow(static_cast<double>(dk), 0.25);
  Witness w;
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::pair<MatrixXd, MatrixXd>> fits(starts.starts.size());
  detail::for_row_blocks(static_cast<long>(fits.size()), 1e9, [&](long begin, long end) {  // side by side
    for (long k = begin; k < end; ++k)
      fits[static_cast<std::size_t>(k)] = fit_from(starts.starts[static_cast<std::size_t>(k)], starts.mask, dk, sweeps);
  });
  for (const auto& [Q, K] : fits) {
    const MatrixXd P = softmax_rows<double>(MatrixXd(Q * K.transpose()), starts.mask);
    const double distance = (P - starts.target).cwiseAbs().maxCoeff();
    if (w.Q.size() == 0 || distance < best) {
      best = distance;
      w.Q = Q * quarter;
      w.K = K * quarter;
    }
  }
  return w;
}

Witness approx_masked_witness(const Matrix<Rational>& A, const Mask& mask, Index dk, int sweeps) {
  return approx_masked_witness(masked_witness_starts(A, mask, dk), dk, sweeps);
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
