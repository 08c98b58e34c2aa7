#pragma once
// The four number tiers. Every algorithm is one template over the scalar; these
// aliases name the scalars and the matrices built from them.
//
// | tier      | type       | guarantee                                             |
// |-----------|------------|-------------------------------------------------------|
// | fast      | `double`   | none (IEEE rounding)                                  |
// | high prec | `Real`     | none, but the error shrinks as precision grows        |
// | certified | `Interval` | the true real value lies in the interval              |
// | exact     | `Rational` | exact (and `Integer` for integer-only algorithms)     |
//
// `Real` and `Interval` have run-time precision: values created while a
// `PrecisionScope` is alive get its precision.

#include <boost/multiprecision/eigen.hpp>
#include <boost/multiprecision/gmp.hpp>
#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include <Eigen/Core>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <vector>

// Real -> Interval, exactly. Boost 1.74 has no direct conversion from
// mpfr_float to mpfi_float and falls back to generic_interconvert, which
// rebuilds the value from integer chunks and returns [nan, nan] for some
// finite inputs (0x2.5517dd6892f2863p+60 at 68 bits; found by an audit: a NaN
// certified determinant). This explicit specialisation makes every such
// conversion in the program the outward rounding MPFI itself defines
// (mpfi_set_fr, _q, _z), exact when the interval's precision is at least the
// number's. tests/numbers/tiers.test.cpp checks it.
namespace boost::multiprecision::detail {
template <>
inline void generic_interconvert<backends::mpfi_float_backend<0>, backends::mpfr_float_backend<0, allocate_dynamic>>(
    backends::mpfi_float_backend<0>& to, const backends::mpfr_float_backend<0, allocate_dynamic>& from,
    const mpl::int_<number_kind_floating_point>&, const mpl::int_<number_kind_floating_point>&) {
  mpfi_set_fr(to.data(), from.data());
}
// The same for exact sources, which Boost also converts chunk by chunk.
template <>
inline void generic_interconvert<backends::mpfi_float_backend<0>, backends::gmp_rational>(
    backends::mpfi_float_backend<0>& to, const backends::gmp_rational& from, const mpl::int_<number_kind_floating_point>&,
    const mpl::int_<number_kind_rational>&) {
  mpfi_set_q(to.data(), from.data());
}
template <>
inline void generic_interconvert<backends::mpfi_float_backend<0>, backends::gmp_int>(
    backends::mpfi_float_backend<0>& to, const backends::gmp_int& from, const mpl::int_<number_kind_floating_point>&,
    const mpl::int_<number_kind_integer>&) {
  mpfi_set_z(to.data(), from.data());
}
}  // namespace boost::multiprecision::detail

namespace attnrank {

using Real = boost::multiprecision::mpfr_float;
using Interval = boost::multiprecision::mpfi_float;
using Rational = boost::multiprecision::mpq_rational;
using Integer = boost::multiprecision::mpz_int;

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

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
