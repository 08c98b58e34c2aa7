#pragma once
// Certified softmax in doubles: for every real score matrix S within entrywise
// bounds lo <= S <= hi, bounds on softmax(S) row by row, computed with doubles and
// directed rounding only (no MPFR), so at the cost of a few passes over the
// matrix. The proof:
//  * any shift m of a row leaves softmax unchanged; m = max_j hi_ij keeps every
//    exponent <= 0 (no overflow), and s_ij - m lies in [lo_ij - m, hi_ij - m]
//    with the two differences rounded down and up;
//  * exp by numbers/detail/vector_exp.hpp (round to nearest), whose error is
//    below 4u exp(x) + 2^-1075 (u = 2^-53); widened by 8u relative and 2^-1021
//    absolute in directed rounding, the results bound exp below and above (a
//    normal constant: a subnormal one costs a microcode assist per entry on x86,
//    which made the softmax 20x slower);
//  * p_ij = e_ij / sum_k e_k lies in [e_lo / sum_hi, e_hi / sum_lo] (the sums
//    rounded down and up, the quotients outward), and in [0, 1].
// Width for point scores: about (2 n + 20 + 2 |s_ij - max_j s_ij|) u relative
// (n the row length: the sums; the last term: exp's conditioning), plus what the
// width of the score bounds costs through exp.
// Rows with an infinite or NaN bound get [0, 1]: true, and useless.
// With a mask, masked scores are -inf: those entries are exactly [0, 0], and
// their bounds are not read.

#include <attnrank/attention/mask.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

namespace attnrank {

/// Bounds of softmax over each row, for every S with S.lo <= S <= S.hi.
BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S);

/// The same over the positions `mask` allows (S square, of the mask's size;
/// throws input_error otherwise); masked entries are exactly 0.
BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S, const Mask& mask);

/// Rows first_row .. first_row + rows(S) - 1 of the masked softmax, S holding
/// those rows of the score bounds (mask.size() columns): a row block of a larger
/// job. Throws input_error when the rows do not fit the mask.
BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S, const Mask& mask, Eigen::Index first_row);

/// Rows first_row .. of the softmax with an attention sink: p_ij = exp(x_ij) /
/// (exp(sink) + sum_j exp(x_ij)) over the keys `mask` allows (every key without one), so
/// a row's weights sum to less than 1; the sink enters the denominator only. Its term is
/// enclosed as the others (the shift m_i >= sink keeps it <= 1). With `sink_weight`, bounds of
/// the sink's own weight exp(sink) / (exp(sink) + sum_j exp(x_ij)) per row are stored there
/// (rows x 1; its gradient's factor). Throws input_error for a sink that is not finite, or rows
/// that do not fit the mask.
BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S, const Mask* mask, Eigen::Index first_row, double sink,
                                      BoundsMatrix* sink_weight = nullptr);

/// Bounds of Q K^T / sqrt(d_k) for the double matrices Q, K (n x d_k): two
/// directed GEMMs, and the division by sqrt(d_k) enclosed.
BoundsMatrix certified_scaled_scores(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K);

/// An upper bound on max |P_ij - T_ij| over every P within `P` and T within `T`
/// (same shape), rounded up; +inf when a bound is not finite.
double max_abs_difference_upper(const BoundsMatrix& P, const BoundsMatrix& T);

/// An upper bound on max |softmax(S)_ij - T_ij| over every S within `S` and T
/// within `T` (same shape), the softmax masked by `mask` (nullptr: none): a
/// witness's certified error. The softmax and the difference run by fixed blocks
/// of rows on the cores (rows are independent; the blocks do not depend on the
/// number of threads, so neither does the bound). A row whose score bounds are not
/// finite has weights known only in [0, 1], as certified_softmax_bounds says.
double max_softmax_distance_upper(const BoundsMatrix& S, const Mask* mask, const BoundsMatrix& T);

}  // namespace attnrank
