#pragma once
// Matrix products in every tier: multiply(A, B) = A B and
// multiply_transposed(A, B) = A B^T.
//
// double uses Eigen's blocked GEMM. Real and Interval compute each entry as one
// dot product on a fixed-point accumulator (linalg/detail/fixed_point_dot.hpp): exact
// significand products summed exactly as integers, rounded once. For Real the
// entry is the correctly rounded exact sum; for Interval its ends are the ends of
// the exact interval product rounded outward, so it encloses the exact product of
// the (real) inputs. (Past a 2^16384 span of magnitudes, see that header.)
// Rational uses Eigen (exact).

#include <attnrank/numbers/scalar_traits.hpp>

namespace attnrank {

template <class T>
Matrix<T> multiply(const Matrix<T>& A, const Matrix<T>& B);

template <class T>
Matrix<T> multiply_transposed(const Matrix<T>& A, const Matrix<T>& B);

}  // namespace attnrank

#include <attnrank/linalg/detail/product_impl.hpp>
