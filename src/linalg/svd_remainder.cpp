// The remainder of a truncated SVD and the upper bounds it gives
// (attnrank/linalg/detail/svd_remainder.hpp).
#include <attnrank/linalg/detail/svd_remainder.hpp>

#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/numbers/detail/infinity.hpp>

#include <algorithm>
#include <cmath>

namespace attnrank::detail {
namespace {

using Eigen::Index;

/// What one thread's panels add to the norms (all sums rounded up).
struct PartialNorms {
  double frobenius2 = 0;
  double max_column_sum = 0;
  double guard = 0;  ///< sum of the two one-sided bounds: not finite when one of them is not
  Eigen::VectorXd row_sums;
};

/// Folds the panels [first, last) of R = X - Z V^T into `out`; call with upward
/// rounding on the calling thread. Per entry, with hi >= (Z V^T)_ij and
/// nlo >= -(Z V^T)_ij: R <= mid + nlo + rad and -R <= hi - mid + rad, so
/// |R| <= the larger of the two (each rounded up, each >= its side).
template <bool point>
void fold_panels(const BallView& M, const Eigen::MatrixXd& Z, const Eigen::MatrixXd& negZ, const Eigen::MatrixXd& Vt,
                 Index panel, Index first, Index last, PartialNorms& out) {
  const Index m = M.mid.rows(), n = M.mid.cols();
  out.row_sums = Eigen::VectorXd::Zero(m);
  double* row_sums = out.row_sums.data();
  Eigen::MatrixXd hi, nlo;
  for (Index p = first; p < last; ++p) {
    const Index j0 = p * panel, w = std::min(panel, n - j0);
    hi.noalias() = Z * Vt.middleCols(j0, w);
    nlo.noalias() = negZ * Vt.middleCols(j0, w);
    rounding_barrier(hi);
    rounding_barrier(nlo);
    for (Index j = 0; j < w; ++j) {
      const double* x = M.mid.col(j0 + j).data();
      const double* r = point ? nullptr : M.rad->col(j0 + j).data();
      const double* h = hi.col(j).data();
      const double* l = nlo.col(j).data();
      double column = 0, squares = 0, guard = 0;
      for (Index i = 0; i < m; ++i) {
        double a = x[i] + l[i], b = h[i] - x[i];
        if constexpr (!point) {
          a += r[i];
          b += r[i];
        }
        const double v = a < b ? b : a;
        squares += v * v;
        column += v;
        row_sums[i] += v;
        guard += a + b;
      }
      rounding_barrier(squares);
      rounding_barrier(column);
      rounding_barrier(guard);
      out.frobenius2 += squares;
      out.guard += guard;
      out.max_column_sum = std::max(out.max_column_sum, column);
    }
  }
}

/// An upper bound on the product of any x in [a_lo, a_hi] and y in [b_lo, b_hi]
/// (call with upward rounding on).
double product_upper(double a_lo, double a_hi, double b_lo, double b_hi) {
  return std::max(std::max(a_lo * b_lo, a_lo * b_hi), std::max(a_hi * b_lo, a_hi * b_hi));
}

}  // namespace

BoundsMatrix minus_point(const BoundsMatrix& b, const Eigen::MatrixXd& D) {
  BoundsMatrix out;
  UpwardRounding up;
  out.hi = b.hi - D;
  out.lo = D - b.lo;
  rounding_barrier(out.hi);
  rounding_barrier(out.lo);
  out.lo = -out.lo;
  return out;
}

RemainderNorms remainder_norms(const BallView& M, const Eigen::MatrixXd& Z, const Eigen::MatrixXd& V, Index panel,
                               int threads) {
  const Index m = M.mid.rows(), n = M.mid.cols();
  RemainderNorms out;
  if (m == 0 || n == 0) return out;
  panel = std::max<Index>(panel, 1);
  const Index panels = (n + panel - 1) / panel;
  const Eigen::MatrixXd Vt = V.transpose(), negZ = -Z;
  UpwardRounding up;
  PartialNorms parts[2];
  const auto fold = [&](PartialNorms& part, Index first, Index last) {
    if (M.rad) fold_panels<false>(M, Z, negZ, Vt, panel, first, last, part);
    else fold_panels<true>(M, Z, negZ, Vt, panel, first, last, part);
  };
  if (threads >= 2 && panels >= 2) {
    const Index half = panels / 2;
    run_side_by_side(
        [&] {
          const ThreadRounding<FE_UPWARD> rounding;  // the mode is per thread
          fold(parts[1], half, panels);
        },
        [&] { fold(parts[0], 0, half); });
  } else {
    fold(parts[0], 0, panels);
    parts[1].row_sums = Eigen::VectorXd::Zero(m);
  }
  double frobenius2 = parts[0].frobenius2 + parts[1].frobenius2;
  double guard = parts[0].guard + parts[1].guard;
  Eigen::VectorXd row_sums = parts[0].row_sums + parts[1].row_sums;
  rounding_barrier(frobenius2);
  rounding_barrier(guard);
  rounding_barrier(row_sums);
  if (!std::isfinite(guard) || !std::isfinite(frobenius2)) return {inf, inf};
  double frobenius = std::sqrt(frobenius2);
  double mixed = std::sqrt(row_sums.maxCoeff() * std::max(parts[0].max_column_sum, parts[1].max_column_sum));
  rounding_barrier(frobenius);
  rounding_barrier(mixed);
  out.frobenius2 = frobenius2;
  out.norm2 = std::isfinite(mixed) ? std::min(frobenius, mixed) : frobenius;
  return out;
}

RemainderNorms remainder_norms(const BallView& M, const Eigen::MatrixXd& Z, const Eigen::MatrixXd& V) {
  // 64 columns of two panels of Z V^T stay in a core's cache with the columns of X
  // they meet; a second thread pays for itself from about the size of a directed
  // pair's (directed_rounding.hpp).
  const double work = static_cast<double>(M.mid.rows()) * static_cast<double>(M.mid.cols()) * static_cast<double>(Z.cols());
  return remainder_norms(M, Z, V, 64, !serial_directed_products && work >= 4e6 ? 2 : 1);
}

std::vector<double> remainder_upper_bounds(const BallView& M, const TruncatedCertificate& c, const Eigen::VectorXd& s,
                                           const std::vector<double>& sorted) {
  const Index k = c.Z.cols();
  const RemainderNorms r = remainder_norms(M, c.Z, c.V);
  const BoundsMatrix GZ = certified_product_bounds(Eigen::MatrixXd(c.Z.transpose()), c.Z);
  // R V = X V - Z (V^T V) for every X, so Y encloses it without forming R.
  const BoundsMatrix ZG = certified_product_bounds(c.Z, to_ball(c.GV));
  BoundsMatrix Y;
  {
    DownwardRounding down;
    Y.lo = c.MV.lo - ZG.hi;
    rounding_barrier(Y.lo);
  }
  {
    UpwardRounding up;
    Y.hi = c.MV.hi - ZG.lo;
    rounding_barrier(Y.hi);
  }
  Eigen::MatrixXd D = Eigen::MatrixXd::Zero(k, k);
  {
    UpwardRounding up;
    for (Index i = 0; i < k; ++i) D(i, i) = s(i) * s(i);
  }
  // ||Z^T Z - diag(s^2)||_2 for the D rounded up (D is a point matrix: any will do).
  const double ez = norm2_upper(minus_point(GZ, D));
  std::vector<double> upper(static_cast<std::size_t>(k), inf);
  UpwardRounding up;
  double cross = 0, gram = 0;  // sum over t >= i of z_t^T R v_t, and over s, t >= i of the Gram products
  const double root_b = std::sqrt(1 + c.b);
  for (Index i = k - 1; i >= 0; --i) {
    double ci = 0;
    for (Index row = 0; row < c.Z.rows(); ++row)
      ci += std::max(c.Z(row, i) * Y.lo(row, i), c.Z(row, i) * Y.hi(row, i));
    cross += ci;
    gram += product_upper(GZ.lo(i, i), GZ.hi(i, i), c.GV.lo(i, i), c.GV.hi(i, i));
    for (Index j = i + 1; j < k; ++j)
      gram += product_upper(GZ.lo(i, j), GZ.hi(i, j), c.GV.lo(i, j), c.GV.hi(i, j)) +
              product_upper(GZ.lo(j, i), GZ.hi(j, i), c.GV.lo(j, i), c.GV.hi(j, i));
    double f2 = r.frobenius2 + 2 * cross + gram;
    rounding_barrier(f2);
    const double frobenius = f2 > 0 ? std::sqrt(f2) : 0.0;
    const double si = static_cast<std::size_t>(i) < sorted.size() ? sorted[static_cast<std::size_t>(i)] : 0.0;
    double weyl = root_b * std::sqrt(si * si + ez) + r.norm2;
    rounding_barrier(weyl);
    const double best = std::min(std::isnan(frobenius) ? inf : frobenius, std::isnan(weyl) ? inf : weyl);
    upper[static_cast<std::size_t>(i)] = std::isfinite(best) ? best : inf;
  }
  return upper;
}

}  // namespace attnrank::detail
