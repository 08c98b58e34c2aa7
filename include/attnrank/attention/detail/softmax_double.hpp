#pragma once
// softmax_rows for double: the same algorithm as the generic one (shift each row
// by its maximum, e_j / sum_k e_k, sums in column order), arranged by columns so
// every loop runs along contiguous memory and the exponentials go through
// numbers/detail/vector_exp.hpp as one SIMD loop. glibc's exp, one call per entry, was
// more than half of a small forward pass. Masked entries are shifted to -inf,
// whose exp is exactly 0 (numbers/detail/vector_exp.hpp), so the masked
// version is the same loop.

#include <attnrank/numbers/detail/vector_exp.hpp>

#include <limits>
#include <vector>

namespace attnrank {

namespace detail {

inline Matrix<double> softmax_rows_double(const Matrix<double>& S, const Mask* mask) {
  const Eigen::Index rows = S.rows(), cols = S.cols();
  if (mask) mask->require_shape(rows, cols, "the score matrix");
  Matrix<double> A(rows, cols);
  if (rows == 0 || cols == 0) return A;
  constexpr double minus_inf = -std::numeric_limits<double>::infinity();
  std::vector<double> top(static_cast<std::size_t>(rows), minus_inf), sum(static_cast<std::size_t>(rows), 0.0);
  if (!mask) {  // the hot path of the double tier: no test per entry, so it vectorises
    for (Eigen::Index k = 0; k < cols; ++k)
      for (Eigen::Index r = 0; r < rows; ++r) top[r] = S(r, k) > top[r] ? S(r, k) : top[r];
    for (Eigen::Index k = 0; k < cols; ++k)
      for (Eigen::Index r = 0; r < rows; ++r) A(r, k) = S(r, k) - top[r];
  } else {
    for (Eigen::Index k = 0; k < cols; ++k)
      for (Eigen::Index r = 0; r < rows; ++r)
        if (mask->allows(r, k)) top[r] = S(r, k) > top[r] ? S(r, k) : top[r];
    for (Eigen::Index k = 0; k < cols; ++k)
      for (Eigen::Index r = 0; r < rows; ++r) A(r, k) = mask->allows(r, k) ? S(r, k) - top[r] : minus_inf;
  }
  detail::exp_in_place(A.data(), static_cast<std::size_t>(A.size()));
  for (Eigen::Index k = 0; k < cols; ++k)
    for (Eigen::Index r = 0; r < rows; ++r) sum[r] += A(r, k);
  for (Eigen::Index k = 0; k < cols; ++k)
    for (Eigen::Index r = 0; r < rows; ++r) A(r, k) /= sum[r];
  return A;
}

}  // namespace detail

template <>
inline Matrix<double> softmax_rows<double>(const Matrix<double>& S) {
  return detail::softmax_rows_double(S, nullptr);
}

template <>
inline Matrix<double> softmax_rows<double>(const Matrix<double>& S, const Mask& mask) {
  return detail::softmax_rows_double(S, &mask);
}

}  // namespace attnrank
