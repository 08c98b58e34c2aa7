#pragma once
// The one message for a determinant of a non-square matrix (exact and certified).

#include <attnrank/error.hpp>

#include <Eigen/Core>

#include <string>

namespace attnrank::detail {

inline void require_square(Eigen::Index rows, Eigen::Index cols) {
  if (rows != cols)
    throw input_error("determinant of a non-square matrix (" + std::to_string(rows) + " x " + std::to_string(cols) + ")");
}

}  // namespace attnrank::detail
