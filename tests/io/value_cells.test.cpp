// Tests for attnrank/io/value_cells.hpp: values handed over one by one are read
// exactly, and refused in the words the file readers use for the same value -- a text
// value as a text file's cell, a float as an .npy element, None as an empty cell.
#include <attnrank/io/binary_array.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/io/value_cells.hpp>

#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <limits>
#include <string>

using namespace attnrank;

namespace {

/// The message of the input_error `read` throws ("" when it throws none).
template <class Read>
std::string refusal(Read&& read) {
  try {
    read();
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

/// What a message says after its place: "A[1, 2] (0-based): why" and
/// "a.csv: line 2, column 3: why" both give "why".
std::string reason(const std::string& message, const std::string& place) {
  REQUIRE(message.rfind(place, 0) == 0);
  return message.substr(place.size());
}

Rational exact(double d) {
  Rational q;
  mpq_set_d(q.backend().data(), d);
  return q;
}

}  // namespace

TEST_CASE("attnrank::read_cell_rows") {
  SECTION("text, floats and integers are read exactly") {
    const CellRows rows = {{CellValue::of_text("1/3"), CellValue::of_double(0.1), CellValue::of_text("-2")},
                           {CellValue::of_text("0.8"), CellValue::of_double(5e-324), CellValue::of_text("1e-3")}};
    const Matrix<Rational> m = read_cell_rows(rows, "A");
    CHECK(m(0, 0) == Rational(1, 3));
    CHECK(m(0, 1) == exact(0.1));  // the double's own value, not 1/10
    CHECK(m(0, 1) != Rational(1, 10));
    CHECK(m(0, 2) == -2);
    CHECK(m(1, 0) == Rational(4, 5));
    CHECK(m(1, 1) == exact(5e-324));
    CHECK(m(1, 2) == Rational(1, 1000));
  }
  SECTION("a NaN or an infinity is refused as an .npy element is") {
    for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
      const std::string message =
          refusal([&] { read_cell_rows({{CellValue::of_double(0.5), CellValue::of_double(bad)}}, "A"); });
      const std::string file =
          refusal([&] { refuse_nonfinite_element("a.npy", 0, 1, bad); });
      CHECK(reason(message, "A[0, 1] (0-based)") == reason(file, "a.npy[0, 1] (0-based)"));
    }
  }
  SECTION("None is an empty cell") {
    const std::string message =
        refusal([] { read_cell_rows({{CellValue::of_text("1"), CellValue::missing_value()}}, "A"); });
    const std::string file = refusal([] { parse_matrix("1,,2\n", "a.csv"); });
    CHECK(message == "A[0, 1] (0-based): empty cell (expected a number)");
    CHECK(reason(file, "a.csv: line 1, column 2") == ": empty cell (expected a number)");
  }
  SECTION("rows of unequal length name both, 0-based") {
    const std::string message = refusal([] {
      read_cell_rows({{CellValue::of_text("1"), CellValue::of_text("2")}, {CellValue::of_text("3")}}, "A");
    });
    CHECK(message == "A: row 1 has 1 entries, but row 0 has 2 (rows must have equal length)");
  }
  SECTION("an empty matrix and the size limits, in the binary readers' words") {
    CHECK(refusal([] { read_cell_rows({}, "A"); }) == "A: the matrix is empty (0 x 0)");
    ParseLimits small = size_limits(2);
    const CellRows three(1, std::vector<CellValue>(3, CellValue::of_text("1")));
    const std::string message = refusal([&] { read_cell_rows(three, "A", small); });
    CHECK(message == refusal([&] { require_matrix_size(1, 3, "A", small); }));
    CHECK(message.find("max_size") != std::string::npos);
  }
  SECTION("a word is not a number, not a malformed exponent") {
    CHECK(refusal([] { read_cell_rows({{CellValue::of_text("None")}}, "A"); }) ==
          "A[0, 0] (0-based): 'None' is not a number: expected an integer, a decimal or p/q");
  }
}

TEST_CASE("attnrank::read_cell_rows and parse_matrix agree", "[property]") {
  // Any cell: a number, a word, a broken number; the two readers accept the same
  // cells, read them as the same rational, and refuse the others for the same reason.
  const auto cell = rc::gen::oneOf(
      rc::gen::element<std::string>("nan", "-inf", "Infinity", "None", "true", "1e", "1e+", "--1", "1/0", "1 / 2",
                                    "0x10", "1.2.3", "e5", ".", "+", "(1+2j)", "1e99999", "3/-4"),
      rc::gen::map(rc::gen::inRange(-1000, 1000), [](int k) { return std::to_string(k); }),
      rc::gen::map(rc::gen::pair(rc::gen::inRange(-999, 999), rc::gen::inRange(1, 999)),
                   [](std::pair<int, int> p) { return std::to_string(p.first) + "/" + std::to_string(p.second); }),
      rc::gen::map(rc::gen::inRange(0, 100000), [](int k) { return std::to_string(k) + "e-3"; }),
      rc::gen::container<std::string>(rc::gen::element('1', 'e', '.', '-', '/', 'x')));
  rc::prop("a text value is read, or refused, as the same cell of a text file", [&] {
    const std::string text = *cell;
    RC_PRE(!text.empty() && text.find_first_of(",;\t\n #") == std::string::npos);
    const long i = *rc::gen::inRange(0, 3), j = *rc::gen::inRange(0, 3);
    CellRows rows(3, std::vector<CellValue>(3, CellValue::of_text("1")));
    rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = CellValue::of_text(text);
    std::string csv;
    for (long r = 0; r < 3; ++r)
      for (long c = 0; c < 3; ++c) csv += (r == i && c == j ? text : std::string("1")) + (c == 2 ? "\n" : ",");
    Matrix<Rational> from_values, from_file;
    const std::string values_error = refusal([&] { from_values = read_cell_rows(rows, "A"); });
    const std::string file_error = refusal([&] { from_file = parse_matrix(csv, "a.csv"); });
    RC_ASSERT(values_error.empty() == file_error.empty());
    if (values_error.empty()) {
      RC_ASSERT(from_values == from_file);
    } else {
      const std::string at = entry_text("A", i, j), line = "a.csv: line " + std::to_string(i + 1) + ", column " +
                                                             std::to_string(j + 1);
      RC_ASSERT(values_error.rfind(at, 0) == 0);
      RC_ASSERT(file_error.rfind(line, 0) == 0);
      RC_ASSERT(values_error.substr(at.size()) == file_error.substr(line.size()));
    }
  });
}
