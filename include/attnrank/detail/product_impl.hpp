#pragma once
// Bodies for attnrank/product.hpp.

#include <attnrank/detail/fixed_point_dot.hpp>
#include <attnrank/detail/packed_product.hpp>

#include <cassert>
#include <stdexcept>

namespace attnrank {
namespace detail {

/// C(i, j) = sum_k A(i, k) * Bt(j, k), on raw MPFI values: one fixed-point dot
/// product per entry (detail/fixed_point_dot.hpp), along rows of row-major
/// copies of A and Bt (B transposed), rows of C dealt to threads
/// (detail/parallel.hpp). Real takes detail/packed_product.hpp.
template <class T>
Matrix<T> raw_product(const Matrix<T>& A, const Matrix<T>& Bt) {
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMajor a = A;
  const RowMajor bt = Bt;
  Matrix<T> C(A.rows(), Bt.rows());
  const double operations = static_cast<double>(a.rows()) * static_cast<double>(bt.rows()) * static_cast<double>(a.cols());
  for_row_blocks(a.rows(), operations, [&](long begin, long end) {
    DotWorkspace workspace;
    T term;
    for (Eigen::Index i = begin; i < end; ++i)
      for (Eigen::Index j = 0; j < bt.rows(); ++j)
        dot(C(i, j).backend().data(), a.data() + i * a.cols(), bt.data() + j * bt.cols(), a.cols(), workspace,
            term.backend().data());
  });
  return C;
}

}  // namespace detail

template <class T>
Matrix<T> multiply(const Matrix<T>& A, const Matrix<T>& B) {
  if (A.cols() != B.rows()) throw std::invalid_argument("multiply: inner dimensions differ");
  if constexpr (std::is_same_v<T, Real>) {
    Matrix<Real> C(A.rows(), B.cols());
    detail::packed_product(A, B, false, C);
    return C;
  } else if constexpr (std::is_same_v<T, Interval>) {
    return detail::raw_product<T>(A, B.transpose());
  } else {
    return A * B;
  }
}

template <class T>
Matrix<T> multiply_transposed(const Matrix<T>& A, const Matrix<T>& B) {
  if (A.cols() != B.cols()) throw std::invalid_argument("multiply_transposed: column counts differ");
  if constexpr (std::is_same_v<T, Real>) {
    Matrix<Real> C(A.rows(), B.rows());
    detail::packed_product(A, B, true, C);
    return C;
  } else if constexpr (std::is_same_v<T, Interval>) {
    return detail::raw_product<T>(A, B);
  } else {
    return A * B.transpose();
  }
}

}  // namespace attnrank
