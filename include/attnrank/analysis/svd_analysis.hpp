#pragma once
// Certified bounds on the largest singular values of a matrix as one analysis
// (linalg/certified_svd.hpp): lower <= sigma_i <= upper for i = 1..top, and with
// `gaps` proven separations sigma_i - sigma_(i+1) >= gap. A bound that could not
// be proven finite is JSON null (the text says "inf"); a gap not proven positive
// is null ("not separated"). One JSON writer and one text writer.

#include <attnrank/io/parse.hpp>
#include <attnrank/linalg/certified_svd.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

struct SvdQuestion {
  std::optional<Eigen::Index> top;  ///< how many, largest first; nullopt: all min(rows, cols)
  bool gaps = false;
  std::string matrix_name = "matrix";
};

struct SvdAnalysis {
  Eigen::Index rows = 0, cols = 0, top = 0;
  std::string matrix_name;
  bool gaps = false;
  CertifiedSingularValues values;
  std::vector<double> gap_lower;  ///< certified_gaps(values): 0 when not separated
};

/// input_error on top outside [1, min(rows, cols)], or an entry beyond the
/// double range (named by row and column).
SvdAnalysis analyze_svd(const Matrix<Rational>& A, const SvdQuestion& q);

/// The same for doubles, each the exact real it denotes (balls of radius 0).
SvdAnalysis analyze_svd(const Eigen::MatrixXd& A, const SvdQuestion& q);

/// Reads a matrix argument straight into doubles when it is a binary array
/// (read_binary_doubles), as exact rationals otherwise, and answers: the same
/// answer either way, since the singular values are certified on double balls.
SvdAnalysis analyze_svd_argument(const std::string& argument, const SvdQuestion& q, const ParseLimits& limits = {},
                                 InputNotes* notes = nullptr);

nlohmann::json to_json(const SvdAnalysis& s);  ///< "attnrank/svd/1"
std::string to_text(const SvdAnalysis& s);

}  // namespace attnrank
