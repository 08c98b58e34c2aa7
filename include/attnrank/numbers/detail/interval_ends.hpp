#pragma once
// The endpoint sign table of interval multiplication: which ends of [x] and [y]
// give the lower and the upper end of [x] [y], by the signs of the factors. Both
// certified dot products (linalg/detail/fixed_point_dot.hpp, MPFR numbers one by
// one; linalg/detail/packed_product.hpp, packed rows) read it from here, so the
// one rule of soundness they share is written once, as MPFI chooses the ends.

namespace attnrank::detail {

/// The sign class of an interval from the signs of its ends: 1 when it is >= 0
/// (left end not negative), -1 when it is <= 0 (right end not positive), 0 when
/// it straddles zero.
constexpr int interval_sign_class(int left_sign, int right_sign) {
  return left_sign >= 0 ? 1 : right_sign <= 0 ? -1 : 0;
}

/// interval_ends[class(x) + 1][class(y) + 1] = {x end, y end} of the lower
/// product, then {x end, y end} of the upper (0 = left, 1 = right). When both
/// straddle zero the ends depend on a comparison of products: callers handle
/// that case themselves and must not read the entry.
inline constexpr int interval_ends[3][3][4] = {
    // x <= 0:          y <= 0        y straddles   y >= 0
    {{1, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 1, 0}},
    // x straddles:
    {{1, 0, 0, 0}, {0, 0, 0, 0}, {0, 1, 1, 1}},
    // x >= 0:
    {{1, 0, 0, 1}, {1, 0, 1, 1}, {0, 0, 1, 1}}};

}  // namespace attnrank::detail
