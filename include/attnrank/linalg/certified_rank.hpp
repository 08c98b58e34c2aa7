#pragma once
// Certified rank bounds for floating or interval data.
//
// Semantics: `certified_rank` returns lower <= rank(A) <= upper for every real
// matrix A in the input (a point matrix of doubles, a ball of doubles, exact
// rationals, or an MPFI interval matrix).
//  * lower is proven by an r x r minor M shown nonsingular with a preconditioned
//    test: with R an approximate inverse of mid(M), an upper bound of
//    ||I - R M||_inf below 1 proves R M, hence M, nonsingular (a Neumann series
//    argument: ||I - R M|| < 1 makes R M invertible). The minor is chosen
//    numerically (full-pivot LU on the midpoint); the proof is interval
//    arithmetic: directed-rounding GEMMs on doubles (numbers/directed_rounding.hpp) at 53
//    bits, or MPFI at higher precision. A square matrix too ill-conditioned for
//    that test in doubles gets a second stage with its first product in
//    double-double (linalg/detail/two_stage_preconditioner.hpp) before any search
//    for a smaller minor.
//  * upper is min(m, n) unless lower reaches it: a floating matrix never proves a
//    rank deficiency (exact data can: see linalg/exact_rank.hpp).
// Not guaranteed: that lower is the rank. Near-singular minors fail the test and
// lower drops; more precision (`bits`) can raise it, never make it wrong.

#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/error.hpp>
#include <attnrank/numbers/scalar_traits.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

struct CertifiedRank {
  Eigen::Index lower = 0, upper = 0;
  /// The lower x lower minor A[pivot_rows, pivot_cols] proven nonsingular.
  std::vector<Eigen::Index> pivot_rows, pivot_cols;
  /// Proven upper bound of ||I - R M||_inf for that minor (< 1), 0 when lower = 0;
  /// for "double-double", of ||I - Y|| for the two-stage Y (R = the product of
  /// both stages' factors).
  double residual_bound = 0;
  /// "directed-rounding" (doubles), "double-double" (two stages), or "mpfi".
  std::string method;
  /// Working precision of the proof, in bits.
  unsigned bits = 53;
};

/// Rank bounds valid for every matrix in the ball (|X - mid| <= rad), by the
/// double directed-rounding test. Throws input_error on NaN or infinite entries.
/// A square ball the one-stage test does not prove nonsingular gets the two-stage
/// test next unless `try_two_stages` is false: callers whose matrix is singular by
/// construction (a row-centred log, C 1 = 0) skip it, since it cannot succeed there.
CertifiedRank certified_rank(const BallMatrix& A, bool try_two_stages = true);

/// Full rank of a square ball by the one-stage test alone (the cheapest proof):
/// lower = upper = n with that proof, or nullopt when it fails (certified_rank
/// may then still prove more). Throws input_error on NaN or infinite entries.
std::optional<CertifiedRank> certified_full_rank_by_one_stage(const BallMatrix& A);

/// Rank bounds of a matrix of doubles, each taken as the exact real it denotes.
CertifiedRank certified_rank(const Eigen::MatrixXd& A);

/// Uncertified, for choosing what to prove: min(cap, numeric rank of M) by
/// complete-pivot elimination stopped after `cap` pivots or at FullPivLU's
/// threshold (eps max(rows, cols) times the first pivot), at O(cap rows cols).
/// A result below cap says M is numerically rank-deficient.
Eigen::Index numeric_rank_up_to(const Eigen::MatrixXd& M, Eigen::Index cap);

/// Rank bounds valid for every real matrix in the interval matrix A, proven in
/// MPFI at the current precision (PrecisionScope).
CertifiedRank certified_rank(const Matrix<Interval>& A);

/// Rank bounds of an exact rational matrix at `bits` of working precision: at 53
/// bits or less the data are enclosed in double balls and the directed-rounding
/// test runs; above, MPFI at `bits`. Raising bits can only help.
CertifiedRank certified_rank(const Matrix<Rational>& A, unsigned bits = 53);

/// Proves the minor A[rows, cols] (square) nonsingular for every matrix in the
/// ball by the directed-rounding test; returns the proven bound on
/// ||I - R M||_inf (< 1), or nothing when the test fails. A point minor (radius 0)
/// tries one GEMM with an a priori bound first (numbers/a_priori_product.hpp), and
/// the directed pair only when that bound is not below 1.
std::optional<double> certify_nonsingular_minor(const BallMatrix& A, const std::vector<Eigen::Index>& rows,
                                                const std::vector<Eigen::Index>& cols);

/// The same proof in MPFI at the current precision.
std::optional<double> certify_nonsingular_minor(const Matrix<Interval>& A, const std::vector<Eigen::Index>& rows,
                                                const std::vector<Eigen::Index>& cols);

/// Throws input_error unless min_precision_bits <= bits <= max_precision_bits.
inline void require_precision_bits(unsigned bits) {
  if (bits < min_precision_bits || bits > max_precision_bits)
    throw input_error("precision " + std::to_string(bits) + " bits is outside [" + std::to_string(min_precision_bits) +
                      ", " + std::to_string(max_precision_bits) + "]");
}


}  // namespace attnrank
