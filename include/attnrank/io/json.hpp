#pragma once
// Matrices as JSON arrays of rows, the form every command's --json output and
// every certificate uses. Doubles are written as JSON numbers (nlohmann's
// shortest round-trip form, so reading one back gives the same double);
// rationals as exact strings "p/q" or "p", never rounded.

#include <attnrank/numbers/tiers.hpp>

#include <Eigen/Dense>
#include <nlohmann/json.hpp>

namespace attnrank {

/// A double matrix, one JSON array per row, entries as JSON numbers.
inline nlohmann::json matrix_json(const Eigen::MatrixXd& M) {
  nlohmann::json rows = nlohmann::json::array();
  for (Eigen::Index i = 0; i < M.rows(); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (Eigen::Index j = 0; j < M.cols(); ++j) row.push_back(M(i, j));
    rows.push_back(row);
  }
  return rows;
}

/// An exact matrix, one JSON array per row, entries as exact strings.
inline nlohmann::json rational_matrix_json(const Matrix<Rational>& M) {
  nlohmann::json rows = nlohmann::json::array();
  for (Eigen::Index i = 0; i < M.rows(); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (Eigen::Index j = 0; j < M.cols(); ++j) row.push_back(M(i, j).str());
    rows.push_back(row);
  }
  return rows;
}

}  // namespace attnrank
