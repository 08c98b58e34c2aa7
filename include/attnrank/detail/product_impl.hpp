#pragma once
// Bodies for attnrank/product.hpp.

#include <cassert>
#include <stdexcept>

namespace attnrank {
namespace detail {

/// C(i, j) = sum_k A(i, k) * Bt(j, k), on raw MPFR or MPFI values. Bt is B
/// transposed so both operands are walked along rows of a row-major copy.
template <class T>
Matrix<T> raw_product(const Matrix<T>& A, const Matrix<T>& Bt) {
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMajor a = A;
  const RowMajor bt = Bt;
  Matrix<T> C(A.rows(), Bt.rows());
  T acc, term;
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    for (Eigen::Index j = 0; j < bt.rows(); ++j) {
      auto* s = acc.backend().data();
      auto* p = term.backend().data();
      if constexpr (std::is_same_v<T, Real>) {
        mpfr_set_zero(s, 1);
        for (Eigen::Index k = 0; k < a.cols(); ++k) {
          mpfr_mul(p, a(i, k).backend().data(), bt(j, k).backend().data(), MPFR_RNDN);
          mpfr_add(s, s, p, MPFR_RNDN);
        }
      } else {
        mpfi_set_ui(s, 0);
        for (Eigen::Index k = 0; k < a.cols(); ++k) {
          mpfi_mul(p, a(i, k).backend().data(), bt(j, k).backend().data());
          mpfi_add(s, s, p);
        }
      }
      C(i, j) = acc;
    }
  }
  return C;
}

}  // namespace detail

template <class T>
Matrix<T> multiply(const Matrix<T>& A, const Matrix<T>& B) {
  if (A.cols() != B.rows()) throw std::invalid_argument("multiply: inner dimensions differ");
  if constexpr (std::is_same_v<T, Real> || std::is_same_v<T, Interval>) {
    return detail::raw_product<T>(A, B.transpose());
  } else {
    return A * B;
  }
}

template <class T>
Matrix<T> multiply_transposed(const Matrix<T>& A, const Matrix<T>& B) {
  if (A.cols() != B.cols()) throw std::invalid_argument("multiply_transposed: column counts differ");
  if constexpr (std::is_same_v<T, Real> || std::is_same_v<T, Interval>) {
    return detail::raw_product<T>(A, B);
  } else {
    return A * B.transpose();
  }
}

}  // namespace attnrank
