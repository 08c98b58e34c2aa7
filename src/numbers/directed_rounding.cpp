// Bodies of numbers/directed_rounding.hpp's products and norms. Out of the header:
// Eigen's GEMM, instantiated in an inline function, cost every unit that included
// the header about 6 s of compile time (docs/performance.md, "Compile time").
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/detail/parallel.hpp>

#include <cfenv>
#include <cmath>
#include <exception>

namespace attnrank {

namespace detail {

BoundsMatrix directed_pair(const Eigen::MatrixXd& L, const Eigen::MatrixXd& R, const Eigen::MatrixXd& spread) {
  BoundsMatrix out;
  UpwardRounding up;
  std::exception_ptr failure_hi, failure_lo;
  // Each half sets the mode of the thread it runs on and restores it after.
  const auto half = [&](bool upper) {
    const ThreadRounding<FE_UPWARD> rounding;
    try {
      Eigen::MatrixXd& target = upper ? out.hi : out.lo;
      if (upper) {
        target.noalias() = L * R;
      } else {
        const Eigen::MatrixXd negL = -L;
        target.noalias() = negL * R;
      }
      if (spread.size()) target += spread;
      rounding_barrier(target);
    } catch (...) {
      (upper ? failure_hi : failure_lo) = std::current_exception();
    }
  };
  const bool big = !serial_directed_products && static_cast<double>(L.rows()) * static_cast<double>(L.cols()) * static_cast<double>(R.cols()) >= 4e6;
  if (big) {
    run_side_by_side([&] { half(false); }, [&] { half(true); });
  } else {
    half(true);
    half(false);
  }
  if (failure_hi) std::rethrow_exception(failure_hi);
  if (failure_lo) std::rethrow_exception(failure_lo);
  out.lo = -out.lo;
  return out;
}

void upward_product(Eigen::MatrixXd& out, const Eigen::MatrixXd& L, const Eigen::MatrixXd& R, bool accumulate) {
  UpwardRounding up;
  if (!accumulate) out.setZero(L.rows(), R.cols());
  const bool big = !serial_directed_products && R.cols() >= 2 &&
                   static_cast<double>(L.rows()) * static_cast<double>(L.cols()) * static_cast<double>(R.cols()) >= 4e6;
  if (!big) {
    out.noalias() += L * R;
    rounding_barrier(out);
    return;
  }
  const Eigen::Index half = R.cols() / 2;
  run_side_by_side(
      [&] {
        const ThreadRounding<FE_UPWARD> rounding;  // the mode is per thread
        out.rightCols(R.cols() - half).noalias() += L * R.rightCols(R.cols() - half);
        rounding_barrier(out);
      },
      [&] { out.leftCols(half).noalias() += L * R.leftCols(half); });
  rounding_barrier(out);
}

}  // namespace detail

BoundsMatrix certified_product_bounds(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B) {
  return detail::directed_pair(A, B, Eigen::MatrixXd());
}

BoundsMatrix certified_product_bounds(const BallMatrix& A, const Eigen::MatrixXd& B) {
  Eigen::MatrixXd spread;
  if ((A.rad.array() != 0).any()) detail::upward_product(spread, A.rad, B.cwiseAbs(), false);
  return detail::directed_pair(A.mid, B, spread);
}

BoundsMatrix certified_product_bounds(const Eigen::MatrixXd& A, const BallMatrix& B) {
  Eigen::MatrixXd spread;
  if ((B.rad.array() != 0).any()) detail::upward_product(spread, A.cwiseAbs(), B.rad, false);
  return detail::directed_pair(A, B.mid, spread);
}

BoundsMatrix certified_product_bounds(const BallMatrix& A, const BallMatrix& B) {
  const bool a_point = (A.rad.array() == 0).all(), b_point = (B.rad.array() == 0).all();
  if (a_point && b_point) return detail::directed_pair(A.mid, B.mid, Eigen::MatrixXd());
  Eigen::MatrixXd spread;
  if (!b_point) detail::upward_product(spread, A.mid.cwiseAbs(), B.rad, false);
  if (!a_point) {
    Eigen::MatrixXd reach;
    {
      UpwardRounding up;
      reach = B.mid.cwiseAbs() + B.rad;
      detail::rounding_barrier(reach);
    }
    detail::upward_product(spread, A.rad, reach, !b_point);
  }
  return detail::directed_pair(A.mid, B.mid, spread);
}

double norm_inf_upper(const BoundsMatrix& b) {
  UpwardRounding up;
  const Eigen::MatrixXd mag = b.lo.cwiseAbs().cwiseMax(b.hi.cwiseAbs());
  double worst = 0;
  for (Eigen::Index i = 0; i < mag.rows(); ++i) {
    double s = 0;
    for (Eigen::Index j = 0; j < mag.cols(); ++j) s += mag(i, j);
    if (std::isnan(s)) return s;  // a NaN bound proves nothing; callers test "< 1"
    if (s > worst) worst = s;
  }
  detail::rounding_barrier(worst);
  return worst;
}

BoundsMatrix identity_minus(const BoundsMatrix& b) {
  BoundsMatrix out;
  UpwardRounding up;
  const Eigen::MatrixXd I = Eigen::MatrixXd::Identity(b.lo.rows(), b.lo.cols());
  out.hi = I - b.lo;
  out.lo = b.hi - I;
  detail::rounding_barrier(out.lo);
  out.lo = -out.lo;
  return out;
}

}  // namespace attnrank
