#pragma once
// Rigorous interval matrix products on doubles, by directed rounding.
//
// Why this is sound: in IEEE arithmetic with the rounding mode set to upward,
// every operation returns a value >= its exact result. A matrix product computed
// by any sequence of multiplications, additions and fused multiply-adds of the
// input entries is therefore >= the exact product, entry by entry: if s' >= s and
// t' >= t then fl_up(s' + t') >= s + t, and fl_up(a * b + s') >= a * b + s. So
//     fl_up(A * B)          is an upper bound of A * B, and
//     -fl_up((-A) * B)      is a lower bound (negation is exact),
// whatever order Eigen's blocked GEMM sums in (Rump; Oishi and Rump). Products of
// an interval matrix [Am - Ar, Am + Ar] with a point matrix B use midpoint-radius:
// A B lies in Am B +- Ar |B|, with the radius product rounded upward too.
//
// What this needs, and what the header enforces or states:
//  * the rounding mode is honoured by every thread that computes: the mode is
//    per thread and Eigen's OpenMP threads do not inherit it, so an
//    `UpwardRounding` scope makes Eigen run on one thread, the second GEMM of a
//    pair runs on a std::thread that sets its own mode, and an external BLAS
//    (EIGEN_USE_BLAS) is refused;
//  * no -ffast-math (it enables flush-to-zero and reassociation tricks);
//  * the compiler must not move floating-point operations across the mode
//    switch: attnrank's CMake target adds -frounding-math for that reason.
// Overflow is not a hole: an infinite or NaN bound makes every later test fail,
// so a certificate can be lost but never forged.

#if defined(__FAST_MATH__)
#error "attnrank's certified double arithmetic is unsound under -ffast-math"
#endif
#if defined(EIGEN_USE_BLAS)
#error "attnrank's certified double arithmetic needs Eigen's own GEMM (an external BLAS may ignore the rounding mode)"
#endif

#include <attnrank/numbers/tiers.hpp>

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

/// An interval matrix on doubles as entrywise bounds: lo <= X <= hi.
struct BoundsMatrix {
  Eigen::MatrixXd lo, hi;
};

/// An interval matrix as midpoint and radius: |X - mid| <= rad (rad >= 0).
struct BallMatrix {
  Eigen::MatrixXd mid, rad;
};

namespace detail {
/// Keeps the compiler from evaluating `x` under another rounding mode.
inline void rounding_barrier(const Eigen::MatrixXd& x) { asm volatile("" : : "g"(x.data()) : "memory"); }
inline void rounding_barrier(double& x) { asm volatile("" : "+m"(x) : : "memory"); }
}  // namespace detail

namespace detail {
/// Set on a thread that already runs beside others (a row block of a larger
/// job): its directed pairs then stay on it instead of starting a thread each.
inline thread_local bool serial_directed_products = false;

/// While alive, directed products on this thread run on this thread only.
class SerialDirectedProducts {
 public:
  SerialDirectedProducts() : saved_(serial_directed_products) { serial_directed_products = true; }
  ~SerialDirectedProducts() { serial_directed_products = saved_; }
  SerialDirectedProducts(const SerialDirectedProducts&) = delete;
  SerialDirectedProducts& operator=(const SerialDirectedProducts&) = delete;

 private:
  bool saved_;
};

/// hi = fl_up(L R) + spread and lo = -(fl_up((-L) R) + spread), so lo <= L R +- spread
/// <= hi. For big products the two GEMMs run on two threads; each thread sets its
/// own rounding mode (the mode is per thread).
BoundsMatrix directed_pair(const Eigen::MatrixXd& L, const Eigen::MatrixXd& R, const Eigen::MatrixXd& spread);
/// out = fl_up(L R), or out += fl_up(L R) when `accumulate`: an upper bound of
/// L R (plus out). A big product is split by columns of R over two threads, each
/// rounding upward on its own (the spread of a ball product would otherwise run
/// on one core while the directed pair after it uses two).
void upward_product(Eigen::MatrixXd& out, const Eigen::MatrixXd& L, const Eigen::MatrixXd& R, bool accumulate);

}  // namespace detail

/// Entrywise bounds of the exact product A B of two point matrices.
BoundsMatrix certified_product_bounds(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B);

/// Entrywise bounds of X B for every X in the ball A and the point matrix B.
BoundsMatrix certified_product_bounds(const BallMatrix& A, const Eigen::MatrixXd& B);

/// Entrywise bounds of A X for the point matrix A and every X in the ball B.
BoundsMatrix certified_product_bounds(const Eigen::MatrixXd& A, const BallMatrix& B);

/// Entrywise bounds of X Y for every X in the ball A and Y in the ball B (Rump's
/// midpoint-radius product): X Y - Am Bm = (X - Am) Y + Am (Y - Bm), so
/// |X Y - Am Bm| <= Ar (|Bm| + Br) + |Am| Br, that radius product rounded upward.
/// Four GEMMs in all, whatever the radii.
BoundsMatrix certified_product_bounds(const BallMatrix& A, const BallMatrix& B);

/// Upper bound of the infinity norm (max row sum of |x|) over the bounds.
double norm_inf_upper(const BoundsMatrix& b);

/// Bounds of I - X for X within the bounds b (square).
BoundsMatrix identity_minus(const BoundsMatrix& b);

}  // namespace attnrank
