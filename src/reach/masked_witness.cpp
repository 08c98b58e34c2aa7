// A masked head near a target, and its certified error (attnrank/reach/masked.hpp).
//
// The starts (completions of log A and their truncated SVDs) are here; the
// alternating least squares from them is reach/detail/masked_fit.hpp.
// Uncertified: only a witness's softmax distance to the target is proven, by
// certified_masked_witness_error.
#include <attnrank/reach/masked.hpp>

#include <attnrank/reach/detail/masked_fit.hpp>

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
  detail::for_row_blocks(static_cast<long>(n), static_cast<double>(n) * static_cast<double>(n) / 10, [&](long begin, long end) {
    for (Index i = begin; i < end; ++i) {
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
  });
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
      fits[static_cast<std::size_t>(k)] = detail::fit_masked_scores(starts.starts[static_cast<std::size_t>(k)], starts.mask, dk, sweeps);
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
  return certified_masked_witness_error(normalized_target_bounds(A), mask, Q, K);
}

double certified_masked_witness_error(const BoundsMatrix& target, const Mask& mask, const MatrixXd& Q,
                                      const MatrixXd& K) {
  if (Q.rows() != target.lo.rows() || K.rows() != target.lo.rows() || Q.cols() != K.cols() || Q.cols() < 1)
    throw input_error("witness: Q and K must both be " + std::to_string(target.lo.rows()) + " x d_k");
  if (!Q.allFinite() || !K.allFinite()) return std::numeric_limits<double>::infinity();
  mask.require_size(target.lo.rows(), "witness");
  return max_softmax_distance_upper(certified_scaled_scores(Q, K), &mask, target);
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
