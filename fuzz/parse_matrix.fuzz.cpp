// Fuzz target: the CSV / fraction / decimal parser (io/parse.hpp).
// Oracle: bad text is an input_error naming the source, never a crash; text that parses gives a
// matrix whose every entry, printed as p/q and parsed back, is the same rational.
#include "fuzz_support.hpp"

#include <attnrank/io/parse.hpp>

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attnrank;
  ParseLimits limits;  // small caps keep each run fast; the caps themselves are under test
  limits.max_rows = limits.max_columns = 64;
  limits.max_cells = 1024;
  limits.max_digits = 256;
  limits.max_exponent = 512;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Matrix<Rational> m;
  try {
    m = parse_matrix(text, "<fuzz>", limits);
  } catch (const input_error& e) {
    fuzz::require(std::string_view(e.what()).rfind("<fuzz>: ", 0) == 0, "an error that does not name its source");
    return 0;
  }
  fuzz::require(m.rows() >= 1 && m.cols() >= 1, "an empty matrix was returned");
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      fuzz::require(parse_rational(m(i, j).str()) == m(i, j), "an entry does not survive printing and parsing");
  return 0;
}
