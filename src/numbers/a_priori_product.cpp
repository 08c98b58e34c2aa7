// Products with an a priori error bound (attnrank/numbers/a_priori_product.hpp).
#include <attnrank/numbers/a_priori_product.hpp>

#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/detail/infinity.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace attnrank {
namespace {

constexpr double u = 0x1p-53;

/// Where the nearest product C overflowed (+-inf, or NaN from inf - inf) it is no
/// midpoint, so the radius says nothing about it: no bound there. Without this,
/// C = +inf with a finite radius gives the false band [inf, inf].
void unbounded_where_not_finite(const Eigen::Ref<const Eigen::MatrixXd>& C, BoundsMatrix& out) {
  if (C.allFinite()) return;
  out.lo = C.array().isFinite().select(out.lo, -detail::inf);
  out.hi = C.array().isFinite().select(out.hi, detail::inf);
}

/// lo = C - R (down), hi = C + R (up), for C = fl(A B) in round-to-nearest.
BoundsMatrix around(const Eigen::MatrixXd& C, const Eigen::MatrixXd& R) {
  BoundsMatrix out;
  {
    DownwardRounding down;
    out.lo = C - R;
    detail::rounding_barrier(out.lo);
  }
  {
    UpwardRounding up;
    out.hi = C + R;
    detail::rounding_barrier(out.hi);
  }
  unbounded_where_not_finite(C, out);
  return out;
}

}  // namespace

double a_priori_gamma(Eigen::Index k) {
  // k u and 1 - k u are exact for k < 2^52, so only the quotient rounds.
  const double ku = static_cast<double>(k) * u;
  if (!(ku < 0.5)) return std::numeric_limits<double>::infinity();
  UpwardRounding up;
  double g = ku / (1 - ku);
  detail::rounding_barrier(g);
  return g;
}

double a_priori_underflow(Eigen::Index k) { return static_cast<double>(k + 1) * 0x1p-1021; }

Eigen::MatrixXd nearest_product(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B) {
  RoundingScope<FE_TONEAREST> nearest;
  Eigen::MatrixXd C;
  C.noalias() = A * B;
  detail::rounding_barrier(C);
  return C;
}

BoundsMatrix a_priori_bounds_around(const Eigen::MatrixXd& C, Eigen::Index first, Eigen::Index rows, Eigen::Index k,
                                    const Eigen::VectorXd& a_row_norms, const Eigen::VectorXd& b_column_norms) {
  const double g = a_priori_gamma(k), eta = a_priori_underflow(k);
  BoundsMatrix out;
  // Both ends in upward rounding, the radius r_ij = g a_i b_j + eta never stored:
  // hi = C + r, and lo = -((-C) + r), whose inner sum rounds up, so lo <= C - r.
  UpwardRounding up;
  const Eigen::VectorXd ga = (a_row_norms.segment(first, rows) * g).eval();
  const auto radius = (b_column_norms.transpose().replicate(rows, 1).array().colwise() * ga.array()) + eta;
  const auto c = C.middleRows(first, rows).array();
  out.hi = (c + radius).matrix();
  out.lo = (-((-c) + radius)).matrix();
  detail::rounding_barrier(out.hi);
  detail::rounding_barrier(out.lo);
  unbounded_where_not_finite(C.middleRows(first, rows), out);
  return out;
}

Eigen::VectorXd row_norms_upper(const Eigen::MatrixXd& M) {
  UpwardRounding up;
  Eigen::VectorXd s = Eigen::VectorXd::Zero(M.rows());
  for (Eigen::Index j = 0; j < M.cols(); ++j) s += M.col(j).cwiseAbs2();  // column by column: the storage order
  detail::rounding_barrier(s);
  for (Eigen::Index i = 0; i < s.size(); ++i) s(i) = std::sqrt(s(i));  // correctly rounded, upward
  detail::rounding_barrier(s);
  return s;
}

BoundsMatrix a_priori_product_bounds(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B,
                                     const Eigen::VectorXd& a_row_norms, const Eigen::VectorXd& b_column_norms) {
  return a_priori_bounds_around(nearest_product(A, B), 0, A.rows(), A.cols(), a_row_norms, b_column_norms);
}

BoundsMatrix a_priori_interval_product_bounds(const BoundsMatrix& P, const Eigen::MatrixXd& V,
                                              const Eigen::RowVectorXd& v_column_max) {
  const BallMatrix X = to_ball(P);
  const Eigen::MatrixXd C = nearest_product(X.mid, V);
  const double g = a_priori_gamma(P.lo.cols()), eta = a_priori_underflow(P.lo.cols());
  Eigen::MatrixXd R;
  {
    UpwardRounding up;
    Eigen::VectorXd mid_sum = Eigen::VectorXd::Zero(X.mid.rows()), rad_sum = Eigen::VectorXd::Zero(X.mid.rows());
    for (Eigen::Index j = 0; j < X.mid.cols(); ++j) {
      mid_sum += X.mid.col(j).cwiseAbs();
      rad_sum += X.rad.col(j);
    }
    const Eigen::VectorXd weight = (mid_sum * g + rad_sum).eval();
    R = ((weight * v_column_max).array() + eta).matrix();
    detail::rounding_barrier(R);
  }
  return around(C, R);
}

double a_priori_residual_norm_upper(const Eigen::MatrixXd& R, const Eigen::MatrixXd& M) {
  const Eigen::Index k = R.rows();
  if (R.cols() != k || M.rows() != k || M.cols() != k)
    throw std::invalid_argument("a_priori_residual_norm_upper: R and M must be square of one size");
  if (k == 0) return 0;
  const Eigen::MatrixXd C = nearest_product(R, M);
  const Eigen::VectorXd r_norms = row_norms_upper(R);
  const double g = a_priori_gamma(k), eta = a_priori_underflow(k);
  UpwardRounding up;
  double m_norm_sum = 0;  // sum_j ||m^j||, each norm and the sum rounded up
  for (Eigen::Index j = 0; j < k; ++j) {
    double squares = M.col(j).squaredNorm();  // terms >= 0: every rounding up keeps it an upper bound
    detail::rounding_barrier(squares);
    m_norm_sum += std::sqrt(squares);
  }
  // Row sums of |C| column by column (the storage order), the diagonal's |1 - C_jj| added apart:
  // it is one of 1 - C_jj and C_jj - 1, each rounded up.
  Eigen::VectorXd sums = Eigen::VectorXd::Zero(k);
  for (Eigen::Index j = 0; j < k; ++j) {
    const double diagonal = C(j, j);
    const double off = sums(j);
    sums += C.col(j).cwiseAbs();
    sums(j) = off + std::max(1.0 - diagonal, diagonal - 1.0);
  }
  sums += (r_norms * g) * m_norm_sum;
  sums.array() += static_cast<double>(k) * eta;
  detail::rounding_barrier(sums);
  double worst = 0;
  for (Eigen::Index i = 0; i < k; ++i) {
    if (!(sums(i) <= std::numeric_limits<double>::max())) return std::numeric_limits<double>::infinity();  // NaN too
    worst = std::max(worst, sums(i));
  }
  return worst;
}

}  // namespace attnrank
