#pragma once
// Independent work on threads: row blocks, for the multiple-precision tiers (the
// rows of a product and of a softmax are independent, and an MPFR multiply-add or
// exponential costs tens of nanoseconds to microseconds, so dealing rows to the
// machine's cores pays from a few thousand operations on), and two jobs side by
// side (the halves of a large double product, the approximate question's two
// searches), a job prefetched in the background (BackgroundJob), and a pool for
// independent tasks (the heads of a scan). Eigen itself
// is built without OpenMP here, so its products stay on the calling thread. A
// directed-rounding scope is per thread, so each job sets its own.
//
// Threads read shared inputs and write disjoint rows; MPFR keeps its flags,
// exponent range and constant caches per thread (Debian builds it thread-safe),
// and each worker frees its caches before it ends. Boost's default precision is
// one global value, read by the workers: a worker of a caller inside a
// PrecisionScope belongs to that caller's share of the precision gate
// (numbers/precision.hpp), so its own scopes do not wait for the caller.
//
// Every thread the library starts starts here (a test counts them), so
// ATTNRANK_THREADS=k (environment) caps every parallel part at k threads, a
// scan's jobs included; 1 keeps every computation on the calling thread.

#include <attnrank/numbers/tiers.hpp>

#include <mpfr.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace attnrank::detail {

/// The cap ATTNRANK_THREADS sets (a positive integer), if it is set.
inline std::optional<unsigned> thread_cap() {
  static const std::optional<unsigned> cap = []() -> std::optional<unsigned> {
    if (const char* text = std::getenv("ATTNRANK_THREADS")) {
      const long k = std::strtol(text, nullptr, 10);
      if (k >= 1) return static_cast<unsigned>(std::min<long>(k, 1L << 16));
    }
    return std::nullopt;
  }();
  return cap;
}

/// The number of threads row-parallel loops may use: the cores, capped by
/// ATTNRANK_THREADS.
inline unsigned row_threads() {
  static const unsigned count = [] {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    return thread_cap() ? std::min(n, *thread_cap()) : n;
  }();
  return count;
}

/// The threads for `tasks` independent tasks when the caller asked for `requested`
/// (0: one per core): never more than the tasks or ATTNRANK_THREADS.
inline unsigned task_threads(unsigned requested, std::size_t tasks) {
  unsigned n = requested ? requested : row_threads();
  if (thread_cap()) n = std::min(n, *thread_cap());
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(n, tasks)));
}

/// Calls body(begin, end) on disjoint blocks covering [0, rows), on up to
/// row_threads() threads (the caller's among them) when `operations` (a cost in
/// multi-precision operations) is worth it; otherwise body(0, rows) here.
/// An exception from any block is rethrown after every thread has joined.
template <class Body>
void for_row_blocks(long rows, double operations, const Body& body) {
  constexpr double worth_a_thread = 4096;  // ~0.2 ms of MPFR work: thread start-up is ~50 us
  const long parts = std::min<long>({static_cast<long>(row_threads()), rows,
                                     static_cast<long>(operations / worth_a_thread) + 1});
  if (parts <= 1) {
    body(0L, rows);
    return;
  }
  std::vector<std::exception_ptr> failures(static_cast<std::size_t>(parts));
  const auto block = [&](long p) {
    try {
      body(rows * p / parts, rows * (p + 1) / parts);
    } catch (...) {
      failures[static_cast<std::size_t>(p)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  const bool inside_scope = !precision_stack.empty() || precision_worker;
  for (long p = 1; p < parts; ++p)
    workers.emplace_back([&block, p, inside_scope] {
      precision_worker = inside_scope;
      block(p);
      mpfr_free_cache();  // this thread's constant caches (log 2, pi, ...)
    });
  block(0);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& f : failures)
    if (f) std::rethrow_exception(f);
}

/// Runs `beside` on a second thread while `here` runs on this one (both here, one
/// after the other, when row_threads() is 1): two independent jobs of similar
/// length. An exception from either is rethrown after both have finished.
template <class Beside, class Here>
void run_side_by_side(const Beside& beside, const Here& here) {
  if (row_threads() < 2) {
    beside();
    here();
    return;
  }
  std::exception_ptr failure_beside, failure_here;
  const bool inside_scope = !precision_stack.empty() || precision_worker;
  std::thread worker([&, inside_scope] {
    precision_worker = inside_scope;
    try {
      beside();
    } catch (...) {
      failure_beside = std::current_exception();
    }
    mpfr_free_cache();  // this thread's constant caches
  });
  try {
    here();
  } catch (...) {
    failure_here = std::current_exception();
  }
  worker.join();
  if (failure_here) std::rethrow_exception(failure_here);
  if (failure_beside) std::rethrow_exception(failure_beside);
}

/// A job started now on a thread of its own, to be joined later: work prefetched
/// beside the caller's (a target's entry order sorted while the fit runs). start()
/// starts nothing and returns false when row_threads() < 2 (ATTNRANK_THREADS=1):
/// the caller then computes the result when it needs it. The destructor joins the
/// thread; an exception from the job is dropped there (the caller computes the
/// result again on demand and meets it then).
class BackgroundJob {
 public:
  BackgroundJob() = default;
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;
  ~BackgroundJob() {
    if (thread_.joinable()) thread_.join();
  }

  template <class Job>
  bool start(Job job) {
    if (row_threads() < 2 || thread_.joinable()) return false;
    const bool inside_scope = !precision_stack.empty() || precision_worker;
    thread_ = std::thread([job = std::move(job), inside_scope] {
      precision_worker = inside_scope;
      try {
        job();
      } catch (...) {  // recomputed, and reported, by the caller that needs the result
      }
      mpfr_free_cache();  // this thread's constant caches
    });
    return true;
  }

 private:
  std::thread thread_;
};

/// Runs task(t) for every t in [0, tasks) on task_threads(requested, tasks)
/// threads (the caller's among them), each taking the next task when it is free.
/// After a task throws, no new task starts; the first exception is rethrown
/// after every thread has joined. The tasks are independent questions (a scan's
/// heads), each taking the precision gate for its own scopes: call it outside a
/// PrecisionScope, or a task at another precision would wait for the caller.
template <class Task>
void for_each_task(std::size_t tasks, unsigned requested, const Task& task) {
  const unsigned threads = task_threads(requested, tasks);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex guard;  // the first failure
  std::exception_ptr failure;
  const auto work = [&] {
    for (std::size_t t; !failed.load() && (t = next++) < tasks;) {
      try {
        task(t);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(guard);
        if (!failure) failure = std::current_exception();
        failed.store(true);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k)
    pool.emplace_back([&work] {
      work();
      mpfr_free_cache();  // this thread's constant caches, or they leak with it
    });
  work();
  for (std::thread& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace attnrank::detail
