// How close a masked head comes (attnrank/reach/masked.hpp): the approximate
// question's bounds under a mask.
//
// The lower bound is the lemma of reach/approximate.hpp on rectangles R x J
// inside the allowed set: sigma_(d_k+1)(log(Â)_RJ C_J) <= ||eta(eps)||_2 for every
// masked head within eps, as long as eps < Â on R x J. The unmasked search's
// greedy R x J collapses on a triangle of zeros (it drops the columns one by
// one), so the fully allowed blocks of the mask are tried as well: the
// staircase's blocks for a nested mask, the rectangles of masked_floor_bounds
// otherwise. For each block its singular value is certified once, and eta's
// bound grows with eps, so a bisection over eps below the block's smallest
// entry finds the largest excluded eps. The best over the blocks and the
// unmasked search (sound too, since its R x J never holds a masked zero) wins.
#include <attnrank/reach/masked.hpp>

#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/detail/witness_search.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

namespace attnrank {
namespace {

using Eigen::Index;

struct BlockBound {
  double eps = 0;
  double sigma_lower = 0;
  std::vector<Index> rows, cols;
  Eigen::MatrixXd vectors;
};

/// A fully allowed block with the certified singular values of its centered log
/// (as many as the widest width needs), computed once for every width.
struct BlockValues {
  std::vector<Index> rows, cols;
  double smallest = 0;  ///< a lower bound of the block's smallest entry of Â
  CertifiedSingularValues values;
};

/// The block's certified values, or nothing when no width in [first, last] can use it.
std::optional<BlockValues> block_values(const BoundsMatrix& logs, const Eigen::MatrixXd& below,
                                        const AllowedBlock& block, Index first, Index last) {
  const Index shape = std::min<Index>(static_cast<Index>(block.rows.size()), static_cast<Index>(block.cols.size()) - 1);
  if (block.rows.empty() || block.cols.size() < 2 || shape < first + 1) return std::nullopt;
  BlockValues v;
  v.rows = block.rows;
  v.cols = block.cols;
  v.smallest = below(block.rows, block.cols).minCoeff();  // eps must stay below every entry of R x J
  if (!(v.smallest > 0)) return std::nullopt;
  const BoundsMatrix sub{logs.lo(block.rows, block.cols), logs.hi(block.rows, block.cols)};
  SvdOptions lower_only;
  lower_only.upper_bounds = false;
  v.values = certified_singular_values(certified_row_centered(sub), std::min(last + 1, shape), lower_only);
  return v;
}

/// The largest eps (by `steps` bisection steps) with ||eta(eps)||_2 below the
/// block's certified lower bound of sigma_(dk+1), or 0.
BlockBound block_lower_bound(const BlockValues& v, const Eigen::MatrixXd& below, Index dk, int steps) {
  BlockBound b;
  if (static_cast<Index>(v.values.values.size()) < dk + 1) return b;
  const double sigma = v.values.values[static_cast<std::size_t>(dk)].lower;
  if (!(sigma > 0)) return b;
  double lo = 0, hi = std::nextafter(v.smallest, 0.0);
  if (detail::eta_norm_upper(below, v.rows, v.cols, hi) < sigma) lo = hi;  // the whole range is excluded
  else
    for (int step = 0; step < steps; ++step) {
      const double mid = lo > 0 ? std::sqrt(lo * hi) : hi / 1024;
      if (!(mid > lo && mid < hi)) break;
      (detail::eta_norm_upper(below, v.rows, v.cols, mid) < sigma ? lo : hi) = mid;
    }
  if (lo > 0) {
    b.eps = lo;
    b.sigma_lower = sigma;
    b.rows = v.rows;
    b.cols = v.cols;
    b.vectors = v.values.right_vectors.leftCols(dk + 1);
  }
  return b;
}

/// error_upper at width dk: the masked witness (the completion's fit, from
/// `starts`, made of A with its zeros at allowed positions replaced), then with
/// o.optimise the L-BFGS search on the masked softmax from it; each certified
/// in doubles with directed rounding, the better kept.
void masked_upper_bound(const Matrix<Rational>& A, const MaskedWitnessStarts& starts, Index dk, const Mask& mask,
                        const ApproxOptions& o, ApproxBounds& b) {
  Witness w = approx_masked_witness(starts, dk);
  w.error_bits = 53;
  w.max_abs_error = certified_masked_witness_error(A, mask, w.Q, w.K);
  b.start_error = w.max_abs_error;
  if (o.optimise) {
    const Index n = A.rows();
    Eigen::VectorXd start(2 * n * dk);
    start << w.Q.reshaped(), w.K.reshaped();
    const Eigen::VectorXd best = detail::search_witness(approx_normalized_target(A), dk, nullptr, {start}, o, &mask);
    if (best.size()) {
      Witness s;
      s.Q = Eigen::Map<const Eigen::MatrixXd>(best.data(), n, dk);
      s.K = Eigen::Map<const Eigen::MatrixXd>(best.data() + n * dk, n, dk);
      s.error_bits = 53;
      s.max_abs_error = certified_masked_witness_error(A, mask, s.Q, s.K);
      if (s.max_abs_error < w.max_abs_error) w = std::move(s);
    }
  }
  b.error_upper = w.max_abs_error;
  b.witness = std::move(w);
}

}  // namespace

namespace {

/// The masked lower bounds of the widths first..last at once, each below its
/// ceiling (a certified masked error at that width): the free search's, sound
/// because its R x J never holds a masked zero (one context for every width), and
/// the fully allowed blocks' (each block's certified singular values once). The
/// larger wins for each width, with its proof and reason; upper bounds untouched.
std::vector<ApproxBounds> masked_lower_bounds(const Matrix<Rational>& A, const Mask& mask, Index first, Index last,
                                              const std::vector<double>& ceilings, const ApproxOptions& options) {
  std::vector<ApproxBounds> out = detail::free_lower_bounds(A, first, last, ceilings, options);
  const Matrix<Rational> positive = detail::allowed_zeros_replaced(A, mask);
  const Eigen::MatrixXd below = normalized_target_bounds(A).lo;
  Matrix<Rational> ones_off = positive;
  for (Index i = 0; i < A.rows(); ++i)
    for (Index j = 0; j < A.cols(); ++j)
      if (!mask.allows(i, j)) ones_off(i, j) = 1;
  const BoundsMatrix logs = certified_log_bounds(ones_off);
  // Each block costs one certified SVD, shared by every width: the squarest
  // ones (largest min(rows, columns - 1), where sigma_(d_k+1) can be largest)
  // are tried, a few of them.
  std::vector<AllowedBlock> blocks = fully_allowed_blocks(mask);
  const auto shape = [](const AllowedBlock& b) {
    return std::min<Index>(static_cast<Index>(b.rows.size()), static_cast<Index>(b.cols.size()) - 1);
  };
  std::stable_sort(blocks.begin(), blocks.end(), [&](const AllowedBlock& a, const AllowedBlock& b) { return shape(a) > shape(b); });
  const std::size_t tried_blocks = A.rows() <= 128 ? blocks.size() : 6;  // small targets: every block
  if (blocks.size() > tried_blocks) blocks.resize(tried_blocks);
  for (const AllowedBlock& block : blocks) {
    const std::optional<BlockValues> v = block_values(logs, below, block, first, last);
    if (!v) continue;
    for (Index dk = first; dk <= last; ++dk) {
      ApproxBounds& b = out[static_cast<std::size_t>(dk - first)];
      BlockBound bb = block_lower_bound(*v, below, dk, options.bisection_steps);
      if (!(bb.eps > b.error_lower)) continue;
      b.error_lower = bb.eps;
      b.lower_proof.rows = std::move(bb.rows);
      b.lower_proof.cols = std::move(bb.cols);
      b.lower_proof.sigma_lower = bb.sigma_lower;
      b.lower_proof.vectors = std::move(bb.vectors);
      b.lower_reason = "sigma_" + std::to_string(dk + 1) + " of the centered log on the fully allowed block of " +
                       std::to_string(b.lower_proof.rows.size()) + " x " + std::to_string(b.lower_proof.cols.size()) +
                       " entries is certified >= " + format_lower_bound(bb.sigma_lower) +
                       ", above every error matrix a masked head within " + format_lower_bound(bb.eps) + " could leave";
    }
  }
  return out;
}

}  // namespace

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Index dk, const Mask& mask, const ApproxOptions& options) {
  validate_masked_target(A, mask, "target");
  require_head_width(dk, A.rows());
  ApproxBounds upper;
  masked_upper_bound(A, masked_witness_starts(detail::allowed_zeros_replaced(A, mask), mask, dk), dk, mask, options,
                     upper);
  ApproxBounds b = masked_lower_bounds(A, mask, dk, dk, {upper.error_upper}, options).front();
  b.error_upper = upper.error_upper;
  b.start_error = upper.start_error;
  b.witness = std::move(upper.witness);
  return b;
}

WidthResult approx_width(const Matrix<Rational>& A, double epsilon, Index max_dk, const Mask& mask,
                         const ApproxOptions& options) {
  validate_masked_target(A, mask, "target");
  const Index n = A.rows();
  if (max_dk == 0) max_dk = n;
  detail::require_width_question(epsilon, max_dk, n);
  WidthResult w;
  w.epsilon = epsilon;
  w.max_dk = max_dk;
  // The witnesses' errors and every width's lower bound first; then the search,
  // only where it can lower width_upper: by bisection over the open widths
  // [width_lower, width_upper) (a witness within epsilon at d settles every
  // width above d). settle_width carries each bound to its neighbours (E* is
  // non-increasing in d_k).
  ApproxOptions starts_only = options;
  starts_only.optimise = false;
  // One SVD per completion serves every width's start. Each width's fit costs
  // alternating least squares, so the fits run where they can move width_upper:
  // by bisection over the widths (max_dk first), as the search does. A width
  // left out keeps E* <= 1 (|P - Â| <= 1 entrywise), and settle_width carries the
  // fitted widths' bounds to it.
  const MaskedWitnessStarts starts = masked_witness_starts(detail::allowed_zeros_replaced(A, mask), mask, max_dk);
  std::vector<double> uppers(static_cast<std::size_t>(max_dk), 1.0);
  const auto fit = [&](Index dk) {
    ApproxBounds b;
    masked_upper_bound(A, starts, dk, mask, starts_only, b);
    double& u = uppers[static_cast<std::size_t>(dk - 1)];
    u = std::min(u, b.error_upper);
    return u;
  };
  if (fit(max_dk) <= epsilon)
    for (Index lo = 1, hi = max_dk - 1; lo <= hi;) {
      const Index mid = lo + (hi - lo) / 2;
      if (fit(mid) <= epsilon) hi = mid - 1;
      else lo = mid + 1;
    }
  for (std::size_t k = 1; k < uppers.size(); ++k) uppers[k] = std::min(uppers[k], uppers[k - 1]);  // the ceilings
  const std::vector<ApproxBounds> lower = masked_lower_bounds(A, mask, 1, max_dk, uppers, starts_only);
  for (Index dk = 1; dk <= max_dk; ++dk)
    w.profile.push_back({dk, lower[static_cast<std::size_t>(dk - 1)].error_lower, uppers[static_cast<std::size_t>(dk - 1)]});
  detail::settle_width(w);
  w.start_width_upper = w.width_upper;
  const auto search = [&](const ApproxOptions& o) {
    detail::search_open_widths(w, [&](Index dk) {
      ApproxBounds b;
      masked_upper_bound(A, starts, dk, mask, o, b);
      return b.error_upper;
    });
  };
  if (options.optimise) search(options);
  w.first_search_width_upper = w.width_upper;
  if (options.then_search && detail::bracket_open(w)) search(*options.then_search);
  return w;
}

}  // namespace attnrank
