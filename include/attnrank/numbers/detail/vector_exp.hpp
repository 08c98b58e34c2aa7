#pragma once
// exp on doubles, written so that a loop over an array compiles to SIMD code
// (no calls, no branches, no tables): the double tier's softmax spends most of
// its time in exp, and glibc's exp is one call per element.
//
//   x = k ln2 + r,  |r| <= 0.35,  exp(x) = 2^k exp(r),
//
// k = nearest integer to x / ln2 (round-to-nearest shifter); r = x - k L_hi - k L_lo
// (Cody-Waite: L_hi has 32 significant bits, so k L_hi is exact for |k| <= 2^11
// and x - k L_hi is exact); exp(r) by its Taylor polynomial of degree 13 in
// Horner form; the scaling 2^k in two exact steps 2^k1 2^k2, so results in the
// subnormal range are rounded once.
//
// Error, with u = 2^-53, for results in the normal range (|x| <= 708):
//   truncation   rho^14/14! e^rho / e^-rho            < 0.09 u   (rho = 0.35)
//   Horner       sum_j (2j + 1) rho^j / j! / e^-rho   < 3.42 u   (Higham (5.3); the
//                coefficients 1/j! are rounded once, adding < 0.01 u)
//   reduction    |d r| <= u |r| + 1100 |ln2 - L_hi - L_lo| + u |k L_lo|   < 0.36 u
// so |exp_double(x) - exp(x)| < 4 u exp(x). Below 2^-1022 the result is within
// 2^-1075 + 4 u exp(x) of exp(x). Overflow gives +inf, exp(-inf) = 0, NaN stays
// NaN. tests/attention/softmax.test.cpp checks all of this against MPFR.

#include <bit>
#include <cstddef>
#include <cstdint>

namespace attnrank::detail {

/// exp(x) with relative error below 4 u = 2^-51 for normal results (see above).
/// Always inlined: a call inside the loop stops its vectorisation, and GCC stops
/// inlining it by itself in a large translation unit (the unity build: the
/// certified double layer ran 1.3-1.6x slower with exp_double out of line).
[[gnu::always_inline]] inline double exp_double(double x) {
  constexpr double inv_ln2 = 1.4426950408889634074;
  constexpr double ln2_hi = 0x1.62e42feep-1;              // 32 significant bits
  constexpr double ln2_lo = 0x1.a39ef35793c76p-33;        // ln2 - ln2_hi, rounded
  constexpr double shifter = 0x1.8p52;                    // x + shifter rounds x to an integer
  // Beyond these exp(x) is 0 or +inf in double; clamping keeps k in range for the
  // exponent arithmetic below. NaN (of either sign: inf - inf is -NaN) computes as
  // 0 and is returned as it came: a NaN's bits in that arithmetic would overflow
  // an int64 (UBSan caught -NaN from an optimiser's overflowing trial step).
  const double input = x;
  x = x == x ? x : 0.0;
  x = x < -746.0 ? -746.0 : x;
  x = x > 710.0 ? 710.0 : x;
  const double t = x * inv_ln2 + shifter;
  const double kd = t - shifter;  // exact: an integer of at most 11 bits
  const std::int64_t k = std::bit_cast<std::int64_t>(t) - std::bit_cast<std::int64_t>(shifter);
  const double r = (x - kd * ln2_hi) - kd * ln2_lo;
  // Horner with a separate multiply and add per step (-ffp-contract=off: no fusion). Not
  // __builtin_fma: under -frounding-math, which the library is built with, GCC treats it as
  // a call that reads the rounding mode, and the loops over arrays stop vectorising (the
  // certified tanh's loop: 20 ns per entry scalar, 6.8 vectorised). The error bound above is
  // for separate roundings.
#define ATTNRANK_EXP_STEP(a, b, c) ((a) * (b) + (c))
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 479001600.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 39916800.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 3628800.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 362880.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 40320.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 5040.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 720.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 120.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 24.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0 / 6.0);
  p = ATTNRANK_EXP_STEP(p, r, 0.5);
  p = ATTNRANK_EXP_STEP(p, r, 1.0);
  p = ATTNRANK_EXP_STEP(p, r, 1.0);
#undef ATTNRANK_EXP_STEP
  // 2^k = 2^k1 2^k2 with both factors normal (k is in [-1077, 1025]); shifts of
  // non-negative values only, which every SIMD level has.
  const std::uint64_t biased = static_cast<std::uint64_t>(k + 1100);
  const std::int64_t k1 = static_cast<std::int64_t>(biased >> 1) - 550;
  const std::int64_t k2 = k - k1;
  const double scale1 = std::bit_cast<double>(static_cast<std::uint64_t>(k1 + 1023) << 52);
  const double scale2 = std::bit_cast<double>(static_cast<std::uint64_t>(k2 + 1023) << 52);
  const double result = p * scale1 * scale2;
  return input == input ? result : input;
}

/// v[i] = exp_double(v[i]) for i < count; the loop the compiler vectorises.
inline void exp_in_place(double* v, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) v[i] = exp_double(v[i]);
}

}  // namespace attnrank::detail
