// Every leading minor proven nonsingular at once (attnrank/linalg/leading_minors.hpp).
#include <attnrank/linalg/leading_minors.hpp>

#include <attnrank/numbers/balls.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace attnrank {
namespace {

using Eigen::Index;

/// The first column of the ball holding a non-finite midpoint or radius (cols when none).
Index finite_columns(const BallMatrix& H) {
  for (Index j = 0; j < H.mid.cols(); ++j)
    if (!H.mid.col(j).allFinite() || !H.rad.col(j).allFinite()) return j;
  return H.mid.cols();
}

/// Partial-pivot LU of W in place (multipliers below the diagonal, U on and above),
/// rows 0 .. fixed_rows - 1 kept in place, stopped when the best pivot left is at
/// most tol: the number of steps taken. order follows the row swaps.
Index partial_pivot_lu(Eigen::MatrixXd& W, Index fixed_rows, double tol, std::vector<Index>& order) {
  const Index p = W.rows(), d = std::min(W.rows(), W.cols());
  Index k = 0;
  for (; k < d; ++k) {
    Index pivot = k;
    if (k >= fixed_rows) {
      W.col(k).tail(p - k).cwiseAbs().maxCoeff(&pivot);
      pivot += k;
    }
    if (!(std::abs(W(pivot, k)) > tol)) break;
    if (pivot != k) {
      W.row(k).swap(W.row(pivot));
      std::swap(order[static_cast<std::size_t>(k)], order[static_cast<std::size_t>(pivot)]);
    }
    const Index below = p - k - 1, right = W.cols() - k - 1;
    W.col(k).tail(below) /= W(k, k);
    W.bottomRightCorner(below, right).noalias() -= W.col(k).tail(below) * W.row(k).tail(right);
  }
  return k;
}

/// The largest m <= size with the leading m x m blocks of X and Y finite (a
/// triangular inverse's leading block depends on the leading factor alone).
Index finite_leading(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y) {
  for (Index j = 0; j < X.rows(); ++j)
    if (!X.row(j).head(j + 1).allFinite() || !Y.col(j).head(j + 1).allFinite()) return j;
  return X.rows();
}

/// max |e| over the bounds [lo, hi] of one entry; +inf for a NaN end.
double entry_magnitude(double lo, double hi) {
  if (std::isnan(lo) || std::isnan(hi)) return std::numeric_limits<double>::infinity();
  return std::max(-lo, hi);
}

}  // namespace

LeadingMinors certified_leading_minors(const BallMatrix& H, Index fixed_rows) {
  const Index p = H.mid.rows();
  if (fixed_rows < 0 || fixed_rows > p)
    throw std::invalid_argument("certified_leading_minors: fixed_rows " + std::to_string(fixed_rows) +
                                " is outside 0 .. " + std::to_string(p));
  LeadingMinors out;
  const Index columns = finite_columns(H);
  if (p == 0 || columns == 0) return out;
  Eigen::MatrixXd W = H.mid.leftCols(columns);
  std::vector<Index> order(static_cast<std::size_t>(p));
  std::iota(order.begin(), order.end(), Index{0});
  // Stopped at the numeric rank: pivots below this are rounding noise, and the
  // test could not prove their minors anyway.
  const double tol = std::numeric_limits<double>::epsilon() * static_cast<double>(std::max(p, columns)) *
                     W.cwiseAbs().maxCoeff();
  Index m = partial_pivot_lu(W, fixed_rows, tol, order);
  if (m == 0) return out;
  // Exactly triangular by construction: the leading-block identity needs it.
  Eigen::MatrixXd X = Eigen::MatrixXd::Identity(m, m), Y = Eigen::MatrixXd::Identity(m, m);
  W.topLeftCorner(m, m).triangularView<Eigen::UnitLower>().solveInPlace(X);
  W.topLeftCorner(m, m).triangularView<Eigen::Upper>().solveInPlace(Y);
  X = X.triangularView<Eigen::Lower>().toDenseMatrix();
  Y = Y.triangularView<Eigen::Upper>().toDenseMatrix();
  m = finite_leading(X, Y);
  if (m == 0) return out;
  const std::vector<Index> rows(order.begin(), order.begin() + m);
  std::vector<Index> cols(static_cast<std::size_t>(m));
  std::iota(cols.begin(), cols.end(), Index{0});
  const BallMatrix G{H.mid(rows, cols), H.rad(rows, cols)};
  const BoundsMatrix XG = certified_product_bounds(Eigen::MatrixXd(X.topLeftCorner(m, m)), G);
  const BoundsMatrix E = identity_minus(certified_product_bounds(to_ball(XG), Eigen::MatrixXd(Y.topLeftCorner(m, m))));
  // ||E_k||_inf for k = 1 .. m: each row's sum over the leading k columns, grown
  // by one column (and one row) per step, in upward rounding.
  std::vector<double> sums(static_cast<std::size_t>(m), 0.0);
  {
    UpwardRounding up;
    for (Index k = 0; k < m; ++k) {
      double worst = 0, row = 0;
      for (Index i = 0; i < k; ++i) {
        double& s = sums[static_cast<std::size_t>(i)];
        s += entry_magnitude(E.lo(i, k), E.hi(i, k));
        worst = std::max(worst, s);
      }
      for (Index j = 0; j <= k; ++j) row += entry_magnitude(E.lo(k, j), E.hi(k, j));
      sums[static_cast<std::size_t>(k)] = row;
      worst = std::max(worst, row);
      detail::rounding_barrier(worst);
      if (!(worst < 1)) break;
      out.residual.push_back(worst);
    }
  }
  out.proven = static_cast<Index>(out.residual.size());
  out.order.assign(order.begin(), order.begin() + out.proven);
  return out;
}

}  // namespace attnrank
