#pragma once
// What every analysis's JSON document shares: the "schema" key naming its type
// and version, and proven bounds written so that the text is still the bound.
//
// Guarantee: upper_bound_json(x) is a decimal string >= x (17 significant
// digits, rounded up), lower_bound_json(x) one <= x (rounded down); an infinite
// bound (nothing proven) is JSON null, never a number that looks proven.

#include <attnrank/numbers/decimal.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace attnrank {

/// `j` with "schema": "attnrank/<type>/1" (docs/schema/<type>.schema.json).
inline nlohmann::json json_document(nlohmann::json j, const std::string& type) {
  j["schema"] = "attnrank/" + type + "/1";
  return j;
}

inline nlohmann::json upper_bound_json(double x) {
  return std::isfinite(x) ? nlohmann::json(format_upper_bound(x, 17)) : nlohmann::json(nullptr);
}

inline nlohmann::json lower_bound_json(double x) {
  return std::isfinite(x) ? nlohmann::json(format_lower_bound(x, 17)) : nlohmann::json(nullptr);
}

/// What a report says when a target's rows do not sum to 1: the command line's
/// note (on stderr with --json) and Python's InputWarning.
inline constexpr const char* rows_not_normalised_note =
    "rows do not sum to 1; softmax normalises rows, so the answer is about A / rowsums";

/// Whether every row of A sums exactly to 1. Softmax normalises rows, so a
/// verdict is about A / rowsums either way; reports say so when it matters.
inline bool rows_sum_to_one(const Matrix<Rational>& A) {
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    Rational sum = 0;
    for (Eigen::Index j = 0; j < A.cols(); ++j) sum += A(i, j);
    if (sum != 1) return false;
  }
  return true;
}

}  // namespace attnrank
