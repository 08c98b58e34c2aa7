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

#include <attnrank/numbers/rounding_mode.hpp>
#include <attnrank/numbers/tiers.hpp>

namespace attnrank {

/// An interval matrix on doubles as entrywise bounds: lo <= X <= hi.
struct BoundsMatrix {
  Eigen::MatrixXd lo, hi;
};

/// An interval matrix as midpoint and radius: |X - mid| <= rad (rad >= 0).
struct BallMatrix {
  Eigen::MatrixXd mid, rad;
};

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
