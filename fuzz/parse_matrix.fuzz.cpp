// Fuzz target: the matrix file readers: text (io/parse.hpp), .npy (io/npy.hpp) and
// safetensors (io/safetensors.hpp), chosen by the input's first bytes as read_matrix
// chooses. Oracle: a bad file is an input_error naming the source, never a crash; a
// file that reads gives a matrix whose every entry, printed as p/q and parsed back,
// is the same rational. The corpus has files written by NumPy.
#include "fuzz_support.hpp"

#include <attnrank/io/npy.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/io/safetensors.hpp>

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
    if (is_npy(text)) {
      // Every matrix of the array: the first, then one picked by the last byte.
      const NpyHeader h = parse_npy_header(text, "<fuzz>");
      ArraySelection pick;
      pick.given = h.shape.size() > 2;
      for (std::size_t k = 0; k + 2 < h.shape.size(); ++k)
        pick.indices.push_back(static_cast<long>(data[size - 1] % 7) - 3);
      m = parse_npy(text, "<fuzz>", pick, limits);
    } else if (size > 8 && text[8] == '{') {
      for (const SafetensorsEntry& e : safetensors_index(text, "<fuzz>")) {
        ArraySelection pick;
        pick.given = e.shape.size() > 2;
        pick.indices.assign(e.shape.size() > 2 ? e.shape.size() - 2 : 0, 0);
        m = parse_safetensors(text, "<fuzz>", e.name, pick, limits);
      }
      if (m.size() == 0) return 0;
    } else {
      m = parse_matrix(text, "<fuzz>", limits);
    }
  } catch (const input_error& e) {
    // "<fuzz>: ...", "<fuzz>:TENSOR: ..." or "<fuzz>[0, 1] is nan": the source first, then the place.
    const std::string_view what(e.what());
    fuzz::require(what.rfind("<fuzz>", 0) == 0 && what.size() > 6 && (what[6] == ':' || what[6] == '['),
                  "an error that does not name its source");
    return 0;
  }
  fuzz::require(m.rows() >= 1 && m.cols() >= 1, "an empty matrix was returned");
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      fuzz::require(parse_rational(m(i, j).str()) == m(i, j), "an entry does not survive printing and parsing");
  return 0;
}
