#pragma once
// softmax_rows for double: the same algorithm as the generic one (shift each row
// by its maximum, e_j / sum_k e_k, sums in column order), arranged by columns so
// every loop runs along contiguous memory and the exponentials go through
// numbers/detail/vector_exp.hpp as one SIMD loop. glibc's exp, one call per entry, was
// more than half of a small forward pass.

#include <attnrank/numbers/detail/vector_exp.hpp>

#include <vector>

namespace attnrank {

template <>
inline Matrix<double> softmax_rows<double>(const Matrix<double>& S) {
  const Eigen::Index rows = S.rows(), cols = S.cols();
  Matrix<double> A(rows, cols);
  if (rows == 0 || cols == 0) return A;
  std::vector<double> top(S.data(), S.data() + rows), sum(static_cast<std::size_t>(rows), 0.0);
  for (Eigen::Index k = 1; k < cols; ++k)
    for (Eigen::Index r = 0; r < rows; ++r) top[r] = S(r, k) > top[r] ? S(r, k) : top[r];
  for (Eigen::Index k = 0; k < cols; ++k)
    for (Eigen::Index r = 0; r < rows; ++r) A(r, k) = S(r, k) - top[r];
  detail::exp_in_place(A.data(), static_cast<std::size_t>(A.size()));
  for (Eigen::Index k = 0; k < cols; ++k)
    for (Eigen::Index r = 0; r < rows; ++r) sum[r] += A(r, k);
  for (Eigen::Index k = 0; k < cols; ++k)
    for (Eigen::Index r = 0; r < rows; ++r) A(r, k) /= sum[r];
  return A;
}

}  // namespace attnrank
