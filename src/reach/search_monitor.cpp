// The optimiser's wall-clock budget and progress (reach/search_monitor.hpp).
#include <attnrank/reach/search_monitor.hpp>

#include <cmath>
#include <limits>
#include <utility>

namespace attnrank {

SearchMonitor::SearchMonitor(std::optional<double> time_limit_seconds,
                             std::function<void(const SearchProgress&)> on_progress)
    : start_(Clock::now()), limit_(time_limit_seconds), on_progress_(std::move(on_progress)),
      last_report_(start_), approx_best_(std::numeric_limits<double>::infinity()) {
  if (limit_)
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*limit_));
}

double SearchMonitor::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

bool SearchMonitor::past_deadline() {
  if (deadline_reached_.load()) return true;
  if (deadline_ && Clock::now() >= *deadline_) deadline_reached_.store(true);
  return deadline_reached_.load();
}

bool SearchMonitor::evaluation(double approx_error) {
  const long count = ++evaluations_;
  const Clock::time_point now = Clock::now();
  if (on_progress_) {
    std::unique_lock<std::mutex> lock(report_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      if (std::isfinite(approx_error) && approx_error < approx_best_) approx_best_ = approx_error;
      if (now - last_report_ >= std::chrono::milliseconds(250)) {
        last_report_ = now;
        on_progress_({count, approx_best_, std::chrono::duration<double>(now - start_).count(), limit_});
      }
    }
  }
  if (deadline_ && now >= *deadline_) deadline_reached_.store(true);
  return deadline_reached_.load();
}

}  // namespace attnrank
