#pragma once
// Matrices handed over value by value -- Python's lists of rows and object arrays --
// read exactly and refused in the very words of the file readers, so that the
// command line and Python say the same of the same bad value:
//   * a value that is text (a str, an int, a Fraction's "p/q", a Decimal) is a cell
//     of a text file: parse_rational reads it and gives its reasons;
//   * a float is an element of a binary array: the double it stores, and a NaN or
//     infinity is refused as decode_binary_matrix refuses one ("is nan: not a
//     finite number");
//   * a missing value (None) is an empty cell.
// Entries are placed as every array's are, 0-based and labelled ("A[1, 2]
// (0-based)"); a text file's places are its lines and cells instead. A row whose
// length differs from row 0's is refused naming both; a single row of values (a
// 1-D list) is a 1 x n matrix, as a 1-D .npy array and a one-line text file are.

#include <attnrank/io/parse.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <string>
#include <vector>

namespace attnrank {

/// One value of a matrix handed over value by value.
struct CellValue {
  enum class Kind { text, binary_float, missing };
  Kind kind = Kind::text;
  std::string text;  ///< text: the cell as written
  double value = 0;  ///< binary_float: the double it is (NaN and infinities included)

  static CellValue of_text(std::string t) { return {Kind::text, std::move(t), 0}; }
  static CellValue of_double(double d) { return {Kind::binary_float, {}, d}; }
  static CellValue missing_value() { return {Kind::missing, {}, 0}; }
};

using CellRows = std::vector<std::vector<CellValue>>;

/// The exact matrix `rows` holds. `source` names it in messages. Throws input_error
/// on an empty matrix, rows of unequal length ("A: row 1 has 2 entries, but row 0
/// has 3 (rows must have equal length)"), sizes over `limits` (the words of the
/// binary readers) and on a bad value, naming its place ("A[1, 2] (0-based): 'x' is
/// not a number: ...", or "A[1, 2] (0-based) is nan: not a finite number"), with
/// the entry's 1-based row and column in the error's row() and column().
Matrix<Rational> read_cell_rows(const CellRows& rows, const std::string& source, const ParseLimits& limits = {});

}  // namespace attnrank
