#pragma once
// Exact input. Nothing is rounded on the way in: "0.8" is the rational 4/5, "4/5"
// too, "1e-3" is 1/1000, a float32 in an .npy file is the dyadic rational it
// stores. A matrix file is text (docs/input.md), an .npy file or a tensor of a
// .safetensors file; every error names the source and the place (line and
// column of text, 0-based index of an array) and the value.
//
// Text: one row per line. The separator is detected per file from the first
// data line: ';' if it has one, else ',', else a tab, else runs of white space
// (NumPy's savetxt). '#' starts a comment, blank lines are skipped, spaces and
// tabs around a cell are ignored, CRLF line ends and a UTF-8 byte-order mark are
// accepted, one trailing separator per line is ignored. A first row that is not
// numbers is a header and is skipped; a header whose first cell is empty (as
// pandas writes it) marks the first column as row labels, which are dropped.
// Decimal commas ("0,5" in a ';' file) are refused, as guessing would be wrong
// for "1,5,2". Everything but the comma format is stated in a note.

#include <attnrank/error.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnrank {

/// The largest n (rows or columns) a matrix may have unless the caller raises
/// ParseLimits (or `attnrank --max-size N` does).
inline constexpr std::size_t default_max_dimension = 8192;

/// Limits that keep bad input from exhausting the machine (docs/reliability.md).
/// Every cap is checked while reading, so input over a cap costs at most the cap
/// (a 2 GB file is refused before a byte is read; a pipe stops at the cap). They
/// apply to every format.
struct ParseLimits {
  std::size_t max_file_bytes = std::size_t{256} << 20;  ///< refuse larger files before reading
  std::size_t max_rows = default_max_dimension;         ///< rows of one matrix
  std::size_t max_columns = default_max_dimension;      ///< columns of one matrix
  std::size_t max_cells = std::size_t{1} << 26;         ///< rows * columns
  long max_exponent = 4096;                             ///< |e| in "1e<e>"
  std::size_t max_digits = 4096;                        ///< digits in one number
  std::size_t max_total_bits = std::size_t{1} << 31;    ///< bits of all numerators and denominators (256 MiB)
};

/// `base` with every matrix dimension capped at `max_size` instead (the command
/// line's --max-size, Python's max_size=): rows and columns, and the cells cap
/// raised to max_size^2 where that is larger, so that an n x n matrix the size
/// allows is not refused by the cells cap. input_error for 0.
inline ParseLimits size_limits(std::size_t max_size, ParseLimits base = {}) {
  if (max_size == 0) throw input_error("max_size: 0 is out of range (the largest n a matrix may have, >= 1)");
  base.max_rows = base.max_columns = max_size;
  if (max_size <= (std::size_t{1} << 31)) base.max_cells = std::max(base.max_cells, max_size * max_size);
  else base.max_cells = std::size_t{1} << 62;
  return base;
}

/// What every reader adds when it refuses -inf: it is how a masked score or the log of
/// a zero weight is written, so where the input is meant as an attention pattern,
/// logits or log-probabilities are the likely mistake (said as a condition: the same
/// readers read any matrix).
inline constexpr const char* minus_infinity_hint =
    " (if this is an attention pattern: -inf is a masked score or the log of a zero weight; attnrank reads "
    "the softmax's outputs, so pass the softmax of the scores, or the exponential of log-probabilities, and the "
    "mask on its own)";

/// What a reader noticed and the user should know, one sentence each ("x.tsv:
/// tab-separated"); the CLI prints them on stderr.
using InputNotes = std::vector<std::string>;

/// Parses one number: an integer ("-3"), a decimal ("0.8", "1e-3", "-2.5E+4") or a
/// fraction of integers ("4/5", "-1/3"). Throws input_error with a reason (never
/// returns a rounded value). "nan", "inf" and "1/0" are errors.
Rational parse_rational(std::string_view text, const ParseLimits& limits = {});

/// Parses matrix text (the format above) into an exact matrix; `source` names it
/// in messages (a path or "<argument>"). Throws input_error on an empty matrix,
/// ragged rows, empty or non-numeric cells, decimal commas and binary data.
/// Appends what it detected to `notes` when given.
Matrix<Rational> parse_matrix(std::string_view text, const std::string& source, const ParseLimits& limits = {},
                              InputNotes* notes = nullptr);

/// Matrix text whose every cell is a plain decimal (digits, a point, an
/// exponent: what NumPy's savetxt and most tools write), enclosed cell by cell in
/// double balls without making rationals: mid the nearest double, rad one ulp of
/// it (0 for integers of up to 15 digits). Guarantee: each decimal lies in its
/// ball. nullopt for anything else (a fraction, a value near the ends of the double
/// range, any input problem): read_matrix then reads it exactly and names what is
/// wrong. For analyses that certify on double balls and need no more.
std::optional<BallMatrix> parse_plain_decimal_balls(std::string_view text, const std::string& source,
                                                    const ParseLimits& limits = {}, InputNotes* notes = nullptr);

/// The whole file as bytes ("-": standard input): a regular file larger than
/// limits.max_file_bytes is refused before it is read; pipes and devices are read
/// at most that far.
std::string read_text_file(const std::string& path, const ParseLimits& limits = {});

/// Reads a matrix in any format attnrank takes, exactly:
///   "-"                           text or .npy on standard input
///   "x.npy", "x.npy[i]", "x.npy[b,h]"   a NumPy array (attnrank/io/npy.hpp)
///   "m.safetensors:NAME", "m.safetensors:NAME[i]"   a tensor (attnrank/io/safetensors.hpp)
///   anything else                 a text file (above); an .npy file is
///                                 recognised by its contents whatever its name
Matrix<Rational> read_matrix(const std::string& path, const ParseLimits& limits = {}, InputNotes* notes = nullptr);

}  // namespace attnrank
