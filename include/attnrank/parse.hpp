#pragma once
// Exact text input. Nothing is rounded on the way in: "0.8" is the rational 4/5,
// "4/5" too, "1e-3" is 1/1000. A matrix file is CSV: one row per line, cells
// separated by commas, '#' starts a comment, blank lines are skipped, spaces and
// tabs around a cell are ignored, CRLF line ends and a UTF-8 byte-order mark are
// accepted. Every error names the source, the line, the column and the text.

#include <attnrank/error.hpp>
#include <attnrank/tiers.hpp>

#include <string>
#include <string_view>

namespace attnrank {

/// Limits that keep bad input from exhausting the machine (docs/reliability.md).
struct ParseLimits {
  std::size_t max_file_bytes = std::size_t{256} << 20;  ///< refuse larger files before reading
  std::size_t max_cells = std::size_t{1} << 26;         ///< rows * columns
  long max_exponent = 4096;                             ///< |e| in "1e<e>"
  std::size_t max_digits = 4096;                        ///< digits in one number
};

/// Parses one number: an integer ("-3"), a decimal ("0.8", "1e-3", "-2.5E+4") or a
/// fraction of integers ("4/5", "-1/3"). Throws input_error with a reason (never
/// returns a rounded value). "nan", "inf" and "1/0" are errors.
Rational parse_rational(std::string_view text, const ParseLimits& limits = {});

/// Parses CSV text into an exact matrix; `source` names it in messages (a path or
/// "<argument>"). Throws input_error on an empty matrix, ragged rows, empty or
/// non-numeric cells.
Matrix<Rational> parse_matrix(std::string_view text, const std::string& source,
                              const ParseLimits& limits = {});

/// Reads and parses a CSV file (refusing files larger than limits.max_file_bytes
/// before reading them).
Matrix<Rational> read_matrix(const std::string& path, const ParseLimits& limits = {});

}  // namespace attnrank

#include <attnrank/detail/parse_impl.hpp>
