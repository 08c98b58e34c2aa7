#pragma once
// What the text readers of io/parse.hpp share about one cell: trimming, showing
// it in a message, refusing it. Internal to the io module.

#include <attnrank/error.hpp>

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

namespace attnrank::detail {

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

/// A cell as it may be shown: control and non-ASCII bytes escaped, long cells cut.
inline std::string shown(std::string_view text) {
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

[[noreturn]] inline void bad_number(std::string_view text, const std::string& why) {
  throw input_error("'" + shown(text) + "' is not a number: " + why);
}

/// A cell that is not a plain decimal the fast path encloses: the exact reader takes over.
struct NotPlainDecimal {};

/// [mid - rad, mid + rad] around a plain decimal cell (parse_plain_decimal_balls);
/// NotPlainDecimal for anything else.
std::pair<double, double> plain_decimal_ball(std::string_view cell);

}  // namespace attnrank::detail
