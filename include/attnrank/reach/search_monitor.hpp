#pragma once
// The optimiser behind error_upper on a budget of wall-clock time, and what it did.
// A SearchMonitor is shared (by pointer, through every copy of ApproxOptions) by all
// the searches of one analysis: one deadline for them together, one progress
// report, one account of evaluations and of whether the deadline ended a search.
//
// Guarantee: none needed. A monitor only decides when the search stops; the point
// the search returns is certified afterwards as always, for exactly those numbers,
// so an earlier stop can loosen error_upper but never make it wrong. Results that
// hit the deadline depend on the machine's speed; without a time limit (the
// default) they are reproducible from the seed.

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>

namespace attnrank {

/// Where the search stands, for a progress line (never used in a bound).
struct SearchProgress {
  long evaluations = 0;         ///< surrogate evaluations so far, in all searches
  double approx_best = 0;       ///< smallest max error in doubles seen so far (uncertified)
  double elapsed_seconds = 0;   ///< since the monitor was made
  std::optional<double> time_limit_seconds;
};

class SearchMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  /// time_limit_seconds: the searches stop at their first evaluation after that
  /// many seconds from now (nullopt: only their evaluation budgets end them).
  /// on_progress is called about four times a second while a search runs, from
  /// the searching thread.
  explicit SearchMonitor(std::optional<double> time_limit_seconds = std::nullopt,
                         std::function<void(const SearchProgress&)> on_progress = {});

  /// Counts one evaluation whose max error was `approx_error`, reports progress
  /// when due, and answers whether the search must stop now (the deadline has passed).
  bool evaluation(double approx_error);
  /// True once the deadline has passed (checked between runs, before new ones start).
  bool past_deadline();
  /// Called by a search that spent its whole evaluation budget while its best
  /// error still fell by more than 1% over the budget's last tenth, where the
  /// full search (ApproxOptions' default search_flops) would have had more: more
  /// work would likely lower it further (detail::search_witness decides).
  void budget_spent_improving() { spent_improving_.store(true); }

  long evaluations() const { return evaluations_.load(); }
  bool deadline_reached() const { return deadline_reached_.load(); }
  /// Whether some search ended on its budget while still improving.
  bool spent_improving() const { return spent_improving_.load(); }
  std::optional<double> time_limit_seconds() const { return limit_; }
  double elapsed_seconds() const;

 private:
  Clock::time_point start_;
  std::optional<Clock::time_point> deadline_;
  std::optional<double> limit_;
  std::function<void(const SearchProgress&)> on_progress_;
  std::atomic<long> evaluations_{0};
  std::atomic<bool> deadline_reached_{false};
  std::atomic<bool> spent_improving_{false};
  std::mutex report_mutex_;  // guards the two below
  Clock::time_point last_report_;
  double approx_best_ = 0;
};

}  // namespace attnrank
