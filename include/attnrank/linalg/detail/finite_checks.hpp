#pragma once
// The entry checks every certified routine starts with: a NaN or an infinite
// entry proves nothing, so it is an input error naming the entry, before any
// arithmetic (certified rank and determinant share these).

#include <attnrank/error.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/scalar_traits.hpp>

#include <cmath>
#include <string>

namespace attnrank::detail {

/// Every entry a finite interval (no NaN, no infinite end), else input_error
/// "WHAT: entry (i, j) is not a finite interval".
inline void require_finite_intervals(const Matrix<Interval>& A, const char* what) {
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j)
      if (!scalar_traits<Interval>::is_finite(A(i, j)))
        throw input_error(std::string(what) + ": " + entry_text("the matrix", static_cast<long>(i), static_cast<long>(j)) +
                              " is not a finite interval",
                          "", static_cast<long>(i + 1), static_cast<long>(j + 1));
}

inline void require_finite_ball(const BallMatrix& A) {
  for (Eigen::Index i = 0; i < A.mid.rows(); ++i)
    for (Eigen::Index j = 0; j < A.mid.cols(); ++j)
      if (!std::isfinite(A.mid(i, j)) || !std::isfinite(A.rad(i, j)))
        throw input_error("certified rank: " + entry_text("the matrix", static_cast<long>(i), static_cast<long>(j)) +
                              " is not a finite number (" + shortest_decimal(A.mid(i, j)) + ")",
                          "", static_cast<long>(i + 1), static_cast<long>(j + 1));
}

}  // namespace attnrank::detail
