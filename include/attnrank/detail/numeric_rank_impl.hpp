#pragma once
// Bodies for attnrank/numeric_rank.hpp.

#include <Spectra/SymEigsSolver.h>

#include <algorithm>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif
#include <cmath>
#include <limits>
#include <string>

namespace attnrank {
namespace detail {

inline void require_finite(const Eigen::MatrixXd& A, const char* what) {
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j)
      if (!std::isfinite(A(i, j)))
        throw input_error(std::string(what) + ": entry (" + std::to_string(i + 1) + ", " + std::to_string(j + 1) +
                          ") is not a finite number");
}

/// y = A^T (A x) for a tall A (or A (A^T x) for a wide one): the Gram matrix as a
/// Spectra operator, without forming it (forming it costs a GEMM that Lanczos
/// rarely earns back). The two GEMVs split A into row blocks across OpenMP
/// threads when the program is built with OpenMP; Eigen's GEMV alone would not.
class GramOperator {
 public:
  using Scalar = double;
  explicit GramOperator(const Eigen::MatrixXd& A) : A_(A), tall_(A.rows() >= A.cols()) {}
  Eigen::Index rows() const { return tall_ ? A_.cols() : A_.rows(); }
  Eigen::Index cols() const { return rows(); }
  void perform_op(const double* x_in, double* y_out) const {
    const Eigen::Index d = rows();
    Eigen::Map<const Eigen::VectorXd> x(x_in, d);
    Eigen::Map<Eigen::VectorXd> y(y_out, d);
    if (!tall_) {  // A (A^T x): A^T x is a GEMV on columns; keep it simple
      const Eigen::VectorXd t = A_.transpose() * x;
      y.noalias() = A_ * t;
      return;
    }
    const Eigen::Index m = A_.rows();
    int parts = 1;
#if defined(_OPENMP)
    parts = std::max(1, std::min(omp_get_max_threads(), static_cast<int>(m / 256)));
#endif
    std::vector<Eigen::VectorXd> partial(static_cast<std::size_t>(parts));
#if defined(_OPENMP)
#pragma omp parallel for num_threads(parts) schedule(static)
#endif
    for (int p = 0; p < parts; ++p) {
      const Eigen::Index begin = m * p / parts, end = m * (p + 1) / parts;
      const auto block = A_.middleRows(begin, end - begin);
      const Eigen::VectorXd t = block * x;
      partial[static_cast<std::size_t>(p)].noalias() = block.transpose() * t;
    }
    y = partial[0];
    for (int p = 1; p < parts; ++p) y += partial[static_cast<std::size_t>(p)];
  }

 private:
  const Eigen::MatrixXd& A_;
  bool tall_;
};

}  // namespace detail

inline NumericRank approx_rank(const Eigen::MatrixXd& A, std::optional<double> tolerance) {
  detail::require_finite(A, "numeric rank");
  if (tolerance && !(*tolerance >= 0)) throw input_error("numeric rank: the tolerance must be >= 0");
  NumericRank out;
  if (A.size() == 0) {
    out.gap = std::numeric_limits<double>::infinity();
    return out;
  }
  out.singular_values = Eigen::BDCSVD<Eigen::MatrixXd>(A).singularValues();
  const Eigen::VectorXd& s = out.singular_values;
  out.tolerance = tolerance ? *tolerance
                            : s(0) * static_cast<double>(std::max(A.rows(), A.cols())) *
                                  std::numeric_limits<double>::epsilon();
  while (out.rank < s.size() && s(out.rank) > out.tolerance) ++out.rank;
  if (out.rank == s.size() || s(out.rank) == 0)
    out.gap = out.rank == 0 ? 0 : std::numeric_limits<double>::infinity();
  else
    out.gap = out.rank == 0 ? 0 : s(out.rank - 1) / s(out.rank);
  return out;
}

inline TopSingularValues approx_top_singular_values(const Eigen::MatrixXd& A, Eigen::Index k) {
  detail::require_finite(A, "top singular values");
  const Eigen::Index d = std::min(A.rows(), A.cols());
  if (k < 1 || k >= d)
    throw input_error("top singular values: k = " + std::to_string(k) + " must be in [1, " + std::to_string(d - 1) +
                      "] for a " + std::to_string(A.rows()) + " x " + std::to_string(A.cols()) +
                      " matrix (use approx_rank for all of them)");
  // Spectra needs k < ncv <= d; about 2k + 1 is its usual advice.
  const Eigen::Index ncv = std::min(d, std::max<Eigen::Index>(2 * k + 1, 20));
  detail::GramOperator op(A);
  Spectra::SymEigsSolver<detail::GramOperator> eigs(op, k, ncv);
  eigs.init();
  TopSingularValues out;
  out.converged = eigs.compute(Spectra::SortRule::LargestAlge, 1000, 1e-10);
  out.values = eigs.eigenvalues().head(out.converged).cwiseMax(0.0).cwiseSqrt();
  return out;
}

inline LowRankDistance approx_low_rank_distance(const Eigen::MatrixXd& A, Eigen::Index k) {
  const Eigen::Index d = std::min(A.rows(), A.cols());
  if (k < 0 || k >= d)
    throw input_error("low-rank distance: k = " + std::to_string(k) + " must be in [0, " + std::to_string(d - 1) + "]");
  detail::require_finite(A, "low-rank distance");
  const double frobenius2 = A.squaredNorm();
  Eigen::VectorXd s;
  if (k + 1 < d) {
    const TopSingularValues top = approx_top_singular_values(A, k + 1);
    if (top.converged < k + 1) throw std::runtime_error("Lanczos did not converge for the top singular values");
    s = top.values;
  } else {
    s = Eigen::BDCSVD<Eigen::MatrixXd>(A).singularValues();
  }
  LowRankDistance out;
  out.spectral = s(k);
  // ||A - A_k||_F^2 = ||A||_F^2 - sum_(i<=k) sigma_i^2; clamp the rounding below 0.
  out.frobenius = std::sqrt(std::max(0.0, frobenius2 - s.head(k).squaredNorm()));
  return out;
}

}  // namespace attnrank
