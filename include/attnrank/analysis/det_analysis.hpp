#pragma once
// The determinant of a square matrix as one analysis: exact (a rational, with a
// decimal rounded to `digits` significant digits beside it) or certified (an
// enclosure [det_lower, det_upper] proven by linalg/certified_determinant.hpp,
// printed outward so that the text still encloses it). One JSON writer and one
// text writer serve the CLI and Python.

#include <attnrank/linalg/certified_determinant.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace attnrank {

/// "exact" -> false, "certified" -> true; input_error naming both otherwise.
bool det_mode_is_certified(const std::string& mode);

struct DetQuestion {
  bool certified = false;  ///< false: exact
  unsigned bits = 53;      ///< certified: working precision
  int digits = 17;         ///< significant digits printed
  std::string matrix_name = "matrix";
};

struct DetAnalysis {
  Eigen::Index n = 0;
  int digits = 17;
  std::optional<Rational> exact;
  std::optional<CertifiedDeterminant> certified;
};

/// input_error on a matrix that is not square, or bits given for the exact mode.
DetAnalysis analyze_det(const Matrix<Rational>& A, const DetQuestion& q);

nlohmann::json to_json(const DetAnalysis& d);  ///< "attnrank/det/1"
std::string to_text(const DetAnalysis& d);

}  // namespace attnrank
