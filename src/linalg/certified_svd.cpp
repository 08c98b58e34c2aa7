// Certified singular values of attnrank/linalg/certified_svd.hpp.
#include <attnrank/linalg/certified_svd.hpp>

#include <attnrank/linalg/numeric_rank.hpp>

#include <Eigen/SVD>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <functional>
#include <limits>

namespace attnrank {
namespace {

using Eigen::Index;
constexpr double inf = std::numeric_limits<double>::infinity();

/// Rounds toward minus infinity while alive (the counterpart of UpwardRounding,
/// for the few scalar lower bounds below).
class DownwardRounding {
 public:
  DownwardRounding() : saved_(std::fegetround()) { std::fesetround(FE_DOWNWARD); }
  ~DownwardRounding() { std::fesetround(saved_); }
  DownwardRounding(const DownwardRounding&) = delete;
  DownwardRounding& operator=(const DownwardRounding&) = delete;

 private:
  int saved_;
};

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

/// Upper bounds from explicit remainders: sigma_i <= ||M - sum_(t<i) u_t w_t^T||_2
/// with w_t = fl(s_t v_t) (any rank-(i-1) matrix will do, so its rounding is harmless).
std::vector<double> remainder_upper_bounds(const BallMatrix& M, const Triplets& t, Index k) {
  std::vector<double> upper(static_cast<std::size_t>(k));
  BoundsMatrix R;
  {
    UpwardRounding up;
    R.hi = M.mid + M.rad;
    R.lo = M.rad - M.mid;
    detail::rounding_barrier(R.hi);
    detail::rounding_barrier(R.lo);
    R.lo = -R.lo;
  }
  for (Index i = 0; i < k; ++i) {
    upper[static_cast<std::size_t>(i)] = norm2_upper(R);
    if (i + 1 == k) break;
    const Eigen::MatrixXd w = (t.V.col(i) * t.s(i)).transpose();
    const BoundsMatrix p = certified_product_bounds(Eigen::MatrixXd(t.U.col(i)), w);
    UpwardRounding up;
    R.hi -= p.lo;  // hi - lo(p), rounded up
    R.lo = p.hi - R.lo;
    detail::rounding_barrier(R.hi);
    detail::rounding_barrier(R.lo);
    R.lo = -R.lo;  // lo - hi(p), rounded down
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
  const std::vector<double> remainder =
      t.full ? std::vector<double>()
             : o.upper_bounds ? remainder_upper_bounds(M, t, k) : std::vector<double>(static_cast<std::size_t>(k), inf);
  // Weyl pairs sigma_i(B) with the i-th largest |s|: sort, whatever order the
  // numeric SVD returned.
  std::vector<double> sorted(t.s.data(), t.s.data() + t.s.size());
  for (double& x : sorted) x = std::abs(x);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
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
