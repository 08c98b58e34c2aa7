#pragma once
// Bodies for attnrank/linalg/product.hpp.

#include <attnrank/linalg/detail/packed_product.hpp>

#include <stdexcept>
#include <type_traits>

namespace attnrank {

template <class T>
Matrix<T> multiply(const Matrix<T>& A, const Matrix<T>& B) {
  if (A.cols() != B.rows()) throw std::invalid_argument("multiply: inner dimensions differ");
  if constexpr (scalar_traits<T>::multiprecision) {
    Matrix<T> C(A.rows(), B.cols());
    detail::packed_product(A, B, false, C);
    return C;
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
  } else {
    return A * B.transpose();
  }
}

}  // namespace attnrank
