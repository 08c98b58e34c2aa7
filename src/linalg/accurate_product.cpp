// Accurate products of double matrices (attnrank/linalg/accurate_product.hpp):
// exact slice GEMMs, TwoSum, and directed rounding for the small rest.
#include <attnrank/linalg/accurate_product.hpp>

#include <mpfr.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace attnrank {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;

constexpr int min_scale = -400, max_scale = 400;

/// M = first + second + rest exactly, each slice on its row's (or column's) scale.
struct Slices {
  MatrixXd first, second, rest;
};

/// beta with k 2^(2 beta) <= 2^53: slice products of inner dimension k are exact.
int slice_bits(Index k) {
  int log2k = 0;
  while ((Index{1} << log2k) < k) ++log2k;
  return (53 - log2k) / 2;
}

/// The splitting constants of each row (or column): sigma1 = 0.75 2^(tau - beta + 53)
/// and sigma2 = 0.75 2^(tau - 2 beta + 53), tau the line's scale exponent (every
/// |entry| <= 2^tau); 0 for a zero or empty line. False when a scale is outside
/// [min_scale, max_scale] or an entry is not finite.
bool scales(const MatrixXd& M, bool by_rows, Eigen::VectorXd& sigma1, Eigen::VectorXd& sigma2, int beta) {
  const Index lines = by_rows ? M.rows() : M.cols(), length = by_rows ? M.cols() : M.rows();
  sigma1.resize(lines);
  sigma2.resize(lines);
  if (!M.allFinite()) return false;  // before maxCoeff, which need not see a NaN
  for (Index i = 0; i < lines; ++i) {
    const double top = length == 0 ? 0.0 : by_rows ? M.row(i).cwiseAbs().maxCoeff() : M.col(i).cwiseAbs().maxCoeff();
    if (top == 0) {
      sigma1(i) = sigma2(i) = 0;
      continue;
    }
    int tau = 0;
    std::frexp(top, &tau);  // top = m 2^tau, m in [1/2, 1): top <= 2^tau
    if (tau < min_scale || tau > max_scale) return false;
    // fl(x + sigma) - sigma rounds x to a multiple of ulp(sigma + x) = 2^(tau - beta),
    // since sigma + x stays in [2^(s-1), 2^s) for s = tau - beta + 53 (beta <= 51).
    sigma1(i) = std::ldexp(0.75, tau - beta + 53);
    sigma2(i) = std::ldexp(0.75, tau - 2 * beta + 53);
  }
  return true;
}

bool split(const MatrixXd& M, bool by_rows, int beta, Slices& out) {
  Eigen::VectorXd s1, s2;
  if (!scales(M, by_rows, s1, s2, beta)) return false;
  out.first.resize(M.rows(), M.cols());
  out.second.resize(M.rows(), M.cols());
  out.rest.resize(M.rows(), M.cols());
  for (Index j = 0; j < M.cols(); ++j)
    for (Index i = 0; i < M.rows(); ++i) {
      const double a = by_rows ? s1(i) : s1(j), b = by_rows ? s2(i) : s2(j);
      double x = M(i, j);
      double f = x + a;
      detail::rounding_barrier(f);
      f -= a;
      const double r = x - f;  // exact: f is x rounded to a coarser grid
      double g = r + b;
      detail::rounding_barrier(g);
      g -= b;
      out.first(i, j) = f;
      out.second(i, j) = g;
      out.rest(i, j) = r - g;
    }
  return true;
}

/// A B + L R +- rad (the extra terms when given: L R a point product, rad >= 0 a
/// radius), as a double-double ball.
struct Extra {
  const MatrixXd* left = nullptr;
  const MatrixXd* right = nullptr;
  MatrixXd rad;
};

std::optional<DoubleDoubleBall> product(const MatrixXd& A, const MatrixXd& B, const Extra& extra) {
  // Round to nearest on this thread (TwoSum needs it), whatever the caller's mode;
  // Eigen's thread count is left alone (the exact GEMMs are exact in any mode).
  const ThreadRounding<FE_TONEAREST> nearest;
  const int beta = slice_bits(std::max<Index>(A.cols(), 1));
  Slices a, b;
  if (!split(A, true, beta, a) || !split(B, false, beta, b)) return std::nullopt;
  // Exact: every term and partial sum is an integer multiple of the two scales' unit below 2^53.
  const MatrixXd p11 = a.first * b.first, p12 = a.first * b.second, p21 = a.second * b.first,
                 p22 = a.second * b.second;
  // The rest, A B3 + A3 (B1 + B2) (+ L R), as one directed pair over the inner
  // dimension 2k (+ the extra's); B1 + B2 is exact: B rounded to the second grid.
  const Index k = A.cols(), k_extra = extra.left ? extra.left->cols() : 0;
  MatrixXd left(A.rows(), 2 * k + k_extra), right(2 * k + k_extra, B.cols());
  left.leftCols(k) = A;
  left.middleCols(k, k) = a.rest;
  right.topRows(k) = b.rest;
  right.middleRows(k, k) = b.first + b.second;
  if (extra.left) {
    left.rightCols(k_extra) = *extra.left;
    right.bottomRows(k_extra) = *extra.right;
  }
  const BoundsMatrix rest = certified_product_bounds(left, right);
  DoubleDoubleBall out{MatrixXd(A.rows(), B.cols()), MatrixXd(A.rows(), B.cols()), MatrixXd(A.rows(), B.cols())};
  const Index size = out.hi.size();
  double* hi = out.hi.data();
  double* e1 = out.lo.data();  // scratch until the last loop
  double* e2 = out.rad.data();
  // Knuth's TwoSum twice, to nearest: hi + e1 + e2 = p11 + p12 + p21 exactly.
  for (Index t = 0; t < size; ++t) {
    const double x = p11.data()[t], y = p12.data()[t], z = p21.data()[t];
    const double s1 = x + y, v1 = s1 - x;
    e1[t] = (x - (s1 - v1)) + (y - v1);
    const double s2 = s1 + z, v2 = s2 - s1;
    e2[t] = (s1 - (s2 - v2)) + (z - v2);
    hi[t] = s2;
  }
  if (!out.hi.allFinite()) return std::nullopt;
  {
    // The rest e1 + e2 + p22 + [rest], summed upward for its upper and (negated)
    // lower bound; lo is any double between, rad covers both and the extra radius.
    UpwardRounding up;
    const double* q = p22.data();
    const double *rh = rest.hi.data(), *rl = rest.lo.data();
    const double* xr = extra.rad.size() ? extra.rad.data() : nullptr;
    for (Index t = 0; t < size; ++t) {
      const double upper = e1[t] + e2[t] + q[t] + rh[t];
      const double neg_lower = -e1[t] - e2[t] - q[t] - rl[t];
      const double mid = 0.5 * (upper - neg_lower);
      e1[t] = mid;  // out.lo
      const double r = std::max(upper - mid, mid + neg_lower);
      e2[t] = xr ? r + xr[t] : r;  // out.rad; a NaN leaves lo NaN
    }
    detail::rounding_barrier(out.lo);
    detail::rounding_barrier(out.rad);
  }
  if (!out.lo.allFinite() || !out.rad.allFinite()) return std::nullopt;
  return out;
}

void require_shapes(const MatrixXd& A, const MatrixXd& B) {
  if (A.cols() != B.rows()) throw std::invalid_argument("accurate_product: inner dimensions differ");
}

void require_shapes(const DoubleDoubleBall& X) {
  if (X.lo.rows() != X.hi.rows() || X.lo.cols() != X.hi.cols() || X.rad.rows() != X.hi.rows() ||
      X.rad.cols() != X.hi.cols())
    throw std::invalid_argument("accurate_product: hi, lo and rad of the ball differ in shape");
}

}  // namespace

std::optional<DoubleDoubleBall> accurate_product(const MatrixXd& A, const MatrixXd& B) {
  require_shapes(A, B);
  return product(A, B, Extra{});
}

// A X = A hi + A lo +- |A| rad: A lo is ~2^-53 of A hi, so directed rounding is
// accurate enough for it, and it joins the rest's directed pair; |A| rad is one
// GEMM rounded upward.
std::optional<DoubleDoubleBall> accurate_product(const MatrixXd& A, const DoubleDoubleBall& X) {
  require_shapes(X);
  require_shapes(A, X.hi);
  if (!X.lo.allFinite() || !X.rad.allFinite()) return std::nullopt;
  Extra extra{&A, &X.lo, MatrixXd()};
  {
    UpwardRounding up;
    extra.rad.noalias() = A.cwiseAbs() * X.rad;
    detail::rounding_barrier(extra.rad);
  }
  return product(A, X.hi, extra);
}

std::optional<DoubleDoubleBall> accurate_product(const DoubleDoubleBall& X, const MatrixXd& B) {
  require_shapes(X);
  require_shapes(X.hi, B);
  if (!X.lo.allFinite() || !X.rad.allFinite()) return std::nullopt;
  Extra extra{&X.lo, &B, MatrixXd()};
  {
    UpwardRounding up;
    extra.rad.noalias() = X.rad * B.cwiseAbs();
    detail::rounding_barrier(extra.rad);
  }
  return product(X.hi, B, extra);
}

}  // namespace attnrank
