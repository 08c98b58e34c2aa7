// Tests for attnrank/io/parse.hpp: exact parsing and errors that name the place.
#include "support.hpp"

using namespace attnrank;
using attnrank::test::gen_rational;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_matrix(text, "m.csv");
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("attnrank::parse_rational") {
  SECTION("decimals, exponents and fractions are exact") {
    CHECK(parse_rational("0.8") == Rational(4, 5));
    CHECK(parse_rational("4/5") == Rational(4, 5));
    CHECK(parse_rational("1e-3") == Rational(1, 1000));
    CHECK(parse_rational("-2.5E+2") == Rational(-250));
    CHECK(parse_rational(" +7 ") == Rational(7));
    CHECK(parse_rational(".5") == Rational(1, 2));
    CHECK(parse_rational("5.") == Rational(5));
    CHECK(parse_rational("-0") == Rational(0));
    CHECK(parse_rational("-1/3") == Rational(-1, 3));
    CHECK(parse_rational("010") == Rational(10));  // decimal, never octal
    CHECK(parse_rational("0.08") == Rational(2, 25));
    CHECK(parse_rational("08/09") == Rational(8, 9));
    CHECK(parse_rational("6/-4") == Rational(-3, 2));
    CHECK(parse_rational("0.1") != Rational(0.1));  // not the double nearest 0.1
    CHECK(parse_rational("1e999") == Rational(Integer("1" + std::string(999, '0'))));
  }
  SECTION("anything else is an error that quotes the text") {
    for (const char* bad : {"", "abc", "1/0", "nan", "-inf", "Infinity", "1e", "1.2.3", "--1", "1e99999", "0x10",
                            "1,5", "1 2", "e5", ".", "/3", "3/", "1/2/3", "1.5/2"}) {
      INFO("input: '" << bad << "'");
      CHECK_THROWS_AS(parse_rational(bad), input_error);
    }
    CHECK_THROWS_WITH(parse_rational("abc"), Catch::Contains("'abc'"));
    CHECK_THROWS_WITH(parse_rational("1/0"), Catch::Contains("division by zero"));
    CHECK_THROWS_WITH(parse_rational("nan"), Catch::Contains("not a finite number"));
    for (const char* named : {"NaN", "+INF", "-Infinity", "iNf"})
      CHECK_THROWS_WITH(parse_rational(named), Catch::Contains("not a finite number"));
    CHECK_THROWS_WITH(parse_rational("infinit"), !Catch::Contains("not a finite number"));
  }
}

TEST_CASE("attnrank::parse_matrix") {
  SECTION("comments, blank lines, spaces, tabs, CRLF and a BOM are accepted") {
    const auto m = parse_matrix("\xEF\xBB\xBF# a comment\r\n 1, 2/3 ,\t0.5\r\n\r\n-1,0,1e2 # trailing\n", "m.csv");
    REQUIRE(m.rows() == 2);
    REQUIRE(m.cols() == 3);
    CHECK(m(0, 1) == Rational(2, 3));
    CHECK(m(0, 2) == Rational(1, 2));
    CHECK(m(1, 2) == Rational(100));
  }
  SECTION("errors name the source, the line, the column and the text") {
    CHECK_THAT(error_of("1,2\n3,x\n"), Catch::Contains("m.csv: line 2, column 2") && Catch::Contains("'x'"));
    CHECK_THAT(error_of("1,2\n3\n"), Catch::Contains("line 2 has 1 columns, but line 1 has 2"));
    CHECK_THAT(error_of("1,,2\n"), Catch::Contains("line 1, column 2") && Catch::Contains("empty cell"));
    CHECK_THAT(error_of(""), Catch::Contains("no matrix rows"));
    CHECK_THAT(error_of("# only a comment\n\n"), Catch::Contains("no matrix rows"));
    CHECK_THAT(error_of("1,nan\n"), Catch::Contains("column 2") && Catch::Contains("not a finite number"));
  }
  SECTION("a cap on the number of cells stops absurd inputs") {
    ParseLimits limits;
    limits.max_cells = 3;
    CHECK_THROWS_WITH(parse_matrix("1,2\n3,4\n", "m.csv", limits), Catch::Contains("more than 3 cells"));
  }
  SECTION("caps on rows, columns and the total size of the numbers") {
    ParseLimits limits;
    limits.max_rows = 2;
    limits.max_columns = 2;
    CHECK(parse_matrix("1,2\n3,4\n", "m.csv", limits).rows() == 2);
    CHECK_THROWS_WITH(parse_matrix("1\n2\n3\n", "m.csv", limits), Catch::Contains("line 3: more than 2 rows"));
    CHECK_THROWS_WITH(parse_matrix("1,2,3\n", "m.csv", limits), Catch::Contains("line 1 has more than 2 columns"));
    limits = ParseLimits{};
    limits.max_total_bits = 8000;  // 1e1000 alone needs 3322 bits
    CHECK(parse_matrix("1e1000,1e1000\n", "m.csv", limits).cols() == 2);
    CHECK_THROWS_WITH(parse_matrix("1e1000,1e1000\n1e1000,1\n", "m.csv", limits),
                      Catch::Contains("line 2: the numbers so far need more than 8000 bits"));
  }
}

TEST_CASE("attnrank::parse_matrix formats") {
  InputNotes notes;
  const auto parse = [&](const std::string& text) {
    notes.clear();
    return parse_matrix(text, "m.txt", {}, &notes);
  };
  const auto noted = [&](const std::string& part) {
    for (const std::string& n : notes)
      if (n.find(part) != std::string::npos) return true;
    return false;
  };
  SECTION("NumPy's savetxt default: white space, %.18e") {
    const auto m = parse("# a header comment\n3.860000000000000098e-01 5.330000000000000293e-01\n"
                         "1.000000000000000000e+00 -2.000000000000000000e+00\n");
    REQUIRE(m.cols() == 2);
    CHECK(m(0, 0) == parse_rational("0.3860000000000000098"));
    CHECK(noted("white-space-separated"));
  }
  SECTION("tab, semicolon and comma files, each detected and noted") {
    CHECK(parse("1\t2\n3\t4\n")(1, 0) == 3);
    CHECK(noted("tab-separated"));
    CHECK(parse("1;2.5\n3;4\n")(0, 1) == Rational(5, 2));
    CHECK(noted("semicolon-separated"));
    CHECK(parse("1,2\n3,4\n")(1, 1) == 4);
    CHECK(notes.empty());  // commas are the default: nothing to say
  }
  SECTION("a header row is skipped with a note; pandas' index column is dropped") {
    const auto m = parse("a,b,c\n1,2,3\n");
    CHECK(m.rows() == 1);
    CHECK(noted("line 1 is a header (a, b, c), skipped"));
    const auto p = parse(",0,1\n0,0.25,0.75\n1,0.5,0.5\n");  // pd.DataFrame(A).to_csv()
    REQUIRE(p.rows() == 2);
    REQUIRE(p.cols() == 2);
    CHECK(p(1, 0) == Rational(1, 2));
    CHECK(noted("row labels"));
    const auto q = parse(",x,y\nr0,1,2\nr1,3,4\n");  // named index and columns
    CHECK(q(1, 1) == 4);
    CHECK_THAT(error_of(",2,3\n1,2,3\n"), Catch::Contains("empty cell"));  // a missing value, not a header
    CHECK_THAT(error_of("0.5,abc\n1,2\n"), Catch::Contains("'abc'"));     // a typo in the data, not a header
  }
  SECTION("one trailing separator per line is ignored, with a note") {
    const auto m = parse("1,2,\n3,4,\n");
    CHECK(m.cols() == 2);
    CHECK(noted("trailing ','"));
    CHECK(parse("1\t2\t\n").cols() == 2);
  }
  SECTION("decimal commas are refused, saying so") {
    CHECK_THAT(error_of("0,5;0,25\n"), Catch::Contains("line 1, column 1") && Catch::Contains("decimal comma"));
    CHECK_THAT(error_of("0,5\t0,25\n"), Catch::Contains("decimal comma"));
  }
  SECTION("binary data is named, not printed") {
    const std::string e = error_of(std::string("\x93NUMPY\x01\x00", 8));
    CHECK_THAT(e, Catch::Contains("an .npy file, not text"));
    CHECK_THAT(error_of(std::string("1,2\x00\n", 5)), Catch::Contains("binary data, not text"));
    CHECK_THAT(error_of("1,\x7f\x80\n"), Catch::Contains("\\x7f\\x80"));
  }
}

TEST_CASE("attnrank::parse_matrix format properties") {
  rc::prop("a matrix written with any separator, header, trailing separator and line end reads back", [] {
    const int rows = *rc::gen::inRange(1, 5), cols = *rc::gen::inRange(1, 5);
    const char sep = *rc::gen::element(',', ';', '\t', ' ');
    const bool header = *rc::gen::arbitrary<bool>(), trailing = *rc::gen::arbitrary<bool>() && sep != ' ';
    const std::string eol = *rc::gen::element(std::string("\n"), std::string("\r\n"));
    Matrix<Rational> m(rows, cols);
    std::string text;
    if (header) {
      for (int j = 0; j < cols; ++j) text += (j ? std::string(1, sep) : "") + "col" + std::to_string(j);
      text += eol;
    }
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) {
        m(i, j) = *gen_rational();
        if (j) text += sep;  // appended piece by piece: GCC 12 misreads "..." + std::string&& as an overflow
        text += m(i, j).str();
      }
      text += (trailing ? std::string(1, sep) : "") + eol;
    }
    RC_ASSERT(parse_matrix(text, "p.txt") == m);
  });
}

TEST_CASE("attnrank::read_matrix") {
  CHECK_THROWS_WITH(read_matrix("/nonexistent/attnrank.csv"), Catch::Contains("no such file"));
  CHECK_THROWS_WITH(read_matrix("/tmp"), Catch::Contains("is a directory"));
  ParseLimits limits;
  limits.max_file_bytes = 1000;
  CHECK_THROWS_WITH(read_matrix("/dev/zero", limits), Catch::Contains("more than 1000 bytes"));
  CHECK_THROWS_WITH(read_text_file("/dev/zero", limits), Catch::Contains("stopped reading there"));
}

TEST_CASE("attnrank::parse_rational properties") {
  rc::prop("a fraction p/q parses to exactly p/q", [] {
    const Rational q = *gen_rational();
    RC_ASSERT(parse_rational(q.str()) == q);
  });
  rc::prop("a decimal m e k parses to exactly m 10^k", [] {
    const long m = *rc::gen::inRange(-1000000L, 1000000L);
    const int k = *rc::gen::inRange(-30, 31);
    Rational expected(m);
    for (int i = 0; i < std::abs(k); ++i) expected = k > 0 ? Rational(expected * 10) : Rational(expected / 10);
    RC_ASSERT(parse_rational(std::to_string(m) + "e" + std::to_string(k)) == expected);
  });
  rc::prop("decimals of 1 to 25 digits, with a point, zeros and an exponent, parse to the canonical fraction", [] {
    // Both sides of the 19-digit word-size path, trailing and leading zeros included.
    const auto length = *rc::gen::inRange(1, 26);
    std::string digits;
    for (int i = 0; i < length; ++i) digits += static_cast<char>('0' + *rc::gen::element(0, 0, 1, 2, 5, 7, 9));
    const auto point = *rc::gen::inRange(0, length + 1);
    const auto exponent = *rc::gen::inRange(-40, 41);
    const bool negative = *rc::gen::arbitrary<bool>();
    std::string text = negative ? "-" : "";  // piece by piece: GCC 12's false stringop-overflow warning
    text += digits.substr(0, static_cast<std::size_t>(point));
    text += '.';
    text += digits.substr(static_cast<std::size_t>(point));
    text += 'e';
    text += std::to_string(exponent);
    Rational expected = Rational(Integer(digits.find_first_not_of('0') == std::string::npos ? std::string("0") :
                                         digits.substr(digits.find_first_not_of('0'))));
    for (int i = 0; i < length - point; ++i) expected /= 10;
    for (int i = 0; i < std::abs(exponent); ++i) expected = exponent > 0 ? Rational(expected * 10) : Rational(expected / 10);
    if (negative) expected = -expected;
    const Rational got = parse_rational(text);
    RC_ASSERT(got == expected);
    // Canonical: lowest terms, positive denominator (GMP's comparisons assume it).
    Integer g;
    mpz_gcd(g.backend().data(), mpq_numref(got.backend().data()), mpq_denref(got.backend().data()));
    const bool lowest_terms = mpz_sgn(mpq_numref(got.backend().data())) == 0
                                  ? mpz_cmp_ui(mpq_denref(got.backend().data()), 1) == 0
                                  : g == 1;
    RC_ASSERT(lowest_terms);
    RC_ASSERT(mpz_sgn(mpq_denref(got.backend().data())) > 0);
  });
}
