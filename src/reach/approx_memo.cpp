// One target's shared work for the approximate question (attnrank/reach/approx_memo.hpp).
#include <attnrank/reach/approx_memo.hpp>

#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/reach/detail/lower_bound_search.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/target.hpp>

#include <algorithm>
#include <stdexcept>

namespace attnrank {

using Eigen::Index;

ApproxMemo::ApproxMemo(const Matrix<Rational>& A, std::optional<Mask> mask) : A_(A), mask_(std::move(mask)) {}

ApproxMemo::~ApproxMemo() = default;

void ApproxMemo::require_target(const Matrix<Rational>& A) const {
  if (&A != &A_) throw std::logic_error("ApproxMemo: asked about a target it was not made for");
}

void ApproxMemo::require_target(const Matrix<Rational>& A, const Mask* mask) const {
  require_target(A);
  if ((mask == nullptr) != !mask_.has_value() || (mask && !(*mask == *mask_)))
    throw std::logic_error("ApproxMemo: asked about a mask it was not made for");
}

const BoundsMatrix& ApproxMemo::bounds() {
  return bounds_.get(0, [&] { return normalized_target_bounds(A_); });
}

const BoundsMatrix& ApproxMemo::logs() {
  return logs_.get(0, [&] {
    // Under a mask the lower bounds read logs only where Â > 0 (their R x J drop
    // every zero), so the zeros keep log 1 = 0 instead of a copy of A with them replaced.
    if (mask_) return certified_log_bounds_where(A_, [&](Index i, Index j) { return detail::entry_sign(A_(i, j)) != 0; });
    return detail::LowerBoundCache::logs_of(A_);
  });
}

const detail::EntryOrder& ApproxMemo::entry_order() {
  return order_.get(0, [&] { return detail::entry_order(bounds().lo); });
}

void ApproxMemo::prefetch_entry_order() {
  if (A_.size() < prefetch_order_entries || detail::row_threads() < 2) return;
  std::call_once(prefetch_once_, [&] { prefetch_.start([this] { entry_order(); }); });
}

const MaskedWitnessStarts& ApproxMemo::masked_starts(Index widest) {
  if (!mask_) throw std::logic_error("ApproxMemo: masked starts of a free question");
  widest = std::max(widest, std::min(A_.rows(), shared_start_width));
  return starts_.get(widest, [&] {
    // The fit needs a finite log at every allowed position: zeros there are
    // replaced (A itself, not a copy of a million rationals, when it has none).
    for (Index i = 0; i < A_.rows(); ++i)
      for (Index j = 0; j < A_.cols(); ++j)
        if (mask_->allows(i, j) && detail::entry_sign(A_(i, j)) == 0)
          return masked_witness_starts(detail::allowed_zeros_replaced(A_, *mask_), *mask_, widest);
    return masked_witness_starts(A_, *mask_, widest);
  });
}

const Witness& ApproxMemo::masked_start_witness(Index widest, Index dk) {
  const MaskedWitnessStarts& starts = masked_starts(widest);
  return fits_.get({starts.widest, dk}, [&] {
    Witness w = approx_masked_witness(starts, dk);
    w.error_bits = 53;
    w.max_abs_error = certified_masked_error(w.Q, w.K);
    return w;
  });
}

double ApproxMemo::certified_masked_error(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K) {
  if (!mask_) throw std::logic_error("ApproxMemo: a masked error of a free question");
  return certified_masked_witness_error(bounds(), *mask_, Q, K);
}

}  // namespace attnrank
