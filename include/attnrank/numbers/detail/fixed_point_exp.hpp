#pragma once
// exp on MPFR numbers in fixed point, for the softmax of the Real and Interval
// tiers, where mpfr_exp (~1.5 us at 171 bits) was the largest single cost.
//
//   x = k ln2 + r,  0 <= r < 1,  r = j1 / 2^8 + j2 / 2^16 + s,  0 <= s < 2^-16,
//   exp(x) = 2^k  exp(j1 / 2^8) exp(j2 / 2^16) exp(s).
//
// r comes from MPFR at 128 bits more than the fixed point (so its error is far
// below one unit); the two factors are read from 256-entry tables built once per
// width (rounded to nearest); exp(s) is its Taylor polynomial, degree chosen so
// the remainder is below a quarter unit. Everything is an unsigned fixed-point
// number of L + 1 limbs with F = 64 L fraction bits, F >= precision + 64, and
// every product is truncated. Counting one unit = 2^-F:
//   exp(s): Horner truncations and coefficient roundings <= 2.1, remainder 0.25;
//   T1 T2 (tables 0.5 each, T1 < e, T2 < 1.004): <= 3.1 more;  (T1 T2) exp(s): <= 12.3;
//   r (MPFR's rounding, the ln2 constant, the truncation to F bits) <= 1.1 units of
//   r, i.e. <= 3 units of y.
// So y = T1 T2 exp(s) is within E = 64 units of exp(r) (a wide margin), and
//   - `exp_to_nearest` rounds y - E and y + E: when both give the same number it
//     is the correctly rounded exp(x), the same number mpfr_exp returns (Ziv's
//     test; it fails with probability ~2^(precision - F + 7) <= 2^-57, and then
//     mpfr_exp answers);
//   - `exp_bound` rounds y - E down (MPFR_RNDD) or y + E up (MPFR_RNDU): proven
//     bounds within an ulp of exp(x)'s own roundings, as the interval tier needs.
// Outside |x| < 2^20, for precisions above 960 bits, zeros, infinities and NaN,
// MPFR's own exp answers.

#include <attnrank/numbers/detail/fixed_point_sum.hpp>

#include <gmp.h>
#include <mpfr.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace attnrank::detail {

/// Constants for one width: L fraction limbs; every fixed-point value has L + 1.
struct FixedExpTables {
  mp_size_t limbs = 0;                  // L
  int terms = 0;                        // Taylor degree for exp(s), s < 2^-16
  std::vector<mp_limb_t> coarse, fine;  // exp(j / 2^8), exp(j / 2^16), j < 256
  std::vector<mp_limb_t> inverse_factorial;  // 1 / i!, i <= terms
  std::vector<mp_limb_t> ln2_store;     // significand of ln2 at 64 (L + 2) bits
  mpfr_t ln2;                           // reads ln2_store (custom interface): no clear needed

  const mp_limb_t* entry(const std::vector<mp_limb_t>& table, std::size_t i) const {
    return table.data() + i * static_cast<std::size_t>(limbs + 1);
  }
};

/// Writes round-to-nearest(v 2^F) as L + 1 limbs; v in [0, 2^64), precision >= F + 64.
inline void store_fixed(mp_limb_t* out, mp_size_t limbs, mpfr_ptr v) {
  const long F = 64L * limbs;
  mpfr_mul_2si(v, v, F, MPFR_RNDN);
  mpz_t z;
  mpz_init(z);
  mpfr_get_z(z, v, MPFR_RNDN);
  for (mp_size_t i = 0; i <= limbs; ++i) out[i] = mpz_getlimbn(z, i);
  mpz_clear(z);
}

inline std::unique_ptr<FixedExpTables> build_fixed_exp_tables(mp_size_t limbs) {
  auto t = std::make_unique<FixedExpTables>();
  t->limbs = limbs;
  const long F = 64L * limbs;
  // Smallest degree d with 2^-16 (d+1) / (d+1)! e^(2^-16) <= 2^-(F+2): sum log2 in
  // double is accurate to far better than the one bit of margin added here.
  double log2_bound = 0;
  int d = 0;
  for (;;) {
    log2_bound += -16.0 - std::log2(static_cast<double>(d + 1));  // log2(2^-16(d+1)/(d+1)!)
    if (log2_bound + 0.001 <= -static_cast<double>(F + 3)) break;
    ++d;
  }
  t->terms = d;
  const auto stride = static_cast<std::size_t>(limbs + 1);
  t->coarse.resize(256 * stride);
  t->fine.resize(256 * stride);
  t->inverse_factorial.resize(static_cast<std::size_t>(d + 1) * stride);
  mpfr_t v;
  mpfr_init2(v, static_cast<mpfr_prec_t>(F + 128));
  for (int j = 0; j < 256; ++j) {
    mpfr_set_ui_2exp(v, static_cast<unsigned long>(j), -8, MPFR_RNDN);
    mpfr_exp(v, v, MPFR_RNDN);
    store_fixed(t->coarse.data() + static_cast<std::size_t>(j) * stride, limbs, v);
    mpfr_set_ui_2exp(v, static_cast<unsigned long>(j), -16, MPFR_RNDN);
    mpfr_exp(v, v, MPFR_RNDN);
    store_fixed(t->fine.data() + static_cast<std::size_t>(j) * stride, limbs, v);
  }
  mpfr_set_ui(v, 1, MPFR_RNDN);
  for (int i = 0; i <= d; ++i) {
    if (i > 0) mpfr_div_ui(v, v, static_cast<unsigned long>(i), MPFR_RNDN);
    mpfr_t c;
    mpfr_init2(c, static_cast<mpfr_prec_t>(F + 128));
    mpfr_set(c, v, MPFR_RNDN);
    store_fixed(t->inverse_factorial.data() + static_cast<std::size_t>(i) * stride, limbs, c);
    mpfr_clear(c);
  }
  mpfr_clear(v);
  const auto ln2_prec = static_cast<mpfr_prec_t>(64 * (limbs + 2));
  t->ln2_store.resize(static_cast<std::size_t>(mpfr_custom_get_size(ln2_prec) / sizeof(mp_limb_t)));
  mpfr_custom_init(t->ln2_store.data(), ln2_prec);
  mpfr_custom_init_set(t->ln2, MPFR_REGULAR_KIND, 0, ln2_prec, t->ln2_store.data());
  mpfr_const_log2(t->ln2, MPFR_RNDN);
  return t;
}

/// The tables for L fraction limbs (1 <= L <= 16), built once and then shared
/// read-only by every thread.
inline const FixedExpTables& fixed_exp_tables(mp_size_t limbs) {
  static std::array<std::once_flag, 17> once;
  static std::array<std::unique_ptr<FixedExpTables>, 17> tables;
  const auto i = static_cast<std::size_t>(limbs);
  std::call_once(once[i], [&] { tables[i] = build_fixed_exp_tables(limbs); });
  return *tables[i];
}

/// Scratch space for one thread's exponentials.
struct FixedExpWorkspace {
  std::vector<mp_limb_t> a, b, s, product;
  mpfr_t r, kln2;
  mpfr_prec_t prec = 0;
  FixedExpWorkspace() = default;
  FixedExpWorkspace(const FixedExpWorkspace&) = delete;
  FixedExpWorkspace& operator=(const FixedExpWorkspace&) = delete;
  ~FixedExpWorkspace() {
    if (prec != 0) {
      mpfr_clear(r);
      mpfr_clear(kln2);
    }
  }
  void reserve(mp_size_t limbs) {
    const auto n = static_cast<std::size_t>(limbs + 1);
    a.resize(n);
    b.resize(n);
    s.resize(n);
    product.resize(2 * n);
    const auto want = static_cast<mpfr_prec_t>(64 * (limbs + 2));
    if (prec != want) {
      if (prec != 0) {
        mpfr_clear(r);
        mpfr_clear(kln2);
      }
      mpfr_init2(r, want);
      mpfr_init2(kln2, want);
      prec = want;
    }
  }
};

/// out = floor(a b / 2^F), a with L + 1 limbs, b with nb limbs; out may alias a.
inline void fixed_multiply(mp_limb_t* out, const mp_limb_t* a, const mp_limb_t* b, mp_size_t nb, mp_size_t limbs,
                           std::vector<mp_limb_t>& product) {
  mpn_mul(product.data(), a, limbs + 1, b, nb);  // (L + 1) + nb limbs, nb <= L + 1
  for (mp_size_t i = 0; i <= limbs; ++i) out[i] = product[static_cast<std::size_t>(i + limbs)];
}

/// Computes y ~ exp(x) 2^-k as an L + 1 limb fixed-point number in w.a (within 64
/// units of exp(x) 2^-k, see the top of the file) and returns true, or returns
/// false when the fixed point does not apply (the caller uses MPFR).
inline bool fixed_exp_core(mpfr_srcptr x, mp_size_t limbs, FixedExpWorkspace& w, long& k) {
  if (!mpfr_regular_p(x) || mpfr_get_exp(x) > 20 || limbs > 16) return false;
  const FixedExpTables& t = fixed_exp_tables(limbs);
  w.reserve(limbs);
  const double xd = mpfr_get_d(x, MPFR_RNDN);
  k = static_cast<long>(std::floor(xd * 1.4426950408889634));
  mpfr_mul_si(w.kln2, t.ln2, k, MPFR_RNDN);
  mpfr_sub(w.r, x, w.kln2, MPFR_RNDN);
  if (mpfr_sgn(w.r) < 0) {  // the double estimate of k was one too high
    --k;
    mpfr_add(w.r, w.r, t.ln2, MPFR_RNDN);
  }
  if (mpfr_sgn(w.r) < 0 || mpfr_cmp_ui(w.r, 1) >= 0) return false;
  // r = m 2^(e - 64 n) with the n-limb significand m; in units 2^-F that is
  // m >> (64 n - F - e) = m >> (128 - e): at least two whole limbs.
  const mp_size_t n = limbs + 2;
  std::fill(w.s.begin(), w.s.end(), 0);
  if (!mpfr_zero_p(w.r)) {
    const long shift = 128 - mpfr_get_exp(w.r);
    const long word = shift / 64, bits = shift % 64;
    if (word < n) {
      const mp_limb_t* m = significand(w.r);
      const mp_size_t keep = n - word;  // <= L
      if (bits == 0)
        std::copy(m + word, m + n, w.s.begin());
      else
        mpn_rshift(w.s.data(), m + word, keep, static_cast<unsigned>(bits));
    }
  }
  const mp_limb_t top = w.s[static_cast<std::size_t>(limbs - 1)];
  const auto j1 = static_cast<std::size_t>(top >> 56), j2 = static_cast<std::size_t>((top >> 48) & 0xff);
  w.s[static_cast<std::size_t>(limbs - 1)] = top & ((mp_limb_t{1} << 48) - 1);
  // exp(s) by Horner: p = c_d; p = p s + c_i.
  mp_limb_t* p = w.b.data();
  std::copy_n(t.entry(t.inverse_factorial, static_cast<std::size_t>(t.terms)), limbs + 1, p);
  for (int i = t.terms - 1; i >= 0; --i) {
    fixed_multiply(p, p, w.s.data(), limbs, limbs, w.product);
    mpn_add_n(p, p, t.entry(t.inverse_factorial, static_cast<std::size_t>(i)), limbs + 1);
  }
  fixed_multiply(w.a.data(), t.entry(t.coarse, j1), t.entry(t.fine, j2), limbs + 1, limbs, w.product);
  fixed_multiply(w.a.data(), w.a.data(), p, limbs + 1, limbs, w.product);
  return true;
}

/// Fraction limbs for a result of precision p: F = 64 L >= p + 64.
inline mp_size_t fixed_exp_limbs(mpfr_prec_t p) { return static_cast<mp_size_t>((p + 64 + 63) / 64); }

/// out = y +- 64 units (y in w.a) times 2^(k - F), rounded in mode rnd.
inline int round_fixed_exp(mpfr_ptr out, FixedExpWorkspace& w, mp_size_t limbs, long k, bool plus, mpfr_rnd_t rnd) {
  std::copy_n(w.a.data(), limbs + 1, w.b.data());
  if (plus)
    mpn_add_1(w.b.data(), w.b.data(), limbs + 1, 64);
  else
    mpn_sub_1(w.b.data(), w.b.data(), limbs + 1, 64);
  return round_scaled_integer(out, w.b.data(), limbs + 1, false, k - 64L * limbs, rnd);
}

/// out = exp(x) rounded to nearest: the same value and ternary sign as
/// mpfr_exp(out, x, MPFR_RNDN). `spare` is scratch (set to out's precision).
inline int exp_to_nearest(mpfr_ptr out, mpfr_srcptr x, mpfr_ptr spare, FixedExpWorkspace& w) {
  const mpfr_prec_t prec = mpfr_get_prec(out);
  const mp_size_t limbs = fixed_exp_limbs(prec);
  long k = 0;
  if (fixed_exp_core(x, limbs, w, k)) {
    if (mpfr_get_prec(spare) != prec) mpfr_set_prec(spare, prec);
    const int below = round_fixed_exp(spare, w, limbs, k, false, MPFR_RNDN);
    const int above = round_fixed_exp(out, w, limbs, k, true, MPFR_RNDN);
    // Both ends round to the same number: it is the rounding of exp(x) (rounding
    // is monotone). When it also lies on the same side of both ends, it lies on
    // that side of exp(x): that is the ternary value.
    if (mpfr_equal_p(spare, out) && below != 0 && (below > 0) == (above > 0)) return above;
  }
  return mpfr_exp(out, x, MPFR_RNDN);
}

/// out = a number <= exp(x) (rnd = MPFR_RNDD) or >= exp(x) (MPFR_RNDU), within a
/// few units in the last place of it.
inline void exp_bound(mpfr_ptr out, mpfr_srcptr x, mpfr_rnd_t rnd, FixedExpWorkspace& w) {
  const mp_size_t limbs = fixed_exp_limbs(mpfr_get_prec(out));
  long k = 0;
  if (fixed_exp_core(x, limbs, w, k))
    round_fixed_exp(out, w, limbs, k, rnd == MPFR_RNDU, rnd);
  else
    mpfr_exp(out, x, rnd);
}

}  // namespace attnrank::detail
