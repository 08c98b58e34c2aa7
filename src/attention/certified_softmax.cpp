// Certified softmax in doubles (attnrank/attention/certified_softmax.hpp).
#include <attnrank/attention/certified_softmax.hpp>

#include <attnrank/numbers/detail/vector_exp.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace attnrank {
namespace {

using Eigen::Index;
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double tiny = 0x1p-1074;  // the smallest subnormal: covers exp's absolute error below 2^-1022

}  // namespace

BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S) {
  const Index rows = S.lo.rows(), cols = S.lo.cols();
  BoundsMatrix P;
  P.lo = Eigen::MatrixXd::Zero(rows, cols);
  P.hi = Eigen::MatrixXd::Ones(rows, cols);
  if (rows == 0 || cols == 0) return P;
  // Rows with a non-finite bound keep [0, 1].
  std::vector<bool> usable(static_cast<std::size_t>(rows), true);
  std::vector<double> top(static_cast<std::size_t>(rows), -inf);
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i) {
      const double lo = S.lo(i, j), hi = S.hi(i, j);
      if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) usable[static_cast<std::size_t>(i)] = false;
      else top[static_cast<std::size_t>(i)] = std::max(top[static_cast<std::size_t>(i)], hi);
    }
  Eigen::MatrixXd low(rows, cols), high(rows, cols);  // the shifted exponents, then their exps
  {
    DownwardRounding down;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) low(i, j) = usable[static_cast<std::size_t>(i)] ? S.lo(i, j) - top[static_cast<std::size_t>(i)] : 0.0;
    detail::rounding_barrier(low);
  }
  {
    UpwardRounding up;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) high(i, j) = usable[static_cast<std::size_t>(i)] ? S.hi(i, j) - top[static_cast<std::size_t>(i)] : 0.0;
    detail::rounding_barrier(high);
  }
  // exp_double's error bound holds in round-to-nearest, the mode here.
  detail::exp_in_place(low.data(), static_cast<std::size_t>(low.size()));
  detail::exp_in_place(high.data(), static_cast<std::size_t>(high.size()));
  std::vector<double> sum_lo(static_cast<std::size_t>(rows), 0.0), sum_hi(static_cast<std::size_t>(rows), 0.0);
  constexpr double shrink = 1 - 0x1p-50, grow = 1 + 0x1p-50;  // 8u: more than 4u / (1 - 4u)
  {
    DownwardRounding down;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        double e = low(i, j) * shrink - tiny;
        e = e > 0 ? e : 0.0;
        low(i, j) = e;
        sum_lo[static_cast<std::size_t>(i)] += e;
      }
    detail::rounding_barrier(low);
  }
  {
    UpwardRounding up;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        const double e = high(i, j) * grow + tiny;
        high(i, j) = e;
        sum_hi[static_cast<std::size_t>(i)] += e;
      }
    detail::rounding_barrier(high);
  }
  {
    DownwardRounding down;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i)
        if (usable[static_cast<std::size_t>(i)]) P.lo(i, j) = low(i, j) / sum_hi[static_cast<std::size_t>(i)];
    detail::rounding_barrier(P.lo);
  }
  {
    UpwardRounding up;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i)
        if (usable[static_cast<std::size_t>(i)] && sum_lo[static_cast<std::size_t>(i)] > 0)
          P.hi(i, j) = std::min(1.0, high(i, j) / sum_lo[static_cast<std::size_t>(i)]);
    detail::rounding_barrier(P.hi);
  }
  return P;
}

BoundsMatrix certified_scaled_scores(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K) {
  BoundsMatrix S = certified_product_bounds(Q, Eigen::MatrixXd(K.transpose()));
  const double d = static_cast<double>(Q.cols());
  if (Q.cols() == 1) return S;
  double root_lo, root_hi;
  {
    DownwardRounding down;
    root_lo = std::sqrt(d);
    detail::rounding_barrier(root_lo);
  }
  {
    UpwardRounding up;
    root_hi = std::sqrt(d);
    detail::rounding_barrier(root_hi);
    // hi / r over r in [root_lo, root_hi]: largest at root_lo when hi >= 0, else at root_hi.
    for (Index j = 0; j < S.hi.cols(); ++j)
      for (Index i = 0; i < S.hi.rows(); ++i) S.hi(i, j) = S.hi(i, j) / (S.hi(i, j) >= 0 ? root_lo : root_hi);
    detail::rounding_barrier(S.hi);
  }
  {
    DownwardRounding down;
    for (Index j = 0; j < S.lo.cols(); ++j)
      for (Index i = 0; i < S.lo.rows(); ++i) S.lo(i, j) = S.lo(i, j) / (S.lo(i, j) >= 0 ? root_hi : root_lo);
    detail::rounding_barrier(S.lo);
  }
  return S;
}

double max_abs_difference_upper(const BoundsMatrix& P, const BoundsMatrix& T) {
  UpwardRounding up;
  double worst = 0;
  for (Index j = 0; j < P.lo.cols(); ++j)
    for (Index i = 0; i < P.lo.rows(); ++i) {
      double a = P.hi(i, j) - T.lo(i, j), b = T.hi(i, j) - P.lo(i, j);
      detail::rounding_barrier(a);
      detail::rounding_barrier(b);
      if (!(a <= inf) || !(b <= inf)) return inf;  // NaN
      worst = std::max(worst, std::max(a, b));
    }
  return std::isfinite(worst) ? worst : inf;
}

}  // namespace attnrank
