#pragma once
// 10^e as an exact integer, shared by parsing and decimal printing.

#include <attnrank/numbers/tiers.hpp>

namespace attnrank::detail {

inline Integer pow10(long e) {
  Integer r;
  mpz_ui_pow_ui(r.backend().data(), 10, static_cast<unsigned long>(e));
  return r;
}

}  // namespace attnrank::detail
