#pragma once
// The rounding mode of the floating-point unit, set and restored by scopes: the
// one place attnrank changes it. The mode is per thread, and Eigen's own threads
// (an OpenMP build) do not inherit it, so a RoundingScope also keeps Eigen on the
// calling thread while any scope is alive (numbers/directed_rounding.hpp builds
// its certified products on these).
//
// Guarantee: while a RoundingScope<FE_UPWARD> (UpwardRounding) is alive, every
// double operation this thread performs, Eigen's included, rounds toward
// +infinity; the mode it had is restored when the scope ends.

#include <Eigen/Core>

#include <cfenv>
#include <mutex>

namespace attnrank {


namespace detail {
/// Eigen's thread count is one process-wide value. Scopes on several threads at
/// once share one claim on it: the first sets it to 1, the last restores it, so no
/// scope can turn Eigen's threads back on (threads that would not round upward)
/// while another is still computing. (ThreadSanitizer found the unshared version:
/// tests/properties/threads.test.cpp.)
class EigenSingleThreaded {
 public:
  EigenSingleThreaded() {
    const std::lock_guard<std::mutex> lock(state().mutex);
    if (state().holders++ == 0) {
      state().saved = Eigen::nbThreads();
      Eigen::setNbThreads(1);
    }
  }
  ~EigenSingleThreaded() {
    const std::lock_guard<std::mutex> lock(state().mutex);
    if (--state().holders == 0) Eigen::setNbThreads(state().saved);
  }
  EigenSingleThreaded(const EigenSingleThreaded&) = delete;
  EigenSingleThreaded& operator=(const EigenSingleThreaded&) = delete;

 private:
  struct State {
    std::mutex mutex;
    int holders = 0;
    int saved = 0;
  };
  static State& state() {
    static State s;
    return s;
  }
};
}  // namespace detail

/// While alive: this thread's FPU rounds in direction `Mode` (FE_UPWARD,
/// FE_DOWNWARD, FE_TONEAREST), and the mode it had is restored on exit. The one
/// set-and-restore of the rounding mode: every other scope is built on it. For a
/// thread of one's own (a worker of a directed product); RoundingScope below
/// also keeps Eigen from handing the work to threads that round to nearest.
template <int Mode>
class ThreadRounding {
 public:
  ThreadRounding() : saved_mode_(std::fegetround()) { std::fesetround(Mode); }
  ~ThreadRounding() { std::fesetround(saved_mode_); }
  ThreadRounding(const ThreadRounding&) = delete;
  ThreadRounding& operator=(const ThreadRounding&) = delete;

 private:
  int saved_mode_;
};

/// While alive: the FPU rounds in direction `Mode` (FE_UPWARD, FE_DOWNWARD) on
/// this thread, and Eigen computes on the calling thread only (for every
/// thread, while any such scope is alive): another thread would round to nearest.
template <int Mode>
class RoundingScope {
 public:
  RoundingScope() = default;
  RoundingScope(const RoundingScope&) = delete;
  RoundingScope& operator=(const RoundingScope&) = delete;

 private:
  detail::EigenSingleThreaded single_;  // first: Eigen is single-threaded before the mode changes
  ThreadRounding<Mode> mode_;
};

/// Upper bounds: every operation rounds toward +infinity while alive.
using UpwardRounding = RoundingScope<FE_UPWARD>;
/// Lower bounds: every operation rounds toward -infinity while alive.
using DownwardRounding = RoundingScope<FE_DOWNWARD>;

namespace detail {
/// Keeps the compiler from evaluating `x` under another rounding mode.
inline void rounding_barrier(const Eigen::MatrixXd& x) { asm volatile("" : : "g"(x.data()) : "memory"); }
inline void rounding_barrier(double& x) { asm volatile("" : "+m"(x) : : "memory"); }
}  // namespace detail

}  // namespace attnrank
