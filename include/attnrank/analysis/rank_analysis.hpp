#pragma once
// The rank of a matrix as one analysis, in the mode asked: exact (rational
// arithmetic: rank_lower == rank_upper, with pivots and an exact kernel), certified
// (proven bounds from floating-point arithmetic, linalg/certified_rank.hpp) or
// numeric (an SVD with a tolerance: not proven, and the result says so; its
// bounds are named approx_rank_lower / approx_rank_upper, never the names of
// proven bounds). One JSON writer and one text writer serve the CLI and Python.

#include <attnrank/io/parse.hpp>
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/linalg/numeric_rank.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace attnrank {

enum class RankMode { exact, certified, numeric };

/// "exact", "certified" or "numeric"; input_error otherwise.
RankMode parse_rank_mode(const std::string& name);
const char* to_string(RankMode m);

struct RankQuestion {
  RankMode mode = RankMode::exact;
  unsigned bits = 53;                ///< certified mode: working precision
  std::optional<double> tolerance;   ///< numeric mode: singular values above it count
  Eigen::Index top = 0;              ///< numeric mode: only the top largest singular values (Lanczos)
  std::string matrix_name = "matrix";
};

struct RankAnalysis {
  RankMode mode = RankMode::exact;
  Eigen::Index rows = 0, cols = 0;
  std::optional<ExactRank> exact;
  std::optional<CertifiedRank> certified;
  std::optional<ApproxRank> numeric;        ///< numeric mode without top
  std::optional<TopRankBounds> numeric_top; ///< numeric mode with top
  Eigen::Index top = 0;
  std::vector<std::string> notes;           ///< what the conversion to doubles lost (numeric mode)
};

/// input_error on options that do not belong to the mode, or a bad top.
RankAnalysis analyze_rank(const Matrix<Rational>& A, const RankQuestion& q);

/// The same for doubles, each the exact real it denotes: the same answer as for
/// those rationals. The certified mode at <= 53 bits works on them directly (it
/// encloses its data in double balls anyway); the other modes take the rationals.
RankAnalysis analyze_rank(const Eigen::MatrixXd& A, const RankQuestion& q);

/// Reads a matrix argument (io/matrix_spec.hpp) the cheapest way that gives the
/// same bounds, and answers. When the certified mode at <= 53 bits runs: a binary
/// array straight into doubles (read_binary_doubles); decimal text into one-ulp
/// balls (read_plain_decimal_balls), kept when they prove full rank by the
/// one-stage test (the exact route's first test; the bounds are then n = n);
/// otherwise, and for every other mode, exact rationals.
RankAnalysis analyze_rank_argument(const std::string& argument, const RankQuestion& q, const ParseLimits& limits = {},
                                   InputNotes* notes = nullptr);

nlohmann::json to_json(const RankAnalysis& r);  ///< "attnrank/rank/1"
std::string to_text(const RankAnalysis& r);

}  // namespace attnrank
