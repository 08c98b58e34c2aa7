// One number of matrix text (attnrank/io/parse.hpp): exactly, as the rational it
// spells (parse_rational), or enclosed in a double ball when it is a plain decimal
// (detail::plain_decimal_ball, for parse_plain_decimal_balls).
#include <attnrank/io/parse.hpp>

#include <attnrank/io/detail/text_cells.hpp>
#include <attnrank/numbers/detail/power_of_ten.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>

namespace attnrank {
namespace {

using detail::all_digits;
using detail::bad_number;
using detail::shown;
using detail::trim;

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
  // A word ("None", "true", "-") is no number at all; only a number's exponent can be malformed.
  const std::string_view digits_part = s.substr(0, s.find_first_of("eE"));
  if (digits_part.empty() || digits_part.find_first_not_of("0123456789.") != std::string_view::npos)
    bad_number(text, "expected an integer, a decimal or p/q");
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
  if (named("nan") || named("inf") || named("infinity"))
    bad_number(text, std::string("not a finite number") + (text[0] == '-' && !named("nan") ? minus_infinity_hint : ""));
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

namespace detail {

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

}  // namespace detail

}  // namespace attnrank
