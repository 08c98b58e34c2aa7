#pragma once
// Printing numbers as decimals, exactly: fixed point or significant digits.
//
// Every value is first turned into the exact rational it stores (a double or an
// MPFR number is a dyadic rational), then rounded once, exactly, to `decimals`
// digits after the point or to `significant` digits (ties away from zero). Rounding to nearest is monotone,
// so when both ends of an interval round to the same string, every real number in
// the interval rounds to it: that string is certified.

#include <attnrank/numbers/detail/power_of_ten.hpp>
#include <attnrank/numbers/scalar_traits.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

namespace attnrank {

/// q rounded to `decimals` digits after the point, ties away from zero, as text
/// ("-2.303", "3", "0.33"). Never prints "-0".
inline std::string format_fixed(const Rational& q, int decimals) {
  const Integer scale = detail::pow10(decimals);
  const Integer num = boost::multiprecision::numerator(q);
  const Integer den = boost::multiprecision::denominator(q);
  const bool negative = num < 0;
  const Integer abs_num = negative ? Integer(-num) : num;
  // round(|q| * scale) = floor((2 |num| scale + den) / (2 den))
  const Integer rounded = (2 * abs_num * scale + den) / (2 * den);
  std::string digits = rounded.str();
  const auto d = static_cast<std::size_t>(decimals);
  if (d > 0) {
    if (digits.size() <= d) digits = std::string(d + 1 - digits.size(), '0') + digits;
    digits = digits.substr(0, digits.size() - d) + "." + digits.substr(digits.size() - d);
  }
  return (negative && rounded != 0) ? "-" + digits : digits;
}

/// The number of digits after the point that q's decimal expansion needs, or
/// nothing when it does not terminate (a prime other than 2 and 5 divides the
/// denominator): 0 for 3, 4 for -2.9935, nothing for 1/3.
inline std::optional<int> terminating_decimals(const Rational& q) {
  Integer den = boost::multiprecision::denominator(q);
  int twos = 0, fives = 0;
  while (den % 2 == 0) den /= 2, ++twos;
  while (den % 5 == 0) den /= 5, ++fives;
  if (den != 1) return std::nullopt;
  return std::max(twos, fives);
}

/// q rounded once, exactly, to `significant` digits in scientific notation
/// (ties away from zero): "2.7370292894770048e-33", "-4.0e+00", "0". For exact
/// values whose magnitude fixed-point cannot show.
inline std::string format_significant(const Rational& q, int significant) {
  if (q == 0) return "0";
  significant = std::max(significant, 1);
  const bool negative = q < 0;
  const Rational a = negative ? Rational(-q) : q;
  const auto ten_to = [](long e) { return e >= 0 ? Rational(detail::pow10(static_cast<int>(e))) : Rational(1) / Rational(detail::pow10(static_cast<int>(-e))); };
  // 10^e <= a < 10^(e+1): start from the digit counts, then step to the exact e.
  long e = static_cast<long>(mpz_sizeinbase(boost::multiprecision::numerator(a).backend().data(), 10)) -
           static_cast<long>(mpz_sizeinbase(boost::multiprecision::denominator(a).backend().data(), 10));
  while (a < ten_to(e)) --e;
  while (a >= ten_to(e + 1)) ++e;
  const Rational scaled = a * ten_to(significant - 1 - e);
  const Integer num = boost::multiprecision::numerator(scaled), den = boost::multiprecision::denominator(scaled);
  Integer m = (2 * num + den) / (2 * den);  // round half away from zero
  if (m == detail::pow10(significant)) m /= 10, ++e;
  const std::string digits = m.str();
  std::string out = (negative ? "-" : "") + digits.substr(0, 1);
  if (digits.size() > 1) {  // appended in two steps: GCC 12 misreads "." + string&& as an overflow
    out += '.';
    out += std::string_view(digits).substr(1);
  }
  const std::string ex = std::to_string(e < 0 ? -e : e);
  return out + (e < 0 ? "e-" : "e+") + (ex.size() < 2 ? "0" + ex : ex);
}

/// The decimal digits of x itself (double or MPFR); "nan"/"inf"/"-inf" if not finite.
template <class T>
std::string format_fixed_point(const T& x, int decimals) {
  if (!scalar_traits<T>::is_finite(x)) {
    const double d = static_cast<double>(x);
    return d != d ? "nan" : (d > 0 ? "inf" : "-inf");
  }
  return format_fixed(to_rational(x), decimals);
}

/// The certified rounding of every real in x to `decimals` digits, or nothing
/// when the ends of x round differently (more precision may settle it).
inline std::optional<std::string> certified_fixed(const Interval& x, int decimals) {
  if (!scalar_traits<Interval>::is_finite(x)) return std::nullopt;
  std::string lo = format_fixed(to_rational(lower_bound(x)), decimals);
  if (lo != format_fixed(to_rational(upper_bound(x)), decimals)) return std::nullopt;
  return lo;
}

/// Both ends of x, each rounded outward to `decimals` digits so the printed
/// interval still contains x: "[lo, hi]" as two strings.
inline std::pair<std::string, std::string> enclosure_fixed(const Interval& x, int decimals) {
  const Integer scale = detail::pow10(decimals);
  auto outward = [&](const Real& end, bool up) -> std::string {
    if (!scalar_traits<Real>::is_finite(end)) return up ? "inf" : "-inf";
    const Rational scaled = to_rational(end) * Rational(scale);
    const Integer num = boost::multiprecision::numerator(scaled);
    const Integer den = boost::multiprecision::denominator(scaled);
    Integer r;
    if (up)
      mpz_cdiv_q(r.backend().data(), num.backend().data(), den.backend().data());
    else
      mpz_fdiv_q(r.backend().data(), num.backend().data(), den.backend().data());
    return format_fixed(Rational(r, scale), decimals);
  };
  return {outward(lower_bound(x), false), outward(upper_bound(x), true)};
}

/// x to `decimals` digits when every real in x rounds to the same string (then
/// each printed digit is certified), otherwise its outward enclosure "[lo, hi]".
inline std::string certified_or_enclosure(const Interval& x, int decimals) {
  if (auto s = certified_fixed(x, decimals)) return *s;
  const auto [lo, hi] = enclosure_fixed(x, decimals);
  return "[" + lo + ", " + hi + "]";
}

/// x in scientific notation with `significant` digits, rounded toward -inf
/// (`up` false) or +inf (`up` true): "-1.2345e+07", "0", "inf". For printing the
/// ends of an enclosure whose magnitude fixed-point cannot show.
inline std::string format_scientific(const Real& x, int significant, bool up) {
  if (mpfr_nan_p(x.backend().data())) return "nan";
  if (mpfr_inf_p(x.backend().data())) return mpfr_sgn(x.backend().data()) > 0 ? "inf" : "-inf";
  if (mpfr_zero_p(x.backend().data())) return "0";
  mpfr_exp_t e = 0;
  char* raw = mpfr_get_str(nullptr, &e, 10, static_cast<std::size_t>(std::max(significant, 2)), x.backend().data(),
                           up ? MPFR_RNDU : MPFR_RNDD);
  std::string digits(raw);
  mpfr_free_str(raw);
  std::string sign;
  if (digits[0] == '-') {
    sign = "-";
    digits.erase(0, 1);
  }
  const long exponent = static_cast<long>(e) - 1;  // raw value is 0.DIGITS * 10^e
  std::string out = sign + digits.substr(0, 1);
  if (digits.size() > 1) {  // appended in two steps: GCC 12 misreads "." + string&& as an overflow
    out += '.';
    out += std::string_view(digits).substr(1);
  }
  out += (exponent < 0 ? "e-" : "e+");
  const std::string ex = std::to_string(exponent < 0 ? -exponent : exponent);
  return out + (ex.size() < 2 ? "0" + ex : ex);
}

/// Both ends of x in scientific notation, rounded outward.
inline std::pair<std::string, std::string> enclosure_scientific(const Interval& x, int significant) {
  return {format_scientific(lower_bound(x), significant, false), format_scientific(upper_bound(x), significant, true)};
}

/// The most digits a result is printed with (decimals or significant digits).
inline constexpr int max_printed_digits = 1000;

/// How numbers are written: `count` digits after the point (fixed point, for
/// people: "0.123457"), or `count` significant digits (scientific notation, for
/// programs: a weight of 3.1e-9 stays 3.1e-9 instead of becoming 0.000000; 17
/// significant digits read back as the very double written).
struct DecimalFormat {
  enum class Kind { decimals, significant };
  Kind kind = Kind::decimals;
  int count = 6;
  static DecimalFormat decimals(int count) { return {Kind::decimals, count}; }
  static DecimalFormat significant(int count) { return {Kind::significant, count}; }
  /// "6 decimals", "17 significant digits": for messages.
  std::string words() const {
    return std::to_string(count) + (kind == Kind::decimals ? " decimals" : " significant digits");
  }
  /// The working precision to start a certified computation from (bits_for_decimals's rule;
  /// significant digits are relative, which interval arithmetic on attention keeps).
  unsigned start_bits() const { return bits_for_decimals(count); }
};

/// q rounded once, exactly, as `f` asks (ties away from zero).
inline std::string format_decimal(const Rational& q, DecimalFormat f) {
  return f.kind == DecimalFormat::Kind::decimals ? format_fixed(q, f.count) : format_significant(q, f.count);
}

/// The certified rounding of every real in x as `f` asks, or nothing when the
/// ends of x round differently. Both roundings are monotone, so equal ends prove
/// the printed string for every point between them.
inline std::optional<std::string> certified_decimal(const Interval& x, DecimalFormat f) {
  if (!scalar_traits<Interval>::is_finite(x)) return std::nullopt;
  std::string lo = format_decimal(to_rational(lower_bound(x)), f);
  if (lo != format_decimal(to_rational(upper_bound(x)), f)) return std::nullopt;
  return lo;
}

/// x as `f` asks when certified, otherwise its outward enclosure "[lo, hi]".
inline std::string certified_or_enclosure(const Interval& x, DecimalFormat f) {
  if (f.kind == DecimalFormat::Kind::decimals) return certified_or_enclosure(x, f.count);
  if (auto s = certified_decimal(x, f)) return *s;
  const auto [lo, hi] = enclosure_scientific(x, f.count);
  return "[" + lo + ", " + hi + "]";
}

/// The shortest decimal that reads back as x: a value the user typed, printed back as typed.
inline std::string shortest_decimal(double x) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, x).ptr;
  return std::string(buffer, end);
}

/// q as a person wrote or saw it, for messages: the shortest decimal that reads back as q when
/// q is a double (a value from .npy or safetensors), else its exact decimal when that
/// terminates within 40 digits (-1/5 from a CSV's "-0.2"), else the fraction.
inline std::string exact_decimal_text(const Rational& q) {
  const double d = q.convert_to<double>();
  if (std::isfinite(d) && Rational(d) == q) return shortest_decimal(d);
  if (const std::optional<int> digits = terminating_decimals(q); digits && *digits <= 40)
    return format_fixed(q, *digits);
  return q.str();
}

/// A proven upper bound x (a double) printed so the text is still an upper
/// bound: rounded toward +inf to `significant` digits, "3.76e-01". Printing it
/// to nearest could show a number below the bound actually proven.
inline std::string format_upper_bound(double x, int significant = 3) {
  Real r;
  mpfr_set_prec(r.backend().data(), 53);
  mpfr_set_d(r.backend().data(), x, MPFR_RNDN);  // exact: 53 bits hold any double
  return format_scientific(r, significant, true);
}

/// A proven lower bound x printed so the text is still a lower bound: rounded
/// toward -inf to `significant` digits.
inline std::string format_lower_bound(double x, int significant = 3) {
  Real r;
  mpfr_set_prec(r.backend().data(), 53);
  mpfr_set_d(r.backend().data(), x, MPFR_RNDN);  // exact: 53 bits hold any double
  return format_scientific(r, significant, false);
}

}  // namespace attnrank
