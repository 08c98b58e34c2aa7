#pragma once
// Independent work on threads: row blocks, for the multiple-precision tiers (the
// rows of a product and of a softmax are independent, and an MPFR multiply-add or
// exponential costs tens of nanoseconds to microseconds, so dealing rows to the
// machine's cores pays from a few thousand operations on), and two jobs side by
// side. Double matrix products do not come here: Eigen and the directed-rounding
// product have their own threading; the approximate question deals out its widths
// and its two independent searches. A directed-rounding scope is per thread, so
// each job sets its own.
//
// Threads read shared inputs and write disjoint rows; MPFR keeps its flags,
// exponent range and constant caches per thread (Debian builds it thread-safe),
// and each worker frees its caches before it ends. Boost's default precision is
// one global value, read by the workers: a worker of a caller inside a
// PrecisionScope belongs to that caller's share of the precision gate
// (numbers/tiers.hpp), so its own scopes do not wait for the caller.
//
// ATTNRANK_THREADS=k (environment) caps the threads at k; 1 turns threading off.

#include <attnrank/numbers/tiers.hpp>

#include <mpfr.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

namespace attnrank::detail {

/// The number of threads row-parallel loops may use.
inline unsigned row_threads() {
  static const unsigned count = [] {
    unsigned n = std::max(1u, std::thread::hardware_concurrency());
    if (const char* cap = std::getenv("ATTNRANK_THREADS")) {
      const long k = std::strtol(cap, nullptr, 10);
      if (k >= 1) n = std::min<unsigned>(n, static_cast<unsigned>(k));
    }
    return n;
  }();
  return count;
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

}  // namespace attnrank::detail
