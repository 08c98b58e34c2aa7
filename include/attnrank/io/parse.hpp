#pragma once
// Exact text input. Nothing is rounded on the way in: "0.8" is the rational 4/5,
// "4/5" too, "1e-3" is 1/1000. A matrix file is CSV: one row per line, cells
// separated by commas, '#' starts a comment, blank lines are skipped, spaces and
// tabs around a cell are ignored, CRLF line ends and a UTF-8 byte-order mark are
// accepted. Every error names the source, the line, the column and the text.

#include <attnrank/error.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <string>
#include <string_view>

namespace attnrank {

/// The largest n (rows or columns) a matrix may have unless the caller raises
/// ParseLimits (or `attnrank --max-size N` does).
inline constexpr std::size_t default_max_dimension = 8192;

/// Limits that keep bad input from exhausting the machine (docs/reliability.md).
/// Every cap is checked while reading, so input over a cap costs at most the cap
/// (a 2 GB file is refused before a byte is read; a pipe stops at the cap).
struct ParseLimits {
  std::size_t max_file_bytes = std::size_t{256} << 20;  ///< refuse larger files before reading
  std::size_t max_rows = default_max_dimension;         ///< rows of one matrix
  std::size_t max_columns = default_max_dimension;      ///< columns of one matrix
  std::size_t max_cells = std::size_t{1} << 26;         ///< rows * columns
  long max_exponent = 4096;                             ///< |e| in "1e<e>"
  std::size_t max_digits = 4096;                        ///< digits in one number
  std::size_t max_total_bits = std::size_t{1} << 31;    ///< bits of all numerators and denominators (256 MiB)
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

/// The whole file as bytes: a regular file larger than limits.max_file_bytes is
/// refused before it is read; pipes and devices are read at most that far.
std::string read_text_file(const std::string& path, const ParseLimits& limits = {});

/// Reads and parses a CSV file (read_text_file, then parse_matrix). A regular file larger than limits.max_file_bytes
/// is refused before it is read; pipes and devices are read at most that far.
Matrix<Rational> read_matrix(const std::string& path, const ParseLimits& limits = {});

}  // namespace attnrank

#include <attnrank/io/detail/parse_impl.hpp>
