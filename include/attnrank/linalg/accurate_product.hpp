#pragma once
// Matrix products of doubles to about twice double precision, with proven error.
//
// Semantics: `accurate_product` returns a DoubleDoubleBall that contains the exact
// product of its operands (doubles taken as the exact reals they denote), with a
// radius of about k 2^-97 |A| |B| (k the inner dimension): the product as if
// computed in 106-bit arithmetic, at the cost of about a dozen double GEMMs.
// Nothing is returned (std::nullopt) when an operand has a NaN or an infinity, or
// a nonzero row (of A) or column (of B) whose largest entry lies outside
// [2^-400, 2^400]: there the splitting below could underflow, and callers fall
// back to MPFI. Shapes that do not match throw std::invalid_argument, as multiply does.
//
// Method (Ozaki, Ogita, Oishi and Rump's error-free splitting of a product):
//  * each row of A is split exactly into A = A1 + A2 + A3, where A1 holds the
//    row's leading beta bits and A2 the next beta bits (on the row's own scale),
//    and each column of B likewise, with 2 beta + ceil(log2 k) <= 53; then every
//    product A_i B_j of slices is exact in double arithmetic, in any summation
//    order, with or without FMA, on any number of threads;
//  * A B = A1 B1 + A1 B2 + A2 B1 + A2 B2 + (A B3 + A3 (B1 + B2)): the four slice
//    products are exact GEMMs; the last two products are about 2^-44 |A||B| and
//    are enclosed together by one directed-rounding GEMM pair over the inner
//    dimension 2k (numbers/directed_rounding.hpp);
//  * hi = A1 B1 + A1 B2 + A2 B1 rounded to nearest, with the rounding errors kept
//    exactly by TwoSum (Knuth), and lo +- rad the rest, summed by directed
//    rounding. So hi + lo + [-rad, rad] contains A B.
// Used by the certified determinant and rank for matrices too ill-conditioned for
// one double preconditioner (docs/rank.md, "Ill-conditioned matrices").

#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <optional>

namespace attnrank {

/// Encloses A B for point matrices of doubles.
std::optional<DoubleDoubleBall> accurate_product(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B);
/// Encloses A X for every X in the ball.
std::optional<DoubleDoubleBall> accurate_product(const Eigen::MatrixXd& A, const DoubleDoubleBall& X);
/// Encloses X B for every X in the ball.
std::optional<DoubleDoubleBall> accurate_product(const DoubleDoubleBall& X, const Eigen::MatrixXd& B);

}  // namespace attnrank
