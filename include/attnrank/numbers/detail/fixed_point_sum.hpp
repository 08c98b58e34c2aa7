#pragma once
// A fixed-point accumulator for sums of MPFR products, rounded once at the end.
//
// Adding sum_k x_k y_k one MPFR operation at a time costs a multiply and an add
// per term, each with its own normalisation and rounding (~40 ns at 171 bits).
// Here every exact significand product x_k y_k (GMP's mpn layer) is shifted onto
// one two's-complement integer whose unit 2^base lies at or below the lowest bit
// of every term, with a whole guard limb above the largest (room for 2^63 terms
// and the sign). The integer is then the exact sum, rounded once to the output's
// precision in the mode asked for: a correctly rounded dot product, and, rounding
// down (or negating, rounding down, negating back), a proven lower (upper) bound
// of it, as the interval product needs (linalg/detail/fixed_point_dot.hpp).
//
// The one exception: when the terms' exponents (e_x + e_y) span more than
// max_span_bits, the unit is fixed at 2^(top - max_span_bits - 64 m), where 2^top
// bounds every term and m is the widest significand product in limbs, and the
// bits below it are dropped by rounding each term down (floor), so the sum stays
// a lower bound, off by less than that unit per term: at most
// n 2^-(max_span_bits - 2) max_k |x_k y_k| in all.

#include <gmp.h>
#include <mpfr.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace attnrank {
namespace detail {

/// Limbs of the significand of a regular MPFR number.
inline mp_size_t significand_limbs(mpfr_srcptr x) {
  return static_cast<mp_size_t>((mpfr_get_prec(x) + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS);
}

inline const mp_limb_t* significand(mpfr_srcptr x) {
  return static_cast<const mp_limb_t*>(mpfr_custom_get_significand(x));
}

/// out = (-1)^negative {limbs, size} 2^exponent, rounded in mode rnd; returns
/// MPFR's ternary value. `limbs` may have high zero limbs (size >= 1).
inline int round_scaled_integer(mpfr_ptr out, const mp_limb_t* limbs, mp_size_t size, bool negative, long exponent,
                                mpfr_rnd_t rnd) {
  while (size > 0 && limbs[size - 1] == 0) --size;
  mpz_t z;
  mpz_roinit_n(z, limbs, negative ? -size : size);
  return mpfr_set_z_2exp(out, z, exponent, rnd);
}

/// The terms of one sum: call `include` for each nonzero product to fix the
/// scale, then `start`, then `add` each term; `round` writes the result.
class FixedPointSum {
 public:
  /// Accounts for the product x y (both regular: nonzero and finite).
  void include(mpfr_srcptr x, mpfr_srcptr y) {
    const long e = mpfr_custom_get_exp(x) + mpfr_custom_get_exp(y);
    const mp_size_t limbs = significand_limbs(x) + significand_limbs(y);
    const long bottom = e - static_cast<long>(GMP_NUMB_BITS) * limbs;
    if (!any_ || e > top_exponent_) top_exponent_ = e;
    if (!any_ || bottom < bottom_) bottom_ = bottom;
    if (!any_ || limbs > max_limbs_) max_limbs_ = limbs;
    any_ = true;
  }

  /// Clears the integer; the scale is fixed by the terms included so far.
  void start() {
    const long bits = static_cast<long>(GMP_NUMB_BITS);
    base_ = std::max(bottom_, top_exponent_ - max_span_bits - bits * static_cast<long>(max_limbs_));
    width_ = static_cast<mp_size_t>((top_exponent_ - base_ + bits - 1) / bits) + 1;
    acc_.assign(static_cast<std::size_t>(width_), 0);
    if (shifted_.size() < acc_.size()) shifted_.resize(acc_.size());
  }

  /// Adds floor(x y) (or floor(-x y) when `negate`) in units of 2^base; x and y
  /// regular and accounted for by `include`.
  void add(mpfr_srcptr x, mpfr_srcptr y, bool negate) {
    mp_size_t xn = significand_limbs(x), yn = significand_limbs(y);
    const mp_limb_t* xp = significand(x);
    const mp_limb_t* yp = significand(y);
    if (xn < yn) {
      std::swap(xn, yn);
      std::swap(xp, yp);
    }
    const mp_size_t m = xn + yn;
    if (product_.size() < static_cast<std::size_t>(m) + 1) product_.resize(static_cast<std::size_t>(m) + 1);
    mpn_mul(product_.data(), xp, xn, yp, yn);
    const bool negative = (mpfr_signbit(x) != mpfr_signbit(y)) != negate;
    // Value of the product: P 2^(ex + ey - 64 m) = P 2^shift units.
    const long shift = mpfr_custom_get_exp(x) + mpfr_custom_get_exp(y) -
                       static_cast<long>(GMP_NUMB_BITS) * static_cast<long>(m) - base_;
    add_shifted(product_.data(), m, shift, negative);
  }

  /// True when no term was included: the sum is exactly zero.
  bool empty() const { return !any_; }

  /// Rounds the integer times 2^base into `out` in mode `rnd` (negated first when
  /// `negate`); returns MPFR's ternary value.
  int round(mpfr_ptr out, mpfr_rnd_t rnd, bool negate) {
    if (!any_) {
      mpfr_set_zero(out, 1);
      return 0;
    }
    std::vector<mp_limb_t>& magnitude = shifted_;
    const bool negative = (acc_.back() >> (GMP_NUMB_BITS - 1)) != 0;
    if (negative)
      mpn_neg(magnitude.data(), acc_.data(), width_);
    else
      std::copy(acc_.begin(), acc_.end(), magnitude.begin());
    return round_scaled_integer(out, magnitude.data(), width_, negative != negate, base_, rnd);
  }

  /// Forgets every term, ready for the next sum.
  void reset() { any_ = false; }

  /// Widest span of the terms' exponents summed exactly (see the top of the file).
  static constexpr long max_span_bits = 16384;

 private:
  // acc += floor(P 2^shift) or acc -= ceil(P 2^shift), P having m limbs.
  void add_shifted(const mp_limb_t* p, mp_size_t m, long shift, bool negative) {
    const long bits = static_cast<long>(GMP_NUMB_BITS);
    const long word = shift >= 0 ? shift / bits : -((-shift + bits - 1) / bits);
    const unsigned bit = static_cast<unsigned>(shift - word * bits);
    // P 2^bit, limb by limb, lands on limbs word .. word + m of the integer.
    const long first = std::max(word, 0L), last = std::min(word + static_cast<long>(m) + 1, static_cast<long>(width_));
    bool dropped = false;  // nonzero bits below the unit were cut off
    for (long at = word; at < last; ++at) {
      const long i = at - word;
      const mp_limb_t low = i > 0 ? p[i - 1] : 0;
      const mp_limb_t high = i < m ? p[i] : 0;
      const mp_limb_t limb = bit == 0 ? high : (high << bit) | (low >> (GMP_NUMB_BITS - bit));
      if (at < 0)
        dropped = dropped || limb != 0;
      else
        shifted_[static_cast<std::size_t>(at - first)] = limb;
    }
    mp_limb_t* target = acc_.data() + first;
    const mp_size_t room = width_ - static_cast<mp_size_t>(first);
    const mp_size_t length = static_cast<mp_size_t>(last - first);
    if (!negative) {
      if (length > 0) mpn_add(target, target, room, shifted_.data(), length);
    } else {
      if (length > 0) mpn_sub(target, target, room, shifted_.data(), length);
      if (dropped) mpn_sub_1(acc_.data(), acc_.data(), width_, 1);
    }
  }

  bool any_ = false;
  long top_exponent_ = 0, bottom_ = 0, base_ = 0;
  mp_size_t max_limbs_ = 0, width_ = 0;
  std::vector<mp_limb_t> acc_, shifted_, product_;
};

}  // namespace detail
}  // namespace attnrank
