// How close a masked head comes (attnrank/reach/masked.hpp): the approximate
// question's bounds under a mask.
//
// The lower bound is the lemma of reach/approximate.hpp on rectangles R x J
// inside the allowed set: sigma_(d_k+1)(log(Â)_RJ C_J) <= ||eta(eps)||_2 for every
// masked head within eps, as long as eps < Â on R x J. The unmasked search's
// greedy R x J never holds a masked zero, so it is sound under the mask; up to
// n = 64 the same search also runs inside fully allowed blocks of the mask (the
// staircase's blocks for a nested mask, the rectangles of masked_floor_bounds
// otherwise), which on small targets finds rectangles the whole-target greedy
// misses. Inside a block, R x J is the whole block below the block's smallest
// entry, and above it the greedy choice that drops the block's rows and columns
// with small entries. The best proof wins for each width.
#include <attnrank/reach/masked.hpp>

#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/reach/approx_memo.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/detail/lower_bound_search.hpp>
#include <attnrank/reach/detail/witness_search.hpp>

#include <algorithm>
#include <cmath>

namespace attnrank {
namespace {

using Eigen::Index;

/// The largest n whose masked lower bound also searches inside fully allowed blocks.
constexpr Index max_block_search_n = 64;

/// The lower search of reach/detail/lower_bound_search.hpp run inside one fully
/// allowed block, for the widths first..last below their ceilings: its R x J
/// (the whole block below the block's min Â, then the greedy choice that drops
/// the block's rows and columns with entries <= theta eps) never leaves the
/// block, so it never holds a masked position. Each width's best proof is
/// written into out when it beats the one there, its rows and columns mapped
/// back to the target's.
void block_lower_bounds(const BoundsMatrix& logs, const Eigen::MatrixXd& below, const AllowedBlock& block, Index first,
                        Index last, const std::vector<double>& ceilings, const ApproxOptions& o,
                        std::vector<ApproxBounds>& out) {
  const Index shape = std::min<Index>(static_cast<Index>(block.rows.size()), static_cast<Index>(block.cols.size()) - 1);
  if (block.rows.empty() || block.cols.size() < 2 || shape < first + 1) return;
  const Eigen::MatrixXd block_below = below(block.rows, block.cols);
  detail::LowerBoundCache cache(BoundsMatrix{logs.lo(block.rows, block.cols), logs.hi(block.rows, block.cols)},
                                block_below, std::min(last + 1, shape));
  std::vector<detail::LowerSearch> searches;
  std::vector<double> before;  // each width's bound so far: only a better eps is worth a proof
  for (Index dk = first; dk <= std::min(last, shape - 1); ++dk) {
    detail::LowerSearch s;
    s.width = dk;
    s.ceiling = std::min(ceilings[static_cast<std::size_t>(dk - first)], 1.0);
    s.best = out[static_cast<std::size_t>(dk - first)].error_lower;
    before.push_back(s.best);
    searches.push_back(s);
  }
  detail::search_lower_bounds(searches, o.bisection_steps, o.bisection_steps_above, cache);
  for (std::size_t k = 0; k < searches.size(); ++k) {
    detail::LowerSearch& s = searches[k];
    if (!(s.best > before[k])) continue;
    const Index dk = s.width;
    ApproxBounds& b = out[static_cast<std::size_t>(dk - first)];
    b.error_lower = s.best;
    b.lower_proof.orders = false;
    b.lower_proof.sigma_lower = s.proof.sigma_lower;
    b.lower_proof.vectors = cache.values(s.proof.rows, s.proof.cols, dk + 1)->right_vectors.leftCols(dk + 1);
    b.lower_proof.rows.clear();
    b.lower_proof.cols.clear();
    for (Index i : s.proof.rows) b.lower_proof.rows.push_back(block.rows[static_cast<std::size_t>(i)]);
    for (Index j : s.proof.cols) b.lower_proof.cols.push_back(block.cols[static_cast<std::size_t>(j)]);
    b.lower_reason = "sigma_" + std::to_string(dk + 1) + " of the centered log on " +
                     std::to_string(b.lower_proof.rows.size()) + " x " + std::to_string(b.lower_proof.cols.size()) +
                     " entries of a fully allowed block is certified >= " + format_lower_bound(s.proof.sigma_lower) +
                     ", above every error matrix a masked head within " + format_lower_bound(s.best) + " could leave";
  }
}

/// error_upper at width dk: the masked witness (the completion's fit, from the
/// memo's starts for widths up to `widest`, made of A with its zeros at allowed
/// positions replaced), then with o.optimise the L-BFGS search on the masked
/// softmax from it; each certified in doubles with directed rounding, the
/// better kept.
void masked_upper_bound(ApproxMemo& memo, Index widest, Index dk, const Mask& mask, const ApproxOptions& o,
                        ApproxBounds& b) {
  memo.prefetch_entry_order();  // the lower bounds come next
  Witness w = memo.masked_start_witness(widest, dk);
  b.start_error = w.max_abs_error;
  if (o.optimise) {
    const MaskedWitnessStarts& starts = memo.masked_starts(widest);
    const Index n = starts.target.rows();
    Eigen::VectorXd start(2 * n * dk);
    start << w.Q.reshaped(), w.K.reshaped();
    const Eigen::VectorXd best = detail::search_witness(starts.target, dk, nullptr, {start}, o, &mask);
    if (best.size()) {
      Witness s;
      s.Q = Eigen::Map<const Eigen::MatrixXd>(best.data(), n, dk);
      s.K = Eigen::Map<const Eigen::MatrixXd>(best.data() + n * dk, n, dk);
      s.error_bits = 53;
      s.max_abs_error = memo.certified_masked_error(s.Q, s.K);
      if (s.max_abs_error < w.max_abs_error) w = std::move(s);
    }
  }
  b.error_upper = w.max_abs_error;
  b.witness = std::move(w);
}

/// The memo of the options when they carry one (checked to be made for A and
/// mask), else `local`.
ApproxMemo& memo_for(const Matrix<Rational>& A, const Mask& mask, const ApproxOptions& o, std::optional<ApproxMemo>& local) {
  if (o.memo) {
    o.memo->require_target(A, &mask);
    return *o.memo;
  }
  return local.emplace(A, mask);
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
  std::vector<ApproxBounds> out = detail::free_lower_bounds(A, first, last, ceilings, options, &mask);
  // Above max_block_search_n the unmasked search alone: its greedy R x J already
  // finds block-like rectangles, and on planted causal heads at n = 256 the
  // blocks added nothing to it while costing a quarter of the scan's time at
  // n = 1024.
  if (A.rows() > max_block_search_n) return out;
  const Matrix<Rational> positive = detail::allowed_zeros_replaced(A, mask);
  const Eigen::MatrixXd below = options.memo ? options.memo->bounds().lo : normalized_target_bounds(A).lo;
  const BoundsMatrix logs = certified_log_bounds_where(positive, [&](Index i, Index j) { return mask.allows(i, j); });
  // Each block's search costs a few certified SVDs, shared by every width. For
  // a small target every block is tried; up to max_block_search_n three: the
  // squarest (largest min(rows, columns - 1), where sigma_(d_k+1) can be
  // largest), and among the blocks at least half as square the tallest and the
  // widest.
  std::vector<AllowedBlock> blocks = fully_allowed_blocks(mask);
  const auto shape = [](const AllowedBlock& b) {
    return std::min<Index>(static_cast<Index>(b.rows.size()), static_cast<Index>(b.cols.size()) - 1);
  };
  if (A.rows() > 16 && blocks.size() > 3) {
    const auto squarest = std::max_element(blocks.begin(), blocks.end(),
                                           [&](const AllowedBlock& a, const AllowedBlock& b) { return shape(a) < shape(b); });
    const Index half = (shape(*squarest) + 1) / 2;
    std::vector<AllowedBlock> chosen{*squarest};
    const auto most = [&](auto size) {
      const AllowedBlock* best = nullptr;
      for (const AllowedBlock& b : blocks)
        if (shape(b) >= half && (!best || size(b) > size(*best))) best = &b;
      if (best && std::none_of(chosen.begin(), chosen.end(), [&](const AllowedBlock& c) {
            return c.rows == best->rows && c.cols == best->cols;
          }))
        chosen.push_back(*best);
    };
    most([](const AllowedBlock& b) { return b.rows.size(); });
    most([](const AllowedBlock& b) { return b.cols.size(); });
    blocks = std::move(chosen);
  }
  for (const AllowedBlock& block : blocks) block_lower_bounds(logs, below, block, first, last, ceilings, options, out);
  return out;
}

}  // namespace

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Index dk, const Mask& mask, const ApproxOptions& options) {
  validate_masked_target(A, mask, "target");
  require_head_width(dk, A.rows());
  std::optional<ApproxMemo> local;
  ApproxOptions o = options;
  o.memo = &memo_for(A, mask, options, local);
  ApproxBounds upper;
  masked_upper_bound(*o.memo, dk, dk, mask, o, upper);
  ApproxBounds b = masked_lower_bounds(A, mask, dk, dk, {upper.error_upper}, o).front();
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
  std::optional<ApproxMemo> local;
  ApproxMemo& memo = memo_for(A, mask, options, local);
  ApproxOptions starts_only = options;
  starts_only.optimise = false;
  starts_only.memo = &memo;
  // One SVD per completion serves every width's start. Each width's fit costs
  // alternating least squares, so the fits run where they can move width_upper:
  // by bisection over the widths, as the search does. After the first probes the
  // lower bounds come in (each width's ceiling the fits so far),
  // and the bisection goes on only over the widths they leave open: a width
  // proven to miss needs no fit. A width left out keeps E* <= 1 (|P - Â| <= 1
  // entrywise), and settle_width carries the fitted widths' bounds to it.
  std::vector<double> uppers(static_cast<std::size_t>(max_dk), 1.0);
  const auto fit = [&](Index dk) {
    ApproxBounds b;
    masked_upper_bound(memo, max_dk, dk, mask, starts_only, b);
    double& u = uppers[static_cast<std::size_t>(dk - 1)];
    u = std::min(u, b.error_upper);
    return u;
  };
  const auto ceilings = [&] {  // a certified error at d holds for every wider width
    std::vector<double> c = uppers;
    for (std::size_t k = 1; k < c.size(); ++k) c[k] = std::min(c[k], c[k - 1]);
    return c;
  };
  // The smallest width within epsilon lies in [lo, hi + 1] once `within`.
  Index lo = 1, hi = max_dk;
  bool within = false;
  const auto probe_at = [&](Index dk) {
    if (fit(dk) <= epsilon) {
      within = true;
      hi = dk - 1;
    } else {
      lo = dk + 1;
    }
  };
  const auto probe = [&] { probe_at(lo + (hi - lo) / 2); };
  // First the width the options name (a scan's d_k, already fitted for reach's
  // band), then max_dk: nothing within epsilon there, no fit can move width_upper.
  const Index first = options.first_fit >= 1 && options.first_fit <= max_dk ? options.first_fit : max_dk;
  probe_at(first);
  if (!within && first < max_dk) probe_at(max_dk);
  if (within && hi == max_dk - 1 && lo <= hi) probe();  // only max_dk within: one midpoint gives the wider widths ceilings
  std::vector<ApproxBounds> lower = masked_lower_bounds(A, mask, 1, max_dk, ceilings(), starts_only);
  if (within) {
    for (Index dk = max_dk; dk >= 1; --dk)
      if (lower[static_cast<std::size_t>(dk - 1)].error_lower > epsilon) {  // dk and every narrower width miss
        lo = std::max(lo, dk + 1);
        break;
      }
    while (lo <= hi) probe();
  }
  const std::vector<double> profile_uppers = ceilings();
  for (Index dk = 1; dk <= max_dk; ++dk)
    w.profile.push_back({dk, lower[static_cast<std::size_t>(dk - 1)].error_lower,
                         profile_uppers[static_cast<std::size_t>(dk - 1)]});
  detail::settle_width(w);
  w.start_width_upper = w.width_upper;
  // As the free profile does: the width below a witness within epsilon is asked
  // directly whether it misses, before any search.
  Index tried = 0;
  const auto close = [&] {
    detail::close_bracket_from_below(w, tried, [&](Index dk, double eps) {
      ApproxBounds& b = lower[static_cast<std::size_t>(dk - 1)];
      b.error_upper = w.profile[static_cast<std::size_t>(dk - 1)].error_upper;
      return detail::free_lower_bound_above(A, dk, eps, starts_only, &mask, b);
    });
  };
  close();
  const auto search = [&](const ApproxOptions& o) {
    detail::search_open_widths(w, [&](Index dk) {
      ApproxBounds b;
      masked_upper_bound(memo, max_dk, dk, mask, o, b);
      return b.error_upper;
    });
    close();
  };
  if (options.optimise && detail::bracket_open(w)) search(options);
  w.first_search_width_upper = w.width_upper;
  if (options.then_search && detail::bracket_open(w) &&
      (options.then_search_reach <= 0 || detail::search_within_reach(w, options.then_search_reach)))
    search(*options.then_search);
  return w;
}

}  // namespace attnrank
