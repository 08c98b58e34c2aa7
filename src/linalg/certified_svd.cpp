// Certified singular values of attnrank/linalg/certified_svd.hpp.
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/linalg/certified_svd.hpp>

#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/linalg/product.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>
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

void require_finite(const BallMatrix& M, Index k) {
  if (M.mid.rows() != M.rad.rows() || M.mid.cols() != M.rad.cols())
    throw input_error("certified singular values: midpoint and radius differ in shape");
  const Index p = std::min(M.mid.rows(), M.mid.cols());
  if (k < 1 || k > p)
    throw input_error("certified singular values: asked for the top " + std::to_string(k) + " of a " +
                      std::to_string(M.mid.rows()) + " x " + std::to_string(M.mid.cols()) +
                      " matrix, which has " + std::to_string(p) + " (use 1 <= k <= min(rows, cols))");
  for (Index i = 0; i < M.mid.rows(); ++i)
    for (Index j = 0; j < M.mid.cols(); ++j)
      if (!std::isfinite(M.mid(i, j)) || !std::isfinite(M.rad(i, j)) || M.rad(i, j) < 0)
        throw input_error("certified singular values: entry (" + std::to_string(i + 1) + ", " + std::to_string(j + 1) +
                              ") is not a finite number in the double range",
                          "", static_cast<long>(i + 1), static_cast<long>(j + 1));
}

/// Bounds of X - D for X within b and the point matrix D (same shape).
BoundsMatrix minus_point(const BoundsMatrix& b, const Eigen::MatrixXd& D) {
  BoundsMatrix out;
  UpwardRounding up;
  out.hi = b.hi - D;
  out.lo = D - b.lo;
  detail::rounding_barrier(out.hi);
  detail::rounding_barrier(out.lo);
  out.lo = -out.lo;
  return out;
}

/// a >= ||Y^T Y - I||_2 for the point matrix Y.
double orthogonality_defect(const Eigen::MatrixXd& Y) {
  const BoundsMatrix G = certified_product_bounds(Eigen::MatrixXd(Y.transpose()), Y);
  return norm2_upper(minus_point(G, Eigen::MatrixXd::Identity(Y.cols(), Y.cols())));
}

/// Bounds of U^T X V for every X in the ball M.
BoundsMatrix compressed(const BallMatrix& M, const Eigen::MatrixXd& U, const Eigen::MatrixXd& V) {
  const BallMatrix W = to_ball(certified_product_bounds(M, V));
  return certified_product_bounds(Eigen::MatrixXd(U.transpose()), W);
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

/// An upper bound on the product of any x in [a_lo, a_hi] and y in [b_lo, b_hi]
/// (call with upward rounding on).
double product_upper(double a_lo, double a_hi, double b_lo, double b_hi) {
  return std::max(std::max(a_lo * b_lo, a_lo * b_hi), std::max(a_hi * b_lo, a_hi * b_hi));
}

/// Upper bounds for a truncated basis, from one explicit remainder
/// R = M - U W^T with W = V diag(s) (any W will do: R is enclosed for the W
/// computed), two ways, the smaller kept:
///  * Frobenius: sigma_i <= ||M - sum_(t<i) u_t w_t^T||_F, and that matrix is
///    R + sum_(t>=i) u_t w_t^T, whose squared norm is
///    ||R||_F^2 + 2 sum_(t>=i) u_t^T R w_t + sum_(s,t>=i) (u_s^T u_t)(w_s^T w_t):
///    one remainder and k x k Gram matrices serve every i (no cancellation: the
///    cross terms are about 0, the rest positive);
///  * Weyl: sigma_i(M) <= sigma_i(U W^T) + ||R||_2 <= sqrt(1 + a) sigma_i(W) + ||R||_2,
///    and sigma_i(W)^2 = lambda_i(W^T W) <= s_(i)^2 + ||W^T W - diag(s^2)||_2,
///    which is tight for the large values, where the first is not.
/// `a` >= ||U^T U - I||_2; `sorted` holds |s| in decreasing order.
std::vector<double> remainder_upper_bounds(const BallMatrix& M, const Triplets& t, Index k, double a,
                                           const std::vector<double>& sorted) {
  const Eigen::MatrixXd U = t.U.leftCols(k);
  const Eigen::MatrixXd W = t.V.leftCols(k) * t.s.head(k).asDiagonal();
  const BoundsMatrix P = certified_product_bounds(U, Eigen::MatrixXd(W.transpose()));
  const BoundsMatrix GW = certified_product_bounds(Eigen::MatrixXd(W.transpose()), W);
  // |R| entrywise, in one pass over M and P without storing R (four n x n
  // temporaries were half the certification at n = 2048): R lies in
  // [-(P.hi - mid + rad), mid + rad - P.lo], both rounded up.
  const Index m = M.mid.rows(), n = M.mid.cols();
  double frobenius2 = 0, r2 = inf;
  {
    UpwardRounding up;
    Eigen::VectorXd row_sums = Eigen::VectorXd::Zero(m);
    double max_col = 0;
    bool finite = true;
    for (Index j = 0; j < n; ++j) {
      double col = 0;
      for (Index i = 0; i < m; ++i) {
        const double hi = M.mid(i, j) + M.rad(i, j) - P.lo(i, j);
        const double neg_lo = P.hi(i, j) - M.mid(i, j) + M.rad(i, j);
        const double x = std::max(std::abs(hi), std::abs(neg_lo));
        frobenius2 += x * x;
        col += x;
        row_sums(i) += x;
        finite = finite && std::isfinite(x);
      }
      max_col = std::max(max_col, col);
    }
    detail::rounding_barrier(frobenius2);
    if (finite) {
      double frobenius = std::sqrt(frobenius2), mixed = std::sqrt(row_sums.maxCoeff() * max_col);
      detail::rounding_barrier(frobenius);
      detail::rounding_barrier(mixed);
      r2 = std::min(frobenius, mixed);  // ||R||_2 <= both (norm2_upper's two bounds)
    } else {
      frobenius2 = inf;
    }
  }
  // u_t^T R w_t <= c_t for every R: R W = X W - U (W^T W) with X in the ball M,
  // so Y = [X W] - U [W^T W] encloses it without forming R.
  const BoundsMatrix XW = certified_product_bounds(M, W);
  const BoundsMatrix UG = certified_product_bounds(U, to_ball(GW));
  BoundsMatrix Y;
  {
    DownwardRounding down;
    Y.lo = XW.lo - UG.hi;
    detail::rounding_barrier(Y.lo);
  }
  {
    UpwardRounding up;
    Y.hi = XW.hi - UG.lo;
    detail::rounding_barrier(Y.hi);
  }
  const BoundsMatrix GU = certified_product_bounds(Eigen::MatrixXd(U.transpose()), U);
  Eigen::MatrixXd D = Eigen::MatrixXd::Zero(k, k);
  {
    UpwardRounding up;
    for (Index i = 0; i < k; ++i) D(i, i) = t.s(i) * t.s(i);
  }
  // ||W^T W - diag(s^2)||_2 for the D rounded up (D is a point matrix: any will do).
  const double ew = norm2_upper(minus_point(GW, D));
  std::vector<double> upper(static_cast<std::size_t>(k), inf);
  UpwardRounding up;
  double cross = 0, gram = 0;  // sum over t >= i of c_t, and over s, t >= i of the Gram products
  const double root_a = std::sqrt(1 + a);
  for (Index i = k - 1; i >= 0; --i) {
    double c = 0;
    for (Index r = 0; r < U.rows(); ++r) c += std::max(U(r, i) * Y.lo(r, i), U(r, i) * Y.hi(r, i));
    cross += c;
    gram += product_upper(GU.lo(i, i), GU.hi(i, i), GW.lo(i, i), GW.hi(i, i));
    for (Index j = i + 1; j < k; ++j)
      gram += product_upper(GU.lo(i, j), GU.hi(i, j), GW.lo(i, j), GW.hi(i, j)) +
              product_upper(GU.lo(j, i), GU.hi(j, i), GW.lo(j, i), GW.hi(j, i));
    double f2 = frobenius2 + 2 * cross + gram;
    detail::rounding_barrier(f2);
    const double frobenius = f2 > 0 ? std::sqrt(f2) : 0.0;
    const double si = static_cast<std::size_t>(i) < sorted.size() ? sorted[static_cast<std::size_t>(i)] : 0.0;
    double weyl = root_a * std::sqrt(si * si + ew) + r2;
    detail::rounding_barrier(weyl);
    const double best = std::min(std::isnan(frobenius) ? inf : frobenius, std::isnan(weyl) ? inf : weyl);
    upper[static_cast<std::size_t>(i)] = std::isfinite(best) ? best : inf;
  }
  return upper;
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

CertifiedSingularValues certified_singular_values(const BallMatrix& M, Index k, const SvdOptions& o) {
  require_finite(M, k);
  const Triplets t = approximate_triplets(M.mid, k, o);
  CertifiedSingularValues out;
  out.full = t.full;
  const BoundsMatrix B = compressed(M, t.U, t.V);
  Eigen::MatrixXd S = Eigen::MatrixXd::Zero(B.lo.rows(), B.lo.cols());
  for (Index i = 0; i < t.s.size(); ++i) S(i, i) = t.s(i);
  const double e = norm2_upper(minus_point(B, S));
  const double a = orthogonality_defect(t.U), b = orthogonality_defect(t.V);
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
  const std::vector<double> remainder =
      t.full ? std::vector<double>()
             : o.upper_bounds ? remainder_upper_bounds(M, t, k, a, sorted) : std::vector<double>(static_cast<std::size_t>(k), inf);
  const Index kept = std::min<Index>(k, static_cast<Index>(order.size()));
  out.right_vectors.resize(t.V.rows(), kept);
  for (Index i = 0; i < kept; ++i) out.right_vectors.col(i) = t.V.col(order[static_cast<std::size_t>(i)]);
  for (Index i = 0; i < k; ++i) {
    SingularValueBounds& v = out.values[static_cast<std::size_t>(i)];
    const double si = i < static_cast<Index>(sorted.size()) ? sorted[static_cast<std::size_t>(i)] : 0.0;
    v.lower = lower_from(si, e, a, b);
    v.upper = t.full ? upper_from(si, e, a, b) : remainder[static_cast<std::size_t>(i)];
  }
  // sigma_i >= sigma_(i+1) >= lower_(i+1) and sigma_i <= sigma_(i-1) <= upper_(i-1).
  for (Index i = k - 2; i >= 0; --i) {
    auto& v = out.values[static_cast<std::size_t>(i)];
    v.lower = std::max(v.lower, out.values[static_cast<std::size_t>(i + 1)].lower);
  }
  for (Index i = 1; i < k; ++i) {
    auto& v = out.values[static_cast<std::size_t>(i)];
    v.upper = std::min(v.upper, out.values[static_cast<std::size_t>(i - 1)].upper);
  }
  return out;
}

CertifiedSingularValues certified_singular_values(const Eigen::MatrixXd& M, Index k, const SvdOptions& o) {
  return certified_singular_values(BallMatrix{M, Eigen::MatrixXd::Zero(M.rows(), M.cols())}, k, o);
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
