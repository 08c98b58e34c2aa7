#pragma once
// Matrix products in every tier: multiply(A, B) = A B and
// multiply_transposed(A, B) = A B^T.
//
// double uses Eigen's blocked GEMM. Real and Interval use a kernel on the raw
// MPFR/MPFI values that reuses two temporaries per product (Eigen's generic
// kernel would allocate a Boost temporary per multiply-add). Each entry is the
// plain sum of products in k order, every operation rounded as MPFR/MPFI does: so
// for Interval the result encloses the exact product of the (real) inputs.
// Rational uses Eigen (exact).

#include <attnrank/scalar_traits.hpp>

namespace attnrank {

template <class T>
Matrix<T> multiply(const Matrix<T>& A, const Matrix<T>& B);

template <class T>
Matrix<T> multiply_transposed(const Matrix<T>& A, const Matrix<T>& B);

}  // namespace attnrank

#include <attnrank/detail/product_impl.hpp>
