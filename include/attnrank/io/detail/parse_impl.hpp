#pragma once
// Bodies for attnrank/io/parse.hpp.

#include <attnrank/numbers/detail/power_of_ten.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

namespace attnrank {
namespace detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

[[noreturn]] inline void bad_number(std::string_view text, const std::string& why) {
  throw input_error("'" + std::string(text) + "' is not a number: " + why);
}

/// A string of decimal digits as an integer (base 10 always: Boost's string
/// constructor would read a leading 0 as octal).
inline Integer decimal_integer(const std::string& digits) {
  Integer r;
  if (mpz_set_str(r.backend().data(), digits.c_str(), 10) != 0) throw input_error("'" + digits + "' is not an integer");
  return r;
}

/// [+-]digits, returned as an integer.
inline Integer parse_integer(std::string_view text, std::string_view whole, const ParseLimits& limits) {
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (!all_digits(digits)) bad_number(whole, "expected an integer, a decimal or p/q");
  if (digits.size() > limits.max_digits)
    bad_number(whole, "more than " + std::to_string(limits.max_digits) + " digits");
  const Integer r = decimal_integer(std::string(digits));
  return negative ? Integer(-r) : r;
}

/// [+-]digits[.digits][e[+-]digits] with at least one mantissa digit.
inline Rational parse_decimal(std::string_view text, const ParseLimits& limits) {
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
  const Integer mantissa = decimal_integer(std::string(int_part) + std::string(frac_part));
  exponent -= static_cast<long>(frac_part.size());
  Rational r = exponent >= 0 ? Rational(mantissa * pow10(exponent)) : Rational(mantissa, pow10(-exponent));
  return negative ? Rational(-r) : r;
}

}  // namespace detail

inline Rational parse_rational(std::string_view raw, const ParseLimits& limits) {
  const std::string_view text = detail::trim(raw);
  if (text.empty()) throw input_error("empty cell (expected a number)");
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view bare = (lower[0] == '+' || lower[0] == '-') ? std::string_view(lower).substr(1)
                                                                     : std::string_view(lower);
  if (bare == "nan" || bare == "inf" || bare == "infinity")
    detail::bad_number(text, "not a finite number");
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    // No white space inside a fraction: "1 / 2" is refused rather than guessed
    // at, since in white-space separated text it would be three cells.
    if (text.find_first_of(" \t") != std::string_view::npos)
      detail::bad_number(text, "no spaces inside a fraction (write p/q, e.g. 1/2)");
    const Integer num = detail::parse_integer(text.substr(0, slash), text, limits);
    const Integer den = detail::parse_integer(text.substr(slash + 1), text, limits);
    if (den == 0) detail::bad_number(text, "division by zero");
    return Rational(num, den);
  }
  return detail::parse_decimal(text, limits);
}

inline Matrix<Rational> parse_matrix(std::string_view text, const std::string& source,
                                     const ParseLimits& limits) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<std::vector<Rational>> rows;
  std::size_t first_width_line = 0, line_no = 0, cells = 0, total_bits = 0;
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (detail::trim(line).empty()) continue;
    std::vector<Rational> row;
    std::size_t column = 0;
    while (true) {
      ++column;
      const auto comma = line.find(',');
      const std::string_view cell = line.substr(0, comma);
      try {
        row.push_back(parse_rational(cell, limits));
      } catch (const input_error& e) {
        throw input_error(source + ": line " + std::to_string(line_no) + ", column " +
                              std::to_string(column) + ": " + e.what(),
                          source, static_cast<long>(line_no), static_cast<long>(column));
      }
      if (++cells > limits.max_cells)
        throw input_error(source + ": more than " + std::to_string(limits.max_cells) + " cells");
      total_bits += mpz_sizeinbase(mpq_numref(row.back().backend().data()), 2) +
                    mpz_sizeinbase(mpq_denref(row.back().backend().data()), 2);
      if (total_bits > limits.max_total_bits)
        throw input_error(source + ": line " + std::to_string(line_no) + ": the numbers so far need more than " +
                          std::to_string(limits.max_total_bits) + " bits in all (ParseLimits::max_total_bits)");
      if (column > limits.max_columns)
        throw input_error(source + ": line " + std::to_string(line_no) + " has more than " +
                          std::to_string(limits.max_columns) + " columns (the limit; attnrank --max-size raises it)");
      if (comma == std::string_view::npos) break;
      line = line.substr(comma + 1);
    }
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
  Matrix<Rational> m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.front().size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = std::move(rows[i][j]);
  return m;
}

inline std::string read_text_file(const std::string& path, const ParseLimits& limits) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw input_error(path + ": no such file");
  if (std::filesystem::is_directory(status)) throw input_error(path + ": is a directory, not a file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > limits.max_file_bytes)
    throw input_error(path + ": file is " + std::to_string(size) + " bytes, over the limit of " +
                      std::to_string(limits.max_file_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(path + ": cannot be opened for reading");
  // Read in chunks and stop one byte past the cap: a pipe or /dev/zero has no
  // size to check up front, and must not be read to exhaustion.
  std::string text;
  std::vector<char> chunk(std::size_t{1} << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > limits.max_file_bytes)
      throw input_error(path + ": more than " + std::to_string(limits.max_file_bytes) +
                        " bytes (the file size limit); stopped reading there");
  }
  if (in.bad()) throw input_error(path + ": read error");
  return text;
}

inline Matrix<Rational> read_matrix(const std::string& path, const ParseLimits& limits) {
  return parse_matrix(read_text_file(path, limits), path, limits);
}

}  // namespace attnrank
