// Certified rank bounds (attnrank/linalg/certified_rank.hpp): the directed-rounding and MPFI minor tests.
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/linalg/detail/finite_checks.hpp>

#include <attnrank/linalg/detail/two_stage_preconditioner.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/numbers/a_priori_product.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnrank {
namespace detail {

using Eigen::Index;

/// Rows and columns in the order full-pivot LU chose them: P A Q = L U, so the
/// leading k x k block of P A Q is the k-th candidate minor.
template <class LU>
void pivot_order(const LU& lu, std::vector<Index>& rows, std::vector<Index>& cols) {
  const auto& p = lu.permutationP().indices();
  const auto& q = lu.permutationQ().indices();
  rows.assign(static_cast<std::size_t>(p.size()), 0);
  for (Index i = 0; i < p.size(); ++i) rows[static_cast<std::size_t>(p(i))] = i;  // P e_i = e_p(i)
  cols.assign(q.data(), q.data() + q.size());
}

/// Number of pivots of U above tol * |U(0,0)|.
template <class LU, class S>
Index numeric_rank_from_lu(const LU& lu, const S& relative_tol) {
  const auto& U = lu.matrixLU();
  const Index d = std::min(U.rows(), U.cols());
  if (d == 0) return 0;
  const S top = abs(S(U(0, 0)));
  Index r = 0;
  while (r < d && abs(S(U(r, r))) > top * relative_tol && top != 0) ++r;
  return r;
}

/// The largest k (tried first at the numeric rank r0, then by bisection below it)
/// for which verify(k) proves the leading k x k candidate minor nonsingular.
template <class Verify>
void search_verified_minor(Index r0, CertifiedRank& out, const std::vector<Index>& rows,
                           const std::vector<Index>& cols, Verify verify) {
  double residual = 0;
  Index best = 0;
  double best_residual = 0;
  if (r0 > 0 && verify(r0, residual)) {
    best = r0;
    best_residual = residual;
  } else {
    Index lo = 0, hi = r0 - 1;  // best verified so far is lo (k = 0 is trivial)
    while (lo < hi) {
      const Index mid = (lo + hi + 1) / 2;
      if (verify(mid, residual)) {
        lo = mid;
        best_residual = residual;
      } else {
        hi = mid - 1;
      }
    }
    best = std::max<Index>(lo, 0);
    if (best == 0) best_residual = 0;
  }
  out.lower = best;
  out.residual_bound = best_residual;
  out.pivot_rows.assign(rows.begin(), rows.begin() + best);
  out.pivot_cols.assign(cols.begin(), cols.begin() + best);
}

Eigen::MatrixXd select(const Eigen::MatrixXd& A, const std::vector<Index>& rows, const std::vector<Index>& cols,
                              Index k) {
  Eigen::MatrixXd S(k, k);
  for (Index i = 0; i < k; ++i)
    for (Index j = 0; j < k; ++j) S(i, j) = A(rows[static_cast<std::size_t>(i)], cols[static_cast<std::size_t>(j)]);
  return S;
}

}  // namespace detail

std::optional<double> certify_nonsingular_minor(const BallMatrix& A, const std::vector<Eigen::Index>& rows,
                                                       const std::vector<Eigen::Index>& cols) {
  const auto k = static_cast<Eigen::Index>(rows.size());
  if (static_cast<Eigen::Index>(cols.size()) != k) throw std::invalid_argument("certify_nonsingular_minor: not square");
  if (k == 0) return 0.0;
  const auto identity = [k](const std::vector<Eigen::Index>& index) {
    for (Eigen::Index i = 0; i < k; ++i)
      if (index[static_cast<std::size_t>(i)] != i) return false;
    return true;
  };
  // The whole matrix (the common full-rank test) is used in place, not copied.
  const bool whole = A.mid.rows() == k && A.mid.cols() == k && identity(rows) && identity(cols);
  BallMatrix selected;
  if (!whole) selected = {detail::select(A.mid, rows, cols, k), detail::select(A.rad, rows, cols, k)};
  const BallMatrix& M = whole ? A : selected;
  if (!M.mid.allFinite() || !M.rad.allFinite()) return std::nullopt;
  const Eigen::MatrixXd R = M.mid.partialPivLu().inverse();
  if (!R.allFinite()) return std::nullopt;
  // A point minor: one GEMM with an a priori bound first; the directed pair when that is not below 1.
  if ((M.rad.array() == 0).all())
    if (const double residual = a_priori_residual_norm_upper(R, M.mid); residual < 1) return residual;
  const double residual = norm_inf_upper(identity_minus(certified_product_bounds(R, M)));
  if (residual < 1) return residual;
  return std::nullopt;
}

std::optional<double> certify_nonsingular_minor(const Matrix<Interval>& A, const std::vector<Eigen::Index>& rows,
                                                       const std::vector<Eigen::Index>& cols) {
  using Eigen::Index;
  const auto k = static_cast<Index>(rows.size());
  if (static_cast<Index>(cols.size()) != k) throw std::invalid_argument("certify_nonsingular_minor: not square");
  if (k == 0) return 0.0;
  Matrix<Interval> M(k, k);
  Matrix<Real> Mc(k, k);
  for (Index i = 0; i < k; ++i)
    for (Index j = 0; j < k; ++j) {
      M(i, j) = A(rows[static_cast<std::size_t>(i)], cols[static_cast<std::size_t>(j)]);
      if (!scalar_traits<Interval>::is_finite(M(i, j))) return std::nullopt;
      Mc(i, j) = approx_midpoint_real(M(i, j));
    }
  const Matrix<Real> R = Mc.partialPivLu().inverse();
  for (Index i = 0; i < k; ++i)
    for (Index j = 0; j < k; ++j)
      if (!scalar_traits<Real>::is_finite(R(i, j))) return std::nullopt;
  const Matrix<Interval> RM = multiply(Matrix<Interval>(R.cast<Interval>()), M);
  Real worst = 0;
  for (Index i = 0; i < k; ++i) {
    Interval row_sum = 0;
    for (Index j = 0; j < k; ++j) row_sum += abs(Interval((i == j ? Interval(1) : Interval(0)) - RM(i, j)));
    const Real up = upper_bound(row_sum);
    if (!scalar_traits<Real>::is_finite(up)) return std::nullopt;
    if (up > worst) worst = up;
  }
  if (!(worst < 1)) return std::nullopt;
  return mpfr_get_d(worst.backend().data(), MPFR_RNDU);
}

namespace detail {

/// rank = n for a square A, with its proof recorded in `out`.
void record_full_rank(CertifiedRank& out, double residual, const char* method, unsigned bits) {
  out.lower = out.upper;
  out.residual_bound = residual;
  out.method = method;
  out.bits = bits;
  out.pivot_rows.clear();
  out.pivot_cols.clear();
  for (Index i = 0; i < out.upper; ++i) {
    out.pivot_rows.push_back(i);
    out.pivot_cols.push_back(i);
  }
}

/// The common case first: a square matrix of full rank needs no pivot search, and
/// blocked partial-pivot LU is several times faster than full pivoting.
/// The one-stage test on the whole (square) ball.
std::optional<double> whole_matrix_test(const BallMatrix& M) {
  std::vector<Index> all(static_cast<std::size_t>(M.mid.rows()));
  for (Index i = 0; i < M.mid.rows(); ++i) all[static_cast<std::size_t>(i)] = i;
  return certify_nonsingular_minor(M, all, all);
}

bool full_rank_by_one_stage(const BallMatrix& A, CertifiedRank& out) {
  if (A.mid.rows() != A.mid.cols()) return false;
  const auto r = whole_matrix_test(A);
  if (r) record_full_rank(out, *r, "directed-rounding", 53);
  return r.has_value();
}

/// Too ill-conditioned for one double stage: the two-stage test
/// (linalg/detail/two_stage_preconditioner.hpp) proves Y, hence A, nonsingular.
bool full_rank_by_two_stages(const DoubleDoubleBall& A, CertifiedRank& out) {
  if (A.hi.rows() != A.hi.cols()) return false;
  const auto pre = precondition_two_stage(A);
  if (!pre || !(pre->eps < 1)) return false;
  record_full_rank(out, pre->eps, "double-double", 106);
  return true;
}

/// Complete-pivot Gaussian elimination of M, stopped once the largest remaining
/// entry is at most tol times the first pivot (FullPivLU's numeric rank, which it
/// reaches only after eliminating everything): the pivot rows and columns in
/// order, r0 of them, at O(r0 m n) instead of O(min(m, n) m n) -- a block of
/// numeric rank 8 among 512 columns costs 9 steps, not 512.
Index early_stopping_pivots(Eigen::MatrixXd W, double tol, std::vector<Index>& rows, std::vector<Index>& cols,
                            Index cap = std::numeric_limits<Index>::max()) {
  const Index m = W.rows(), n = W.cols();
  std::vector<Index> row_of(static_cast<std::size_t>(m)), col_of(static_cast<std::size_t>(n));
  for (Index i = 0; i < m; ++i) row_of[static_cast<std::size_t>(i)] = i;
  for (Index j = 0; j < n; ++j) col_of[static_cast<std::size_t>(j)] = j;
  double first = 0;
  Index k = 0;
  for (; k < std::min({m, n, cap}); ++k) {
    Index i = 0, j = 0;
    const double biggest = W.bottomRightCorner(m - k, n - k).cwiseAbs().maxCoeff(&i, &j);
    if (k == 0) first = biggest;
    if (!(biggest > tol * first) || first == 0) break;
    W.row(k).swap(W.row(k + i));
    W.col(k).swap(W.col(k + j));
    std::swap(row_of[static_cast<std::size_t>(k)], row_of[static_cast<std::size_t>(k + i)]);
    std::swap(col_of[static_cast<std::size_t>(k)], col_of[static_cast<std::size_t>(k + j)]);
    W.col(k).tail(m - k - 1) /= W(k, k);
    W.bottomRightCorner(m - k - 1, n - k - 1).noalias() -= W.col(k).tail(m - k - 1) * W.row(k).tail(n - k - 1);
  }
  rows.assign(row_of.begin(), row_of.begin() + k);
  cols.assign(col_of.begin(), col_of.begin() + k);
  return k;
}

/// The largest minor the one-stage double test proves nonsingular, found by
/// complete-pivot elimination of the midpoint (stopped at its numeric rank) and
/// bisection.
void search_minor(const BallMatrix& A, CertifiedRank& out) {
  std::vector<Index> rows, cols;
  const double tol = std::numeric_limits<double>::epsilon() * static_cast<double>(std::max(A.mid.rows(), A.mid.cols()));
  const Index r0 = early_stopping_pivots(A.mid, tol, rows, cols);
  search_verified_minor(r0, out, rows, cols, [&](Index k, double& residual) {
    const auto r = whole_matrix_test(BallMatrix{select(A.mid, rows, cols, k), select(A.rad, rows, cols, k)});
    if (r) residual = *r;
    return r.has_value();
  });
}

}  // namespace detail

CertifiedRank certified_rank(const BallMatrix& A, bool try_two_stages) {
  using namespace detail;
  require_finite_ball(A);
  CertifiedRank out;
  out.method = "directed-rounding";
  out.bits = 53;
  out.upper = std::min(A.mid.rows(), A.mid.cols());
  if (out.upper == 0) return out;
  if (full_rank_by_one_stage(A, out)) return out;
  if (try_two_stages && A.mid.rows() == A.mid.cols() &&
      full_rank_by_two_stages(DoubleDoubleBall{A.mid, Eigen::MatrixXd::Zero(A.mid.rows(), A.mid.cols()), A.rad}, out))
    return out;
  search_minor(A, out);
  return out;
}

std::optional<CertifiedRank> certified_full_rank_by_one_stage(const BallMatrix& A) {
  detail::require_finite_ball(A);
  CertifiedRank out;
  out.method = "directed-rounding";
  out.bits = 53;
  out.upper = std::min(A.mid.rows(), A.mid.cols());
  if (out.upper == 0 || !detail::full_rank_by_one_stage(A, out)) return std::nullopt;
  return out;
}

Eigen::Index numeric_rank_up_to(const Eigen::MatrixXd& M, Eigen::Index cap) {
  using Eigen::Index;
  std::vector<Index> rows, cols;
  const double tol = std::numeric_limits<double>::epsilon() * static_cast<double>(std::max(M.rows(), M.cols()));
  return detail::early_stopping_pivots(M, tol, rows, cols, cap);
}

CertifiedRank certified_rank(const Eigen::MatrixXd& A) {
  return certified_rank(BallMatrix{A, Eigen::MatrixXd::Zero(A.rows(), A.cols())});
}

CertifiedRank certified_rank(const Matrix<Interval>& A) {
  using namespace detail;
  CertifiedRank out;
  out.method = "mpfi";
  out.bits = PrecisionScope::bits();
  out.upper = std::min(A.rows(), A.cols());
  require_finite_intervals(A, "certified rank");
  if (out.upper == 0) return out;
  const Matrix<Real> mid = A.unaryExpr([](const Interval& x) { return approx_midpoint_real(x); });
  const Eigen::FullPivLU<Matrix<Real>> lu(mid);
  std::vector<Index> rows, cols;
  pivot_order(lu, rows, cols);
  const Real tol = ldexp(Real(1), -static_cast<int>(out.bits)) * std::max(A.rows(), A.cols());
  const Index r0 = numeric_rank_from_lu(lu, tol);
  search_verified_minor(r0, out, rows, cols, [&](Index k, double& residual) {
    const std::vector<Index> rk(rows.begin(), rows.begin() + k), ck(cols.begin(), cols.begin() + k);
    const auto r = certify_nonsingular_minor(A, rk, ck);
    if (r) residual = *r;
    return r.has_value();
  });
  return out;
}

CertifiedRank certified_rank(const Matrix<Rational>& A, unsigned bits) {
  require_precision_bits(bits);
  if (bits <= 53) {
    // One conversion serves both tests (see certified_determinant).
    const auto dd = to_double_double_ball(A);
    const BallMatrix b = dd ? to_ball(*dd) : to_ball(A);
    if (b.mid.allFinite() && b.rad.allFinite()) {
      using namespace detail;
      CertifiedRank out;
      out.method = "directed-rounding";
      out.bits = 53;
      out.upper = std::min(A.rows(), A.cols());
      if (out.upper == 0 || full_rank_by_one_stage(b, out)) return out;
      // The two-stage test on the data themselves: a 17-digit decimal is not a
      // double, and the balls around them may hold singular matrices.
      if (dd && A.rows() == A.cols() && full_rank_by_two_stages(*dd, out)) return out;
      search_minor(b, out);
      return out;
    }
  }
  const PrecisionScope scope(std::max(bits, 64u));
  return certified_rank(from_rational<Interval>(A));
}

}  // namespace attnrank
