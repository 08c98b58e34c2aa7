#pragma once
// Strict reading of certificate fields: what a checker may rely on before it
// redoes any mathematics. A certificate is accepted only as exactly the object
// its producer writes: every field of the right type and range, no field the
// format does not know, no field missing. Each helper throws
// std::invalid_argument with a message that names the field; the checkers turn
// it into a rejection.

#include <attnrank/error.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnrank {

namespace detail {

using nlohmann::json;

/// `obj` is an object with every key of `required`, and no key outside
/// `required` and `optional`. `where` names the object in messages.
inline void require_fields(const json& obj, const std::vector<const char*>& required,
                           const std::vector<const char*>& optional, const std::string& where) {
  if (!obj.is_object()) throw std::invalid_argument(where + " is not an object");
  for (const char* k : required)
    if (!obj.contains(k)) throw std::invalid_argument(where + " has no field \"" + k + "\"");
  for (const auto& item : obj.items()) {
    bool known = false;
    for (const auto* list : {&required, &optional})
      for (const char* k : *list) known = known || item.key() == k;
    if (!known) throw std::invalid_argument(where + " has an unknown field \"" + item.key() + "\"");
  }
}

/// An integer field. nlohmann's get<long> of a non-integer number casts it
/// (2.3e125 to long is undefined behaviour: fuzz_certificate), so anything but a
/// JSON integer is rejected first.
inline std::int64_t json_integer(const json& v) {
  if (!v.is_number_integer()) throw std::invalid_argument("expected an integer, got " + v.dump());
  return v.get<std::int64_t>();
}

inline std::string json_string(const json& v, const std::string& what) {
  if (!v.is_string()) throw std::invalid_argument(what + " must be a string, got " + v.dump());
  return v.get<std::string>();
}

inline bool json_bool(const json& v, const std::string& what) {
  if (!v.is_boolean()) throw std::invalid_argument(what + " must be true or false, got " + v.dump());
  return v.get<bool>();
}

/// A finite number >= 0 (an error bound).
inline double json_bound(const json& v, const std::string& what) {
  if (!v.is_number()) throw std::invalid_argument(what + " must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (!(x >= 0) || x == INFINITY) throw std::invalid_argument(what + " must be a finite number >= 0");
  return x;
}

/// One of `choices`, exactly.
inline std::string json_choice(const json& v, std::initializer_list<const char*> choices, const std::string& what) {
  const std::string s = json_string(v, what);
  for (const char* c : choices)
    if (s == c) return s;
  throw std::invalid_argument(what + " \"" + s + "\" is not one of the values the format allows");
}

}  // namespace detail
}  // namespace attnrank
