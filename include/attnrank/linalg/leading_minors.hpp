#pragma once
// Every leading minor of a ball matrix proven nonsingular at once, from one
// factorisation: what a chain of nested blocks needs instead of one test each.
//
// Guarantee: certified_leading_minors(H, fixed_rows) returns a row order and a
// size `proven` such that, for every real matrix H' in the ball H and every
// k <= proven, the leading k x k minor of H'(order, :) (its first k rows in that
// order, its first k columns) is nonsingular.
//
// How: partial-pivot LU of the midpoint (rows chosen by pivoting, the first
// fixed_rows kept in place), stopped at its numeric rank m; X ~ L^-1 and
// Y ~ U^-1 of the leading m x m factors, set exactly triangular; then an
// enclosure of E = I - X G Y over the ball, G the leading m x m of H(order, :).
// X lower and Y upper triangular make the leading k x k block of X G Y equal to
// X_k G_k Y_k, so ||E_k||_inf < 1 proves X_k G_k Y_k, hence G_k, nonsingular for
// every k at once; ||E_k||_inf is non-decreasing in k (a submatrix's row sums
// are partial sums), so the proven sizes are 1 .. proven. Cost: the LU to the
// numeric rank, two triangular inverses and two enclosed GEMMs of size m.
// Not guaranteed: that `proven` is the largest size with all leading minors
// nonsingular (near-singular minors fail the test, and the pivot order is
// chosen numerically).

#include <attnrank/numbers/directed_rounding.hpp>

#include <vector>

namespace attnrank {

struct LeadingMinors {
  /// Rows of H in pivot order, the first `proven` of them (0-based).
  std::vector<Eigen::Index> order;
  /// Every leading k x k minor, k <= proven, of H(order, :) is nonsingular.
  Eigen::Index proven = 0;
  /// residual[k - 1] >= ||I - X_k G_k Y_k||_inf, below 1, for k = 1 .. proven.
  std::vector<double> residual;
};

/// The proof above for a ball matrix H (any shape; a non-finite entry ends the
/// search before its column). fixed_rows (0 <= fixed_rows <= rows) rows at the
/// top keep their places: every proven minor contains them (the ones row of a
/// masked block). Throws std::invalid_argument on a bad fixed_rows.
LeadingMinors certified_leading_minors(const BallMatrix& H, Eigen::Index fixed_rows = 0);

}  // namespace attnrank
