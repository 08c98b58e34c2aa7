// Exact input (attnrank/io/parse.hpp): numbers, matrix text, and the dispatch
// to the binary readers.
#include <attnrank/io/parse.hpp>

#include <attnrank/io/npy.hpp>
#include <attnrank/io/safetensors.hpp>
#include <attnrank/numbers/detail/power_of_ten.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

namespace attnrank {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

/// A cell as it may be shown: control and non-ASCII bytes escaped, long cells cut.
std::string shown(std::string_view text) {
  std::string out;
  for (std::size_t k = 0; k < text.size(); ++k) {
    if (out.size() > 60) return out + "...";
    const auto c = static_cast<unsigned char>(text[k]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

[[noreturn]] void bad_number(std::string_view text, const std::string& why) {
  throw input_error("'" + shown(text) + "' is not a number: " + why);
}

/// A string of decimal digits as an integer (base 10 always: Boost's string
/// constructor would read a leading 0 as octal).
Integer decimal_integer(const std::string& digits) {
  Integer r;
  if (mpz_set_str(r.backend().data(), digits.c_str(), 10) != 0) throw input_error("'" + digits + "' is not an integer");
  return r;
}

/// [+-]digits, returned as an integer.
Integer parse_integer(std::string_view text, std::string_view whole, const ParseLimits& limits) {
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (!all_digits(digits)) bad_number(whole, "expected an integer, a decimal or p/q");
  if (digits.size() > limits.max_digits) bad_number(whole, "more than " + std::to_string(limits.max_digits) + " digits");
  const Integer r = decimal_integer(std::string(digits));
  return negative ? Integer(-r) : r;
}

/// The common case of a decimal of at most 19 digits (every double printed with
/// %.17g): digits * 10^exponent as a canonical fraction built directly — the
/// mantissa in a machine word, factors of ten moved to the exponent, and the
/// remaining common factors of 2 and 5 removed by counting — instead of by a
/// string, a GMP string conversion and a gcd (a third of a 1024 x 1024 CSV's read time).
Rational small_decimal(std::string_view int_part, std::string_view frac_part, long exponent, bool negative) {
  std::uint64_t m = 0;
  for (char c : int_part) m = m * 10 + static_cast<std::uint64_t>(c - '0');
  for (char c : frac_part) m = m * 10 + static_cast<std::uint64_t>(c - '0');
  Rational r;
  if (m == 0) return r;
  while (m % 10 == 0) {
    m /= 10;
    ++exponent;
  }
  mpq_ptr q = r.backend().data();
  if (exponent >= 0) {
    mpz_ui_pow_ui(mpq_denref(q), 10, static_cast<unsigned long>(exponent));  // the denominator slot as scratch
    mpz_mul_ui(mpq_numref(q), mpq_denref(q), m);
    mpz_set_ui(mpq_denref(q), 1);
  } else {
    // m has no factor 10 left, so at most one of 2 and 5 divides it.
    const unsigned long k = static_cast<unsigned long>(-exponent);
    unsigned long twos = 0, fives = 0;
    while (twos < k && m % 2 == 0) m /= 2, ++twos;
    while (fives < k && m % 5 == 0) m /= 5, ++fives;
    mpz_set_ui(mpq_numref(q), m);
    if (k - fives <= 27) {  // 5^27 < 2^64: a table, not a power computed per cell
      static const auto powers = [] {
        std::array<std::uint64_t, 28> p{};
        p[0] = 1;
        for (std::size_t i = 1; i < p.size(); ++i) p[i] = p[i - 1] * 5;
        return p;
      }();
      mpz_set_ui(mpq_denref(q), powers[k - fives]);
    } else {
      mpz_ui_pow_ui(mpq_denref(q), 5, k - fives);
    }
    mpz_mul_2exp(mpq_denref(q), mpq_denref(q), k - twos);
  }
  if (negative) mpq_neg(q, q);
  return r;
}

/// [+-]digits[.digits][e[+-]digits] with at least one mantissa digit.
Rational parse_decimal(std::string_view text, const ParseLimits& limits) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  long exponent = 0;
  if (const auto e = s.find_first_of("eE"); e != std::string_view::npos) {
    std::string_view exp_text = s.substr(e + 1);
    s = s.substr(0, e);
    bool exp_negative = false;
    if (!exp_text.empty() && (exp_text.front() == '+' || exp_text.front() == '-')) {
      exp_negative = exp_text.front() == '-';
      exp_text.remove_prefix(1);
    }
    if (!all_digits(exp_text)) bad_number(text, "malformed exponent");
    if (exp_text.size() > 9) bad_number(text, "exponent out of range");
    exponent = std::stol(std::string(exp_text));
    if (exponent > limits.max_exponent)
      bad_number(text, "exponent out of range (|e| <= " + std::to_string(limits.max_exponent) + ")");
    if (exp_negative) exponent = -exponent;
  }
  std::string_view int_part = s, frac_part;
  if (const auto dot = s.find('.'); dot != std::string_view::npos) {
    int_part = s.substr(0, dot);
    frac_part = s.substr(dot + 1);
  }
  if (int_part.empty() && frac_part.empty()) bad_number(text, "no digits");
  if ((!int_part.empty() && !all_digits(int_part)) || (!frac_part.empty() && !all_digits(frac_part)))
    bad_number(text, "expected an integer, a decimal or p/q");
  if (int_part.size() + frac_part.size() > limits.max_digits)
    bad_number(text, "more than " + std::to_string(limits.max_digits) + " digits");
  exponent -= static_cast<long>(frac_part.size());
  if (int_part.size() + frac_part.size() <= 19) return small_decimal(int_part, frac_part, exponent, negative);
  const Integer mantissa = decimal_integer(std::string(int_part) + std::string(frac_part));
  Rational r = exponent >= 0 ? Rational(mantissa * detail::pow10(exponent)) : Rational(mantissa, detail::pow10(-exponent));
  return negative ? Rational(-r) : r;
}

bool is_number(std::string_view cell) {
  try {
    parse_rational(cell, ParseLimits{});
    return true;
  } catch (const input_error&) {
    return false;
  }
}

/// A cell meant as a number, right or wrong ("0.5", "1e999999", "0,5", "nan"):
/// such a cell makes a row data, never a header.
bool looks_numeric(std::string_view cell) {
  cell = trim(cell);
  std::string lower(cell);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) lower.erase(0, 1);
  if (lower == "nan" || lower == "inf" || lower == "infinity") return true;
  bool digit = false;
  for (char c : lower) {
    if (std::isdigit(static_cast<unsigned char>(c))) digit = true;
    else if (std::string_view("+-./e,").find(c) == std::string_view::npos) return false;
  }
  return digit;
}

/// pandas' header line ",0,1,2" or ",a,b": an empty first cell (the index's
/// name), then column names that are not data: labels, or the default 0, 1, 2, ...
bool pandas_header(const std::vector<std::string_view>& cells) {
  if (cells.size() < 2 || !cells.front().empty()) return false;
  bool labels = true, default_names = true;
  for (std::size_t k = 1; k < cells.size(); ++k) {
    labels = labels && !cells[k].empty() && !looks_numeric(cells[k]);
    default_names = default_names && cells[k] == std::to_string(k - 1);
  }
  return labels || default_names;
}

/// "0,5" or "-1,25e-3": a number written with a decimal comma.
bool decimal_comma(std::string_view cell) {
  cell = trim(cell);
  const auto comma = cell.find(',');
  if (comma == std::string_view::npos || cell.find(',', comma + 1) != std::string_view::npos) return false;
  std::string dotted(cell);
  dotted[comma] = '.';
  return comma > 0 && comma + 1 < cell.size() && std::isdigit(static_cast<unsigned char>(cell[comma + 1])) &&
         is_number(dotted);
}

const char* separator_name(char sep) {
  switch (sep) {
    case ',': return "comma";
    case ';': return "semicolon";
    case '\t': return "tab";
    default: return "white-space";
  }
}

/// The separator of a file, from its first data line and the one after it (a
/// one-column header says nothing): ';' if either has one; a tab if cells split
/// at tabs are all decimal-comma numbers (a spreadsheet's "0,5<TAB>0,25", which
/// is then refused as such) or there is no comma; else ','; else white space.
char detect_separator(std::string_view first, std::string_view rest) {
  std::string_view second;
  while (!rest.empty() && second.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (!trim(line).empty()) second = line;
  }
  const auto has = [&](char c) {
    return first.find(c) != std::string_view::npos || second.find(c) != std::string_view::npos;
  };
  if (has(';')) return ';';
  if (has('\t')) {
    if (!has(',')) return '\t';
    bool all_decimal_commas = true;
    for (std::string_view line : {first, second}) {
      while (!line.empty()) {
        const auto tab = line.find('\t');
        const std::string_view cell = trim(line.substr(0, tab));
        all_decimal_commas = all_decimal_commas && (cell.empty() || decimal_comma(cell));
        line = tab == std::string_view::npos ? std::string_view() : line.substr(tab + 1);
      }
    }
    if (all_decimal_commas) return '\t';
  }
  if (has(',')) return ',';
  return ' ';
}

/// The cells of one line, split at `sep` (' ': runs of spaces and tabs).
void split_cells(std::string_view line, char sep, std::vector<std::string_view>& cells) {
  cells.clear();
  if (sep == ' ') {
    std::size_t at = 0;
    while (true) {
      while (at < line.size() && (line[at] == ' ' || line[at] == '\t' || line[at] == '\r')) ++at;
      if (at >= line.size()) break;
      std::size_t end = at;
      while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
      cells.push_back(line.substr(at, end - at));
      at = end;
    }
    return;
  }
  while (true) {
    const auto at = line.find(sep);
    cells.push_back(trim(line.substr(0, at)));
    if (at == std::string_view::npos) break;
    line = line.substr(at + 1);
  }
}

std::string place(const std::string& source, std::size_t line, std::size_t column) {
  return source + ": line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

Rational parse_rational(std::string_view raw, const ParseLimits& limits) {
  const std::string_view text = trim(raw);
  if (text.empty()) throw input_error("empty cell (expected a number)");
  // NaN and infinities by name, in any case; compared in place, since a copy per
  // cell was a heap allocation for every 17-digit decimal of a large file.
  const std::string_view bare = (text[0] == '+' || text[0] == '-') ? text.substr(1) : text;
  const auto named = [bare](std::string_view name) {
    return bare.size() == name.size() && std::equal(bare.begin(), bare.end(), name.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == b;
           });
  };
  if (named("nan") || named("inf") || named("infinity")) bad_number(text, "not a finite number");
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    // No white space inside a fraction: "1 / 2" is refused rather than guessed
    // at, since in white-space separated text it would be three cells.
    if (text.find_first_of(" \t") != std::string_view::npos)
      bad_number(text, "no spaces inside a fraction (write p/q, e.g. 1/2)");
    const Integer num = parse_integer(text.substr(0, slash), text, limits);
    const Integer den = parse_integer(text.substr(slash + 1), text, limits);
    if (den == 0) bad_number(text, "division by zero");
    return Rational(num, den);
  }
  return parse_decimal(text, limits);
}

/// The matrix text grammar (parse.hpp) once, for every kind of cell: `read_cell`
/// turns a cell into a T (throwing input_error with a reason), `cell_bits` says
/// how many bits it holds (for limits.max_total_bits).
template <class T, class ReadCell, class CellBits>
Matrix<T> parse_cells(std::string_view text, const std::string& source, const ParseLimits& limits, InputNotes* notes,
                      ReadCell&& read_cell, CellBits&& cell_bits) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  if (is_npy(text))
    throw input_error(source + ": an .npy file, not text (read it with read_matrix, which recognises it)");
  if (text.substr(0, 4096).find('\0') != std::string_view::npos)
    throw input_error(source + ": binary data, not text (attnrank reads text, .npy files, and tensors of a "
                      ".safetensors file named as FILE.safetensors:TENSOR)");
  const auto note = [&](const std::string& what) {
    if (notes) notes->push_back(source + ": " + what);
  };
  std::vector<std::vector<T>> rows;
  std::vector<std::string_view> cells;
  std::size_t first_width_line = 0, line_no = 0, cell_count = 0, total_bits = 0;
  char sep = 0;               // detected from the first data line
  bool index_column = false;  // the first column holds row labels (pandas' index)
  bool trailing_noted = false;
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (trim(line).empty()) continue;
    bool first_line = false;
    if (sep == 0) {
      first_line = true;
      sep = detect_separator(line, text);
      if (sep != ',') note(std::string(separator_name(sep)) + "-separated");
    }
    split_cells(line, sep, cells);
    // One trailing separator ("1,2,3,") is an artefact of some writers, not an empty column.
    if (sep != ' ' && cells.size() > 1 && cells.back().empty()) {
      cells.pop_back();
      if (!trailing_noted) note("a trailing '" + std::string(sep == '\t' ? "\\t" : std::string(1, sep)) +
                                "' at the end of line " + std::to_string(line_no) + " (and any later) is ignored");
      trailing_noted = true;
    }
    if (first_line) {
      bool names_only = false;
      for (std::string_view c : cells) names_only = names_only || !c.empty();
      for (std::string_view c : cells) names_only = names_only && !looks_numeric(c);
      const bool with_index = pandas_header(cells);
      if (names_only || with_index) {
        index_column = with_index;
        std::string names;
        for (std::size_t k = 0; k < cells.size() && k < 4; ++k) names += (k ? ", " : "") + shown(cells[k]);
        note("line " + std::to_string(line_no) + " is a header (" + names + (cells.size() > 4 ? ", ..." : "") +
             "), skipped" + (index_column ? "; its empty first cell marks the first column as row labels, dropped" : ""));
        continue;
      }
    }
    std::vector<T> row;
    for (std::size_t k = index_column ? 1 : 0; k < cells.size(); ++k) {
      const std::size_t column = k + 1;
      try {
        if ((sep == ';' || sep == '\t') && decimal_comma(cells[k]))
          throw input_error("'" + shown(cells[k]) +
                            "' has a decimal comma; attnrank reads decimal points only (0.5, not 0,5): "
                            "export with '.' as the decimal separator");
        row.push_back(read_cell(cells[k]));
      } catch (const input_error& e) {
        std::string hint;
        if (sep != ';' && decimal_comma(cells[k])) hint = " (a decimal comma? attnrank reads 0.5, not 0,5)";
        throw input_error(place(source, line_no, column) + ": " + e.what() + hint, source,
                          static_cast<long>(line_no), static_cast<long>(column));
      }
      if (++cell_count > limits.max_cells)
        throw input_error(source + ": more than " + std::to_string(limits.max_cells) + " cells");
      total_bits += cell_bits(row.back());
      if (total_bits > limits.max_total_bits)
        throw input_error(source + ": line " + std::to_string(line_no) + ": the numbers so far need more than " +
                          std::to_string(limits.max_total_bits) + " bits in all (ParseLimits::max_total_bits)");
      if (row.size() > limits.max_columns)
        throw input_error(source + ": line " + std::to_string(line_no) + " has more than " +
                          std::to_string(limits.max_columns) + " columns (the limit; attnrank --max-size raises it)");
    }
    if (row.empty()) throw input_error(source + ": line " + std::to_string(line_no) + " has only a row label");
    if (!rows.empty() && row.size() != rows.front().size())
      throw input_error(source + ": line " + std::to_string(line_no) + " has " + std::to_string(row.size()) +
                        " columns, but line " + std::to_string(first_width_line) + " has " +
                        std::to_string(rows.front().size()) + " (rows must have equal length)");
    if (rows.empty()) first_width_line = line_no;
    if (rows.size() == limits.max_rows)
      throw input_error(source + ": line " + std::to_string(line_no) + ": more than " +
                        std::to_string(limits.max_rows) + " rows (the limit; attnrank --max-size raises it)");
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw input_error(source + ": no matrix rows (the input is empty or only comments)");
  Matrix<T> m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.front().size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = std::move(rows[i][j]);
  return m;
}

Matrix<Rational> parse_matrix(std::string_view text, const std::string& source, const ParseLimits& limits,
                              InputNotes* notes) {
  return parse_cells<Rational>(
      text, source, limits, notes, [&](std::string_view cell) { return parse_rational(cell, limits); },
      [](const Rational& q) {
        return mpz_sizeinbase(mpq_numref(q.backend().data()), 2) + mpz_sizeinbase(mpq_denref(q.backend().data()), 2);
      });
}

namespace {

/// A cell that is not a plain decimal the fast path encloses: the exact reader takes over.
struct NotPlainDecimal {};

/// [mid - rad, mid + rad] around a plain decimal ("-12", "0.8", "1.5e-3"): mid is
/// its nearest double (std::from_chars, correctly rounded), rad one ulp of mid
/// (twice what the rounding can lose), 0 for an integer below 2^53 (exact).
/// Anything else, or a value near the ends of the double range, is NotPlainDecimal.
std::pair<double, double> plain_decimal_ball(std::string_view raw) {
  const std::string_view text = trim(raw);
  if (text.empty() || text.size() > 64) throw NotPlainDecimal{};
  std::size_t k = text[0] == '-' || text[0] == '+' ? 1 : 0;
  if (k == text.size() || text[k] == '-' || text[k] == '+') throw NotPlainDecimal{};
  const std::size_t digits_begin = k;
  while (k < text.size() && text[k] >= '0' && text[k] <= '9') ++k;
  const bool integer = k == text.size() && k > digits_begin && k - digits_begin <= 15;
  for (char c : text.substr(digits_begin))
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')) throw NotPlainDecimal{};
  const char* first = text.data() + (text[0] == '+' ? 1 : 0);
  double x = 0;
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), x);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(x)) throw NotPlainDecimal{};
  if (integer) return {x, 0.0};  // at most 15 digits: below 2^53, exactly a double
  const double a = std::fabs(x);
  if (a != 0 && (a < 0x1p-1000 || a > 0x1p1000)) throw NotPlainDecimal{};
  if (a == 0) {  // a decimal that reads as 0 is 0 only if every digit is
    for (char c : text) {
      if (c == 'e' || c == 'E') break;
      if (c >= '1' && c <= '9') throw NotPlainDecimal{};
    }
    return {0.0, 0.0};
  }
  return {x, std::nextafter(a, INFINITY) - a};
}

}  // namespace

std::optional<BallMatrix> parse_plain_decimal_balls(std::string_view text, const std::string& source,
                                                    const ParseLimits& limits, InputNotes* notes) {
  InputNotes seen;
  try {
    const Matrix<std::pair<double, double>> cells = parse_cells<std::pair<double, double>>(
        text, source, limits, &seen, plain_decimal_ball, [](const std::pair<double, double>&) { return 64; });
    BallMatrix out;
    out.mid.resize(cells.rows(), cells.cols());
    out.rad.resize(cells.rows(), cells.cols());
    for (Eigen::Index j = 0; j < cells.cols(); ++j)
      for (Eigen::Index i = 0; i < cells.rows(); ++i) std::tie(out.mid(i, j), out.rad(i, j)) = cells(i, j);
    if (notes) notes->insert(notes->end(), seen.begin(), seen.end());
    return out;
  } catch (const NotPlainDecimal&) {
    return std::nullopt;
  } catch (const input_error&) {
    return std::nullopt;
  }
}

std::string read_text_file(const std::string& path, const ParseLimits& limits) {
  std::ifstream file;
  std::istream* in = &std::cin;
  const bool standard_input = path == "-";
  std::string text;
  if (!standard_input) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) throw input_error(path + ": no such file");
    if (std::filesystem::is_directory(status)) throw input_error(path + ": is a directory, not a file");
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > limits.max_file_bytes)
      throw input_error(path + ": file is " + std::to_string(size) + " bytes, over the limit of " +
                        std::to_string(limits.max_file_bytes));
    // The size known up front spares the string its regrowth copies.
    if (!ec && std::filesystem::is_regular_file(status)) text.reserve(static_cast<std::size_t>(size) + 1);
    file.open(path, std::ios::binary);
    if (!file) throw input_error(path + ": cannot be opened for reading");
    in = &file;
  }
  const std::string name = standard_input ? "<stdin>" : path;
  // Read in chunks and stop one byte past the cap: a pipe or /dev/zero has no
  // size to check up front, and must not be read to exhaustion.
  std::vector<char> chunk(std::size_t{1} << 16);
  while (*in) {
    in->read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in->gcount()));
    if (text.size() > limits.max_file_bytes)
      throw input_error(name + ": more than " + std::to_string(limits.max_file_bytes) +
                        " bytes (the file size limit); stopped reading there");
  }
  if (in->bad()) throw input_error(name + ": read error");
  return text;
}

Matrix<Rational> read_matrix(const std::string& argument, const ParseLimits& limits, InputNotes* notes) {
  // "m.safetensors:NAME[...]": the file name ends at the first ':' after ".safetensors".
  if (const auto st = split_safetensors_argument(argument)) {
    const auto [name, selection] = split_selection(st->rest);  // no name: the error lists the tensors
    return parse_safetensors(read_text_file(st->path, limits), st->path, name, selection, limits);
  }
  // "x.npy[...]": a selection, unless a file of that very name exists.
  auto [path, selection] = split_selection(argument);
  std::error_code ec;
  if (selection.given && std::filesystem::exists(argument, ec)) {
    path = argument;
    selection = {};
  }
  const std::string bytes = read_text_file(path, limits);
  const std::string source = path == "-" ? "<stdin>" : path;
  if (is_npy(bytes)) return parse_npy(bytes, source, selection, limits);
  if (selection.given)
    throw input_error(source + ": a selection [...] picks a matrix out of an .npy file or a safetensors tensor; "
                      "this is text");
  return parse_matrix(bytes, source, limits, notes);
}

}  // namespace attnrank
