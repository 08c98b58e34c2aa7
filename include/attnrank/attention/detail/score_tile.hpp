#pragma once
// The variants' score modifiers (attention/score_modifiers.hpp) on a column-major tile of
// score bounds, in place: the one implementation behind modify_score_bounds (a block of
// whole rows) and the fused forward pass (attention/detail/a_priori_head.hpp, a few
// columns at a time). Guarantee: for bounds lo <= x <= hi of the scaled scores of rows
// first_row .. first_row + rows - 1 and keys first_col .. first_col + cols - 1 of a head
// with `queries` queries and `keys` keys, the arrays end holding bounds of the modified
// scores (softcap, then ALiBi, then the bias), every operation rounded outward (tanh by
// numbers/certified_tanh.hpp). Sets its rounding modes itself and restores the caller's.

#include <attnrank/attention/score_modifiers.hpp>

namespace attnrank::detail {

/// In place on `lo` and `hi` (rows x cols, column-major, leading dimension rows). With a softcap
/// and `tanh_lo` / `tanh_hi` (rows x cols too), the bounds of tanh(x / c) are stored there.
/// The bias, when there is one, must be queries x keys (the caller checks).
void modify_score_tile(double* lo, double* hi, Eigen::Index rows, Eigen::Index cols, const ScoreModifiers& m,
                       Eigen::Index first_row, Eigen::Index first_col, Eigen::Index queries, Eigen::Index keys,
                       double* tanh_lo = nullptr, double* tanh_hi = nullptr);

}  // namespace attnrank::detail
