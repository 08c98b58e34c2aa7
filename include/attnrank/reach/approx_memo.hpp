#pragma once
// One target's shared work for the approximate question. reach's band at d_k,
// the width profile, the cheap search and the optimiser after it all start from
// the same objects of the target: Â's certified bounds, the certified logs
// behind the lower bounds, the masked witness starts, and each width's fitted
// start witness with its certified error. An ApproxMemo computes each once, on
// first need, and hands the same object to every later asker.
//
// Guarantee: every value is exactly what its computation gives afresh (the same
// function of the same inputs), so sharing changes no result, only the time.
// Thread-safe: concurrent askers of one entry wait for the first to finish it.
// A memo serves the one target (and mask) it was made for; asking it about
// another is a logic error.

#include <attnrank/attention/mask.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/reach/detail/rectangle_above.hpp>
#include <attnrank/reach/free.hpp>
#include <attnrank/reach/target.hpp>

#include <Eigen/Core>

#include <functional>
#include <future>  // OnceMap: a promise per entry
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace attnrank {

struct MaskedWitnessStarts;  // reach/masked.hpp

/// The widest masked witness start every question shares: starts are computed
/// for max(widest asked, min(n, this)), so reach's band at any d_k up to it and
/// the default width profile (d_k up to 16) use the same starts, and each
/// width's fit is the same whichever question asked first.
inline constexpr Eigen::Index shared_start_width = 16;

namespace detail {
/// A map whose entries are made once: get(key, make) returns the entry, calling
/// make() only for the first asker of the key (others wait for it; an exception
/// from make() reaches every asker of that key).
template <class Key, class Value>
class OnceMap {
 public:
  const Value& get(const Key& key, const std::function<Value()>& make) {
    std::promise<std::shared_ptr<const Value>> made;
    std::shared_future<std::shared_ptr<const Value>> entry;
    bool mine = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it == entries_.end()) {
        entry = made.get_future().share();
        entries_.emplace(key, entry);
        mine = true;
      } else {
        entry = it->second;
      }
    }
    if (mine) {
      try {
        made.set_value(std::make_shared<const Value>(make()));
      } catch (...) {
        made.set_exception(std::current_exception());
      }
    }
    return *entry.get();
  }

 private:
  std::mutex mutex_;
  std::map<Key, std::shared_future<std::shared_ptr<const Value>>> entries_;
};
}  // namespace detail

class ApproxMemo {
 public:
  /// For the target A (kept by reference: it must outlive the memo) under `mask`
  /// (nullopt: the free question).
  ApproxMemo(const Matrix<Rational>& A, std::optional<Mask> mask);
  ApproxMemo(const ApproxMemo&) = delete;
  ApproxMemo& operator=(const ApproxMemo&) = delete;
  ~ApproxMemo();

  /// std::logic_error unless A is this memo's target (the same object).
  void require_target(const Matrix<Rational>& A) const;
  /// The same, and mask (nullptr: none) its mask.
  void require_target(const Matrix<Rational>& A, const Mask* mask) const;

  /// normalized_target_bounds(A).
  const BoundsMatrix& bounds();
  /// The certified logs of A the lower bounds start from: LowerBoundCache::logs_of(A)
  /// free; under a mask, the same where A > 0 and exactly 0 at its zeros (which
  /// no R x J holds).
  const BoundsMatrix& logs();
  /// detail::entry_order(bounds().lo): the greedy R x J's sorted entries, which
  /// every lower-bound search on the target (reach's band, the profile, the
  /// bracket's question) would otherwise sort again.
  const detail::EntryOrder& entry_order();
  /// Starts entry_order() on a thread of its own (once, on targets of at least
  /// prefetch_order_entries entries, when a second core is allowed): the masked
  /// fit comes first and leaves a core mostly idle, the lower bounds after it
  /// need the order. The order is the same; entry_order() waits for it.
  void prefetch_entry_order();
  /// The masked witness starts of A, its zeros at allowed positions replaced,
  /// for every width up to max(widest, min(n, shared_start_width)).
  const MaskedWitnessStarts& masked_starts(Eigen::Index widest);
  /// approx_masked_witness at width dk from masked_starts(widest), its error
  /// certified in doubles with directed rounding (error_bits 53).
  const Witness& masked_start_witness(Eigen::Index widest, Eigen::Index dk);
  /// certified_masked_witness_error of Q, K against bounds() (the same number).
  double certified_masked_error(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K);

 private:
  const Matrix<Rational>& A_;
  std::optional<Mask> mask_;
  detail::OnceMap<int, BoundsMatrix> bounds_, logs_;
  detail::OnceMap<int, detail::EntryOrder> order_;
  detail::OnceMap<Eigen::Index, MaskedWitnessStarts> starts_;
  detail::OnceMap<std::pair<Eigen::Index, Eigen::Index>, Witness> fits_;
  std::once_flag prefetch_once_;
  detail::BackgroundJob prefetch_;  ///< declared last: joined before the rest is destroyed
};

/// The smallest target whose entry order prefetch_entry_order() sorts beside the
/// fit (at n = 256 the sort takes about 5 ms, a thread's start 50 us).
inline constexpr Eigen::Index prefetch_order_entries = 256 * 256;

}  // namespace attnrank
