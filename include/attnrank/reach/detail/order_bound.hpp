#pragma once
// A lower bound on E*(A, 1) from the order of two rows' entries. A head of width
// 1 has scores S_ij = q_i k_j / 1, so in row i the order of two keys' weights,
// sign(P_ij - P_ij') = sign(q_i (k_j - k_j')), is the same for every pair of keys
// up to the one sign of q_i. Two rows i, i' and two key pairs p = (a, a'),
// p' = (b, c), all four keys allowed in both rows, where row i orders p and p'
// alike and row i' oppositely, cannot both come from one width-1 head. If every
// one of the four gaps |Â_rj - Â_rj'| exceeds 2 eps, a head within eps of Â
// keeps all four orders (|P - Â| <= eps on each side), so no head of width 1 is
// within eps: E*(A, 1) >= min gap / 2 (docs/math.md, "The order bound").
//
// Guarantee: order_lower_bound's eps is proven from certified bounds on Â (lower
// minus upper, rounded down); check_order_proof re-proves a claimed eps in exact
// rationals. The choice of rows and keys is a heuristic: any choice is sound.

#include <attnrank/attention/mask.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/scalar_traits.hpp>

#include <Eigen/Core>

#include <array>

namespace attnrank::detail {

struct OrderProof {
  double eps = 0;  ///< E*(A, 1) >= eps; 0: no pair of rows found
  std::array<Eigen::Index, 2> rows{};
  /// The pairs (cols[0], cols[1]) and (cols[2], cols[3]).
  std::array<Eigen::Index, 4> cols{};
};

/// The best order bound found among the rows with the largest entries (at most
/// `candidates` of them, every pair of them tried): for rows i, i' the pair of
/// their largest entries' keys, where they disagree, and the pair (the key both
/// rows weigh most, the key both weigh least), where they agree. `target` holds
/// certified bounds on Â (normalized_target_bounds); `mask` (nullptr: none)
/// restricts the keys to those both rows allow.
OrderProof order_lower_bound(const BoundsMatrix& target, const Mask* mask, Eigen::Index candidates = 48);

/// Whether the rows and keys prove E*(A, 1) >= eps, in exact rationals on
/// Â = A with rows normalised: rows distinct and in range, keys in range and
/// allowed in both rows, every gap above 2 eps, and the rows ordering the two
/// pairs one alike and one oppositely.
bool check_order_proof(const Matrix<Rational>& A, const Mask* mask, const std::array<Eigen::Index, 2>& rows,
                       const std::array<Eigen::Index, 4>& cols, double eps);

}  // namespace attnrank::detail
