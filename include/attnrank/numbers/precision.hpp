#pragma once
// The run-time precision of the Real and Interval tiers: the range of working
// precisions, the one rule that turns decimals into bits, and PrecisionScope,
// which sets the precision of every value created while it lives.
//
// Guarantee: inside a PrecisionScope(bits), every Real and Interval created on
// this thread (or on a worker of its computation, numbers/detail/parallel.hpp)
// has at least `bits` bits, even with analyses at other precisions in other
// threads (they wait: detail::PrecisionGate).

#include <attnrank/numbers/tiers.hpp>

#include <condition_variable>
#include <mutex>
#include <vector>

namespace attnrank {

/// Smallest and largest working precisions accepted anywhere, in bits.
inline constexpr unsigned min_precision_bits = 24;
inline constexpr unsigned max_precision_bits = 1u << 20;

/// Boost 1.74 counts precision in decimal digits; this is the digit count whose
/// binary precision is at least `bits`.
inline unsigned digits10_for_bits(unsigned bits) { return (bits * 301u + 999u) / 1000u; }

/// The binary precision Boost actually allocates for `digits10` decimal digits.
inline unsigned bits_for_digits10(unsigned digits10) {
  return static_cast<unsigned>(boost::multiprecision::detail::digits10_2_2(digits10));
}

/// The working precision to start from for `decimals` certified decimals after
/// the point: ceil(decimals log2 10) bits for the digits, 64 more for numbers up
/// to 2^64 in magnitude and for the error the computation accumulates. The one
/// rule of the toolkit: every command and routine that turns a digit count into
/// bits asks here (a computation that cannot certify them raises it further).
inline unsigned bits_for_decimals(int decimals) {
  return static_cast<unsigned>(std::ceil(decimals * 3.3219280948873623)) + 64;
}

namespace detail {
/// Boost's default precision of `Real` and `Interval` is one process-wide value.
/// The gate lets any number of threads hold it at one precision, and makes a
/// thread that needs another wait until no thread holds it, so that every value a
/// scope creates has the scope's precision even with analyses in several threads.
/// A waiting thread holds nothing (a nested scope gives back its thread's share
/// while it runs), so no two threads wait for each other.
struct PrecisionGate {
  std::mutex mutex;
  std::condition_variable changed;
  unsigned digits10 = 0;  ///< the precision held, while holders > 0
  int holders = 0;
  unsigned saved_real = 0, saved_interval = 0;  ///< the defaults before the first holder
};
inline PrecisionGate& precision_gate() {
  static PrecisionGate g;
  return g;
}
/// The digits10 of this thread's open scopes, innermost last.
inline thread_local std::vector<unsigned> precision_stack;
/// Set on a worker thread of a computation that holds the gate (numbers/detail/parallel.hpp):
/// its scopes belong to that computation and take the precision without waiting.
inline thread_local bool precision_worker = false;

/// Takes one share of the gate at `digits10` (waiting while others hold another).
inline void acquire_precision(unsigned digits10) {
  PrecisionGate& g = precision_gate();
  std::unique_lock<std::mutex> lock(g.mutex);
  g.changed.wait(lock, [&] { return g.holders == 0 || g.digits10 == digits10; });
  if (g.holders == 0) {
    g.saved_real = Real::default_precision();
    g.saved_interval = Interval::default_precision();
    g.digits10 = digits10;
    Real::default_precision(digits10);
    Interval::default_precision(digits10);
  }
  ++g.holders;
}

inline void release_precision() {
  PrecisionGate& g = precision_gate();
  {
    const std::lock_guard<std::mutex> lock(g.mutex);
    if (--g.holders == 0) {
      Real::default_precision(g.saved_real);
      Interval::default_precision(g.saved_interval);
    }
  }
  g.changed.notify_all();
}
}  // namespace detail

/// Sets the precision of every `Real` and `Interval` created while it lives, and
/// restores the previous precision on exit. `bits()` is the precision in force
/// (at least the requested bits; Boost rounds up to whole decimal digits).
/// Scopes nest; in several threads at once, scopes at one precision run side by
/// side and a scope at another waits for them (detail::PrecisionGate).
class PrecisionScope {
 public:
  explicit PrecisionScope(unsigned bits)
      : saved_real_(Real::default_precision()), saved_interval_(Interval::default_precision()) {
    const unsigned d10 = digits10_for_bits(bits);
    if (detail::precision_worker) {  // the computation that started this thread holds the gate
      Real::default_precision(d10);
      Interval::default_precision(d10);
      return;
    }
    if (!detail::precision_stack.empty()) detail::release_precision();  // the outer scope waits meanwhile
    detail::acquire_precision(d10);
    detail::precision_stack.push_back(d10);
  }
  ~PrecisionScope() {
    if (detail::precision_worker) {
      Real::default_precision(saved_real_);
      Interval::default_precision(saved_interval_);
      return;
    }
    detail::precision_stack.pop_back();
    detail::release_precision();
    if (!detail::precision_stack.empty()) detail::acquire_precision(detail::precision_stack.back());
  }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

  static unsigned bits() { return bits_for_digits10(Interval::default_precision()); }

 private:
  unsigned saved_real_;
  unsigned saved_interval_;
};

}  // namespace attnrank
