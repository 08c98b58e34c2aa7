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
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

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
inline BoundsMatrix directed_pair(const Eigen::MatrixXd& L, const Eigen::MatrixXd& R, const Eigen::MatrixXd& spread) {
  BoundsMatrix out;
  UpwardRounding up;
  std::exception_ptr failure_hi, failure_lo;
  // Each half sets the mode of the thread it runs on and restores it after, so a
  // pooled (OpenMP) thread goes back to its owner's rounding.
  const auto half = [&](bool upper) {
    const ThreadRounding<FE_UPWARD> rounding;
    try {
      Eigen::MatrixXd& target = upper ? out.hi : out.lo;
      if (upper) {
        target.noalias() = L * R;
      } else {
        const Eigen::MatrixXd negL = -L;
        target.noalias() = negL * R;
      }
      if (spread.size()) target += spread;
      rounding_barrier(target);
    } catch (...) {
      (upper ? failure_hi : failure_lo) = std::current_exception();
    }
  };
  const bool big = !serial_directed_products && static_cast<double>(L.rows()) * static_cast<double>(L.cols()) * static_cast<double>(R.cols()) >= 4e6;
#if defined(_OPENMP)
  // With OpenMP, use its pool: a separate std::thread would fight its spinning workers.
#pragma omp parallel sections num_threads(2) if (big)
  {
#pragma omp section
    half(true);
#pragma omp section
    half(false);
  }
#else
  if (big) {
    std::thread worker(half, false);
    half(true);
    worker.join();
  } else {
    half(true);
    half(false);
  }
#endif
  if (failure_hi) std::rethrow_exception(failure_hi);
  if (failure_lo) std::rethrow_exception(failure_lo);
  out.lo = -out.lo;
  return out;
}
/// out = fl_up(L R), or out += fl_up(L R) when `accumulate`: an upper bound of
/// L R (plus out). A big product is split by columns of R over two threads, each
/// rounding upward on its own (the spread of a ball product would otherwise run
/// on one core while the directed pair after it uses two).
inline void upward_product(Eigen::MatrixXd& out, const Eigen::MatrixXd& L, const Eigen::MatrixXd& R, bool accumulate) {
  UpwardRounding up;
  if (!accumulate) out.setZero(L.rows(), R.cols());
  const bool big = !serial_directed_products && R.cols() >= 2 &&
                   static_cast<double>(L.rows()) * static_cast<double>(L.cols()) * static_cast<double>(R.cols()) >= 4e6;
  if (!big) {
    out.noalias() += L * R;
    rounding_barrier(out);
    return;
  }
  const Eigen::Index half = R.cols() / 2;
  std::exception_ptr failure;
  std::thread worker([&] {
    const ThreadRounding<FE_UPWARD> rounding;
    try {
      out.rightCols(R.cols() - half).noalias() += L * R.rightCols(R.cols() - half);
      rounding_barrier(out);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  out.leftCols(half).noalias() += L * R.leftCols(half);
  worker.join();
  rounding_barrier(out);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace detail

/// Entrywise bounds of the exact product A B of two point matrices.
inline BoundsMatrix certified_product_bounds(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B) {
  return detail::directed_pair(A, B, Eigen::MatrixXd());
}

/// Entrywise bounds of X B for every X in the ball A and the point matrix B.
inline BoundsMatrix certified_product_bounds(const BallMatrix& A, const Eigen::MatrixXd& B) {
  Eigen::MatrixXd spread;
  if ((A.rad.array() != 0).any()) detail::upward_product(spread, A.rad, B.cwiseAbs(), false);
  return detail::directed_pair(A.mid, B, spread);
}

/// Entrywise bounds of A X for the point matrix A and every X in the ball B.
inline BoundsMatrix certified_product_bounds(const Eigen::MatrixXd& A, const BallMatrix& B) {
  Eigen::MatrixXd spread;
  if ((B.rad.array() != 0).any()) detail::upward_product(spread, A.cwiseAbs(), B.rad, false);
  return detail::directed_pair(A, B.mid, spread);
}

/// Entrywise bounds of X Y for every X in the ball A and Y in the ball B (Rump's
/// midpoint-radius product): X Y - Am Bm = (X - Am) Y + Am (Y - Bm), so
/// |X Y - Am Bm| <= Ar (|Bm| + Br) + |Am| Br, that radius product rounded upward.
/// Four GEMMs in all, whatever the radii.
inline BoundsMatrix certified_product_bounds(const BallMatrix& A, const BallMatrix& B) {
  const bool a_point = (A.rad.array() == 0).all(), b_point = (B.rad.array() == 0).all();
  if (a_point && b_point) return detail::directed_pair(A.mid, B.mid, Eigen::MatrixXd());
  Eigen::MatrixXd spread;
  if (!b_point) detail::upward_product(spread, A.mid.cwiseAbs(), B.rad, false);
  if (!a_point) {
    Eigen::MatrixXd reach;
    {
      UpwardRounding up;
      reach = B.mid.cwiseAbs() + B.rad;
      detail::rounding_barrier(reach);
    }
    detail::upward_product(spread, A.rad, reach, !b_point);
  }
  return detail::directed_pair(A.mid, B.mid, spread);
}

/// Upper bound of the infinity norm (max row sum of |x|) over the bounds.
inline double norm_inf_upper(const BoundsMatrix& b) {
  UpwardRounding up;
  const Eigen::MatrixXd mag = b.lo.cwiseAbs().cwiseMax(b.hi.cwiseAbs());
  double worst = 0;
  for (Eigen::Index i = 0; i < mag.rows(); ++i) {
    double s = 0;
    for (Eigen::Index j = 0; j < mag.cols(); ++j) s += mag(i, j);
    if (std::isnan(s)) return s;  // a NaN bound proves nothing; callers test "< 1"
    if (s > worst) worst = s;
  }
  detail::rounding_barrier(worst);
  return worst;
}

/// Bounds of I - X for X within the bounds b (square).
inline BoundsMatrix identity_minus(const BoundsMatrix& b) {
  BoundsMatrix out;
  UpwardRounding up;
  const Eigen::MatrixXd I = Eigen::MatrixXd::Identity(b.lo.rows(), b.lo.cols());
  out.hi = I - b.lo;
  out.lo = b.hi - I;
  detail::rounding_barrier(out.lo);
  out.lo = -out.lo;
  return out;
}

}  // namespace attnrank
