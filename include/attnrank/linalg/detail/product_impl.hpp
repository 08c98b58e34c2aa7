#pragma once
// Bodies for attnrank/linalg/product.hpp.

#include <attnrank/linalg/detail/packed_product.hpp>

#include <stdexcept>
#include <type_traits>

namespace attnrank {
namespace detail {

/// Below this many multiply-adds a double product runs on the calling thread.
/// Eigen splits every product above 50 000 across its OpenMP threads, and on a
/// loaded machine a join that waits for a descheduled worker costs a scheduler
/// slice: a 0.15 ms layer pass took 48 ms at the 95th percentile beside two busy
/// processes, 0.25 ms on one thread (docs/performance.md, "The double pass on a
/// loaded machine"). Idle, one thread is also faster at that size.
inline constexpr double calling_thread_gemm_work = 4.0 * 1024 * 1024;

/// A B (or A B^T) by Eigen's blocked GEMM kernel on the calling thread only:
/// Eigen's thread count is process-wide, so the kernel is called directly.
inline Eigen::MatrixXd gemm_on_calling_thread(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B, bool b_transposed) {
  using Eigen::ColMajor;
  using Eigen::Dynamic;
  using Eigen::Index;
  using Eigen::RowMajor;
  const Index rows = A.rows(), cols = b_transposed ? B.rows() : B.cols(), depth = A.cols();
  Eigen::MatrixXd C = Eigen::MatrixXd::Zero(rows, cols);  // the kernel adds to C
  if (rows == 0 || cols == 0 || depth == 0) return C;
  Eigen::internal::gemm_blocking_space<ColMajor, double, double, Dynamic, Dynamic, Dynamic> blocking(rows, cols, depth, 1,
                                                                                                  true);
  if (b_transposed)  // B^T of a column-major B is B's storage read row-major
    Eigen::internal::general_matrix_matrix_product<Index, double, ColMajor, false, double, RowMajor, false, ColMajor, 1>::run(
        rows, cols, depth, A.data(), A.outerStride(), B.data(), B.outerStride(), C.data(), 1, C.outerStride(), 1.0,
        blocking, nullptr);
  else
    Eigen::internal::general_matrix_matrix_product<Index, double, ColMajor, false, double, ColMajor, false, ColMajor, 1>::run(
        rows, cols, depth, A.data(), A.outerStride(), B.data(), B.outerStride(), C.data(), 1, C.outerStride(), 1.0,
        blocking, nullptr);
  return C;
}

/// Whether a double product of this shape goes to gemm_on_calling_thread: big
/// enough for Eigen's blocked kernel (Eigen itself evaluates products with
/// rows + cols + depth < 20 coefficient by coefficient), too small for threads.
inline bool on_calling_thread(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
  const double work = static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(depth);
  return rows + cols + depth >= 20 && work < calling_thread_gemm_work;
}

}  // namespace detail

template <class T>
Matrix<T> multiply(const Matrix<T>& A, const Matrix<T>& B) {
  if (A.cols() != B.rows()) throw std::invalid_argument("multiply: inner dimensions differ");
  if constexpr (scalar_traits<T>::multiprecision) {
    Matrix<T> C(A.rows(), B.cols());
    detail::packed_product(A, B, false, C);
    return C;
  } else if constexpr (std::is_same_v<T, double>) {
    if (detail::on_calling_thread(A.rows(), B.cols(), A.cols())) return detail::gemm_on_calling_thread(A, B, false);
    return A * B;
  } else {
    return A * B;
  }
}

template <class T>
Matrix<T> multiply_transposed(const Matrix<T>& A, const Matrix<T>& B) {
  if (A.cols() != B.cols()) throw std::invalid_argument("multiply_transposed: column counts differ");
  if constexpr (scalar_traits<T>::multiprecision) {
    Matrix<T> C(A.rows(), B.rows());
    detail::packed_product(A, B, true, C);
    return C;
  } else if constexpr (std::is_same_v<T, double>) {
    if (detail::on_calling_thread(A.rows(), B.rows(), A.cols())) return detail::gemm_on_calling_thread(A, B, true);
    return A * B.transpose();
  } else {
    return A * B.transpose();
  }
}

}  // namespace attnrank
