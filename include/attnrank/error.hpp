#pragma once
// The two error channels of attnrank (docs/architecture.md, "Errors"):
//  * misuse -- bad text, wrong shapes, values out of the domain -- throws
//    `input_error` with a message a person can act on; the CLI maps it to exit 2;
//  * failure to certify is never an exception: it is a result (bounds that do not
//    meet, an `undecided` verdict, a decimal that could not be certified).
// A third, which no input should ever reach: `internal_error`, thrown when the
// library's own last check refuses a result it computed (a band that is not a
// band, a verdict its bounds do not support). It is a bug to report, never an
// answer: the CLI exits 1, Python raises RuntimeError.

#include <stdexcept>
#include <string>
#include <utility>

namespace attnrank {

/// The input is wrong: a file that cannot be read, text that is not a number,
/// shapes that do not fit, a value outside the domain. `what()` names the place
/// (file, row, column, value) so the user can fix it.
///
/// `subject()` names the input a message is about when the library knows it by
/// name only ("X", "W^Q", "embeddings X"): a caller that knows where that input
/// came from (a file) adds it, without reading the message. Empty otherwise.
/// `row()` and `column()` give the place, 1-based (index + 1), when the message is
/// about one entry (for text, the line and the cell on it); 0 when it is not. The
/// message itself names an entry as entry_text does.
class input_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
  input_error(const std::string& message, std::string subject, long row = 0, long column = 0)
      : std::invalid_argument(message), subject_(std::move(subject)), row_(row), column_(column) {}

  const std::string& subject() const noexcept { return subject_; }
  long row() const noexcept { return row_; }
  long column() const noexcept { return column_; }

 private:
  std::string subject_;
  long row_ = 0, column_ = 0;
};

/// How every message names an entry, a row and a column of a matrix: NumPy's
/// indexing, 0-based and labelled, "A[2, 3] (0-based)", "A[2, :] (0-based)" -- one
/// convention whichever adapter shows it. (A text file's lines and cells keep the
/// 1-based "line 3, column 4" of editors: they are places in the file.)
inline std::string entry_text(const std::string& matrix, long row, long column) {
  return matrix + "[" + std::to_string(row) + ", " + std::to_string(column) + "] (0-based)";
}
inline std::string row_text(const std::string& matrix, long row) {
  return matrix + "[" + std::to_string(row) + ", :] (0-based)";
}

/// A result failed the library's own check before leaving it (analysis/result_guard.hpp):
/// a bug in attnrank, not in the input. `what()` names the result and the band.
class internal_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace attnrank
