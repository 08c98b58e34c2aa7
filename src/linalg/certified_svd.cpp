// Certified singular values of attnrank/linalg/certified_svd.hpp.
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/linalg/certified_svd.hpp>

#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/linalg/product.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>
#include <attnrank/linalg/detail/svd_remainder.hpp>
#include <attnrank/numbers/balls.hpp>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <functional>
#include <limits>

namespace attnrank {
namespace {

using Eigen::Index;
using detail::inf;

using detail::BallView;

void require_finite(const BallView& M, Index k) {
  if (M.rad && (M.mid.rows() != M.rad->rows() || M.mid.cols() != M.rad->cols()))
    throw input_error("certified singular values: midpoint and radius differ in shape");
  const Index p = std::min(M.mid.rows(), M.mid.cols());
  if (k < 1 || k > p)
    throw input_error("certified singular values: asked for the top " + std::to_string(k) + " of a " +
                      std::to_string(M.mid.rows()) + " x " + std::to_string(M.mid.cols()) +
                      " matrix, which has " + std::to_string(p) + " (use 1 <= k <= min(rows, cols))");
  for (Index j = 0; j < M.mid.cols(); ++j)
    for (Index i = 0; i < M.mid.rows(); ++i) {
      const bool bad = !std::isfinite(M.mid(i, j)) || (M.rad && (!std::isfinite((*M.rad)(i, j)) || (*M.rad)(i, j) < 0));
      if (bad)
        throw input_error("certified singular values: " + entry_text("the matrix", static_cast<long>(i), static_cast<long>(j)) +
                              " is not a finite number in the double range",
                          "", static_cast<long>(i + 1), static_cast<long>(j + 1));
    }
}

/// G encloses Y^T Y and defect >= ||Y^T Y - I||_2, for the point matrix Y.
struct Orthogonality {
  BoundsMatrix gram;
  double defect = 0;
};

Orthogonality orthogonality(const Eigen::MatrixXd& Y) {
  Orthogonality out;
  out.gram = certified_product_bounds(Eigen::MatrixXd(Y.transpose()), Y);
  out.defect = norm2_upper(detail::minus_point(out.gram, Eigen::MatrixXd::Identity(Y.cols(), Y.cols())));
  return out;
}

/// Bounds of X V for every X in the ball M (the directed pair of a point matrix
/// alone, without a zero radius product).
BoundsMatrix product_bounds(const BallView& M, const Eigen::MatrixXd& V) {
  if (!M.rad) return certified_product_bounds(M.mid, V);
  Eigen::MatrixXd spread;
  detail::upward_product(spread, *M.rad, V.cwiseAbs(), false);
  return detail::directed_pair(M.mid, V, spread);
}

struct Triplets {
  Eigen::MatrixXd U, V;
  Eigen::VectorXd s;
  bool full = false;
};

Triplets approximate_triplets(const Eigen::MatrixXd& A, Index k, const SvdOptions& o) {
  Triplets t;
  if (o.upper_bounds && std::max(A.rows(), A.cols()) <= o.full_limit) {
    Eigen::BDCSVD<Eigen::MatrixXd> svd(A, Eigen::ComputeFullU | Eigen::ComputeFullV);
    if (!svd.singularValues().allFinite() || !svd.matrixU().allFinite() || !svd.matrixV().allFinite()) {
      // Eigen 3.4's BDCSVD can return NaN on degenerate input; Jacobi does not.
      const Eigen::JacobiSVD<Eigen::MatrixXd> jacobi(A, Eigen::ComputeFullU | Eigen::ComputeFullV);
      t.U = jacobi.matrixU();
      t.V = jacobi.matrixV();
      t.s = jacobi.singularValues();
    } else {
      t.U = svd.matrixU();
      t.V = svd.matrixV();
      t.s = svd.singularValues();
    }
    t.full = true;
    return t;
  }
  const TruncatedSvd svd = approx_truncated_svd(A, k);
  t.U = svd.U;
  t.V = svd.V;
  t.s = svd.s;
  return t;
}

/// (s - e) / sqrt((1 + a)(1 + b)), rounded down; 0 when s - e <= 0.
double lower_from(double s, double e, double a, double b) {
  double root_up;
  {
    UpwardRounding up;
    double p = (1 + a) * (1 + b);
    detail::rounding_barrier(p);
    root_up = std::sqrt(p);
    detail::rounding_barrier(root_up);
  }
  DownwardRounding down;
  double num = s - e;
  detail::rounding_barrier(num);
  if (!(num > 0) || !std::isfinite(root_up)) return 0;
  double q = num / root_up;
  detail::rounding_barrier(q);
  return q;
}

/// (s + e) / sqrt((1 - a)(1 - b)), rounded up; +inf unless a, b < 1.
double upper_from(double s, double e, double a, double b) {
  if (!(a < 1) || !(b < 1)) return inf;
  double root_down;
  {
    DownwardRounding down;
    double p = (1 - a) * (1 - b);
    detail::rounding_barrier(p);
    root_down = std::sqrt(p);
    detail::rounding_barrier(root_down);
  }
  if (!(root_down > 0)) return inf;
  UpwardRounding up;
  double num = s + e;
  detail::rounding_barrier(num);
  double q = num / root_down;
  detail::rounding_barrier(q);
  return std::isfinite(q) ? q : inf;
}

}  // namespace

double norm2_upper(const BoundsMatrix& X) {
  const Index m = X.lo.rows(), n = X.lo.cols();
  if (m == 0 || n == 0) return 0;
  UpwardRounding up;
  const Eigen::MatrixXd mag = X.lo.cwiseAbs().cwiseMax(X.hi.cwiseAbs());
  double squares = 0, max_row = 0, max_col = 0;
  Eigen::VectorXd col_sums = Eigen::VectorXd::Zero(n);
  for (Index i = 0; i < m; ++i) {
    double row = 0;
    for (Index j = 0; j < n; ++j) {
      const double x = mag(i, j);
      if (!std::isfinite(x)) return inf;
      squares += x * x;
      row += x;
      col_sums(j) += x;
    }
    max_row = std::max(max_row, row);
  }
  for (Index j = 0; j < n; ++j) max_col = std::max(max_col, col_sums(j));
  double frobenius = std::sqrt(squares);
  double product = max_row * max_col;
  double mixed = std::sqrt(product);
  detail::rounding_barrier(frobenius);
  detail::rounding_barrier(mixed);
  const double best = std::min(frobenius, mixed);
  return std::isfinite(best) ? best : inf;
}

namespace {

CertifiedSingularValues certify(const BallView& M, Index k, const SvdOptions& o) {
  require_finite(M, k);
  const Triplets t = approximate_triplets(M.mid, k, o);
  CertifiedSingularValues out;
  out.full = t.full;
  const BoundsMatrix MV = product_bounds(M, t.V);
  const BoundsMatrix B = certified_product_bounds(Eigen::MatrixXd(t.U.transpose()), to_ball(MV));  // U^T X V
  Eigen::MatrixXd S = Eigen::MatrixXd::Zero(B.lo.rows(), B.lo.cols());
  for (Index i = 0; i < t.s.size(); ++i) S(i, i) = t.s(i);
  const double e = norm2_upper(detail::minus_point(B, S));
  const Orthogonality u = orthogonality(t.U), v = orthogonality(t.V);
  const double a = u.defect, b = v.defect;
  out.residual = e;
  out.orthogonality = std::max(a, b);
  out.values.resize(static_cast<std::size_t>(k));
  // Weyl pairs sigma_i(B) with the i-th largest |s|: sort, whatever order the
  // numeric SVD returned.
  std::vector<Index> order(static_cast<std::size_t>(t.s.size()));
  for (Index i = 0; i < t.s.size(); ++i) order[static_cast<std::size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](Index x, Index y) { return std::abs(t.s(x)) > std::abs(t.s(y)); });
  std::vector<double> sorted;
  for (Index i : order) sorted.push_back(std::abs(t.s(i)));
  std::vector<double> remainder(static_cast<std::size_t>(k), inf);
  if (!t.full && o.upper_bounds) {
    // The remainder X - Z V^T with Z = fl(U diag(s)): any Z will do, and with
    // V's own products (X V, V^T V) already enclosed above, only the remainder's
    // norms are left to compute.
    const Eigen::MatrixXd Z = t.U.leftCols(k) * t.s.head(k).asDiagonal();
    remainder = detail::remainder_upper_bounds(M, {Z, t.V, MV, v.gram, b}, t.s.head(k), sorted);
  }
  const Index kept = std::min<Index>(k, static_cast<Index>(order.size()));
  out.right_vectors.resize(t.V.rows(), kept);
  for (Index i = 0; i < kept; ++i) out.right_vectors.col(i) = t.V.col(order[static_cast<std::size_t>(i)]);
  for (Index i = 0; i < k; ++i) {
    SingularValueBounds& value = out.values[static_cast<std::size_t>(i)];
    const double si = i < static_cast<Index>(sorted.size()) ? sorted[static_cast<std::size_t>(i)] : 0.0;
    value.lower = lower_from(si, e, a, b);
    value.upper = t.full ? upper_from(si, e, a, b) : remainder[static_cast<std::size_t>(i)];
  }
  // sigma_i >= sigma_(i+1) >= lower_(i+1) and sigma_i <= sigma_(i-1) <= upper_(i-1).
  for (Index i = k - 2; i >= 0; --i) {
    auto& value = out.values[static_cast<std::size_t>(i)];
    value.lower = std::max(value.lower, out.values[static_cast<std::size_t>(i + 1)].lower);
  }
  for (Index i = 1; i < k; ++i) {
    auto& value = out.values[static_cast<std::size_t>(i)];
    value.upper = std::min(value.upper, out.values[static_cast<std::size_t>(i - 1)].upper);
  }
  return out;
}

}  // namespace

CertifiedSingularValues certified_singular_values(const BallMatrix& M, Index k, const SvdOptions& o) {
  if (M.mid.rows() == M.rad.rows() && M.mid.cols() == M.rad.cols() && (M.rad.array() == 0).all())
    return certify(BallView{M.mid}, k, o);  // a point: no radius products
  return certify(BallView{M.mid, &M.rad}, k, o);
}

CertifiedSingularValues certified_singular_values(const Eigen::MatrixXd& M, Index k, const SvdOptions& o) {
  return certify(BallView{M}, k, o);
}

CertifiedSingularValues certified_singular_values(const Matrix<Rational>& M, Index k, const SvdOptions& o) {
  return certified_singular_values(to_ball(M), k, o);
}

bool certify_singular_value_above(const Matrix<Interval>& M, const Eigen::MatrixXd& V, const Interval& t) {
  const Index k = V.cols();
  if (k < 1 || V.rows() != M.cols() || !V.allFinite() || !(lower_bound(t) >= 0)) return false;
  const Matrix<Interval> Vi = V.cast<Interval>();  // exact: doubles fit every precision >= 53
  const Matrix<Interval> MVt = multiply(M, Vi).transpose();
  const Matrix<Interval> Vt = Vi.transpose();
  const Matrix<Interval> G = multiply_transposed(MVt, MVt);  // V^T M^T M V
  const Matrix<Interval> W = multiply_transposed(Vt, Vt);    // V^T V
  const Interval t2 = t * t;
  // Cholesky of H = G - t^2 W on the lower triangle. Every symmetric matrix in
  // the interval H has its point Cholesky's quantities inside these intervals
  // (inclusion isotonicity), so positive pivot lower bounds prove every one of
  // them positive definite, the exact V^T M^T M V - t^2 V^T V among them.
  Matrix<Interval> L(k, k);
  for (Index j = 0; j < k; ++j) {
    Interval d = G(j, j) - t2 * W(j, j);
    for (Index p = 0; p < j; ++p) d -= L(j, p) * L(j, p);
    if (!(lower_bound(d) > 0)) return false;
    L(j, j) = sqrt(d);
    for (Index i = j + 1; i < k; ++i) {
      Interval x = G(i, j) - t2 * W(i, j);
      for (Index p = 0; p < j; ++p) x -= L(i, p) * L(j, p);
      L(i, j) = x / L(j, j);
    }
  }
  return true;
}

std::vector<double> certified_gaps(const CertifiedSingularValues& s) {
  std::vector<double> gaps;
  DownwardRounding down;
  for (std::size_t i = 0; i + 1 < s.values.size(); ++i) {
    double g = s.values[i].lower - s.values[i + 1].upper;
    detail::rounding_barrier(g);
    gaps.push_back(std::isnan(g) ? -inf : g);
  }
  return gaps;
}

}  // namespace attnrank
