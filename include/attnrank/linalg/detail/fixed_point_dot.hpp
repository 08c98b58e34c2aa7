#pragma once
// Dot products of rows of MPFR and MPFI numbers on the fixed-point accumulator
// of numbers/detail/fixed_point_sum.hpp: exact significand products, summed exactly,
// rounded once.
//
//   Real:      sum_k x_k y_k correctly rounded to nearest.
//   Interval:  [sum_k lo_k rounded down, sum_k hi_k rounded up], where
//              [lo_k, hi_k] is the exact product of the k-th intervals (its
//              ends are endpoint products, chosen by the signs as in MPFI): the
//              tightest enclosure at the output's precision.
//
// Both hold while the products' exponents span at most max_span_bits (16384),
// at any precision; past that, what lies below the span is dropped (rounded
// down, so bounds stay bounds) and the error gains n 2^-16382 max_k |x_k y_k|.
// Infinite or NaN operands, and a term whose intervals both straddle zero (the
// one sign case that needs a comparison of two products), take the plain MPFR
// or MPFI loop for that entry instead; the result is then what MPFR/MPFI give.

#include <attnrank/numbers/detail/fixed_point_sum.hpp>
#include <attnrank/numbers/detail/interval_ends.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <mpfi.h>

#include <vector>

namespace attnrank {
namespace detail {

/// Scratch for one thread's dot products: reused across entries.
struct DotWorkspace {
  FixedPointSum low, high;
  struct Pair {
    mpfr_srcptr lx = nullptr, ly = nullptr, hx = nullptr, hy = nullptr;
  };
  std::vector<Pair> pairs;
};

/// out = x . y for rows of n MPFR numbers; `term` is scratch for the fallback.
inline void dot(mpfr_ptr out, const Real* x, const Real* y, Eigen::Index n, DotWorkspace& w, mpfr_ptr term) {
  FixedPointSum& sum = w.low;
  sum.reset();
  bool plain = false;
  for (Eigen::Index k = 0; k < n && !plain; ++k) {
    mpfr_srcptr a = x[k].backend().data(), b = y[k].backend().data();
    if (!mpfr_number_p(a) || !mpfr_number_p(b))
      plain = true;
    else if (!mpfr_zero_p(a) && !mpfr_zero_p(b))
      sum.include(a, b);
  }
  if (plain) {  // MPFR's own semantics for infinities and NaN
    mpfr_set_zero(out, 1);
    for (Eigen::Index k = 0; k < n; ++k) {
      mpfr_mul(term, x[k].backend().data(), y[k].backend().data(), MPFR_RNDN);
      mpfr_add(out, out, term, MPFR_RNDN);
    }
    return;
  }
  if (!sum.empty()) {
    sum.start();
    for (Eigen::Index k = 0; k < n; ++k) {
      mpfr_srcptr a = x[k].backend().data(), b = y[k].backend().data();
      if (!mpfr_zero_p(a) && !mpfr_zero_p(b)) sum.add(a, b, false);
    }
  }
  sum.round(out, MPFR_RNDN, false);  // +0 when every term was zero
}

/// The endpoints whose products bound [a] [b] below (lx ly) and above (hx hy);
/// false when both intervals straddle zero. Endpoints must be finite.
inline bool endpoint_pairs(mpfi_srcptr a, mpfi_srcptr b, DotWorkspace::Pair& p) {
  // The sign table (numbers/detail/interval_ends.hpp); mpfr_sgn(-0) is 0.
  const int sa = interval_sign_class(mpfr_sgn(&a->left), mpfr_sgn(&a->right));
  const int sb = interval_sign_class(mpfr_sgn(&b->left), mpfr_sgn(&b->right));
  if (sa == 0 && sb == 0) return false;
  const int* ends = interval_ends[sa + 1][sb + 1];
  const mpfr_srcptr x[2] = {&a->left, &a->right}, y[2] = {&b->left, &b->right};
  p = {x[ends[0]], y[ends[1]], x[ends[2]], y[ends[3]]};
  return true;
}

/// out = x . y for rows of n MPFI intervals, an enclosure of the exact dot
/// product of the inputs; `term` is scratch for the fallback.
inline void dot(mpfi_ptr out, const Interval* x, const Interval* y, Eigen::Index n, DotWorkspace& w, mpfi_ptr term) {
  w.low.reset();
  w.high.reset();
  w.pairs.resize(static_cast<std::size_t>(n));
  bool plain = false;
  const auto regular = [](mpfr_srcptr a, mpfr_srcptr b) { return !mpfr_zero_p(a) && !mpfr_zero_p(b); };
  for (Eigen::Index k = 0; k < n; ++k) {
    mpfi_srcptr a = x[k].backend().data(), b = y[k].backend().data();
    if (!mpfr_number_p(&a->left) || !mpfr_number_p(&a->right) || !mpfr_number_p(&b->left) ||
        !mpfr_number_p(&b->right)) {
      plain = true;
      break;
    }
    DotWorkspace::Pair& p = w.pairs[static_cast<std::size_t>(k)];
    if (!endpoint_pairs(a, b, p)) {
      plain = true;
      break;
    }
    if (regular(p.lx, p.ly)) w.low.include(p.lx, p.ly);
    if (regular(p.hx, p.hy)) w.high.include(p.hx, p.hy);
  }
  if (plain) {  // MPFI's own loop
    mpfi_set_ui(out, 0);
    for (Eigen::Index k = 0; k < n; ++k) {
      mpfi_mul(term, x[k].backend().data(), y[k].backend().data());
      mpfi_add(out, out, term);
    }
    return;
  }
  if (!w.low.empty()) w.low.start();
  if (!w.high.empty()) w.high.start();
  for (Eigen::Index k = 0; k < n; ++k) {
    const DotWorkspace::Pair& p = w.pairs[static_cast<std::size_t>(k)];
    if (regular(p.lx, p.ly)) w.low.add(p.lx, p.ly, false);
    if (regular(p.hx, p.hy)) w.high.add(p.hx, p.hy, true);
  }
  w.low.round(&out->left, MPFR_RNDD, false);
  w.high.round(&out->right, MPFR_RNDU, true);
  // MPFI's convention for zero endpoints: [+0, ...] and [..., -0].
  if (mpfr_zero_p(&out->left)) mpfr_set_zero(&out->left, 1);
  if (mpfr_zero_p(&out->right)) mpfr_set_zero(&out->right, -1);
}

}  // namespace detail
}  // namespace attnrank
