#pragma once
// Lower bounds on the floors of a nested mask's blocks from two factorisations
// instead of one minor search per block (docs/math.md, "The staircase's minors
// from two factorisations").
//
// A chain is a staircase's blocks (or its overlaps) in order: each block's rows a
// suffix of the previous block's rows, its columns the previous block's columns
// followed by more. rank([L_{R,J}; 1^T]) = rank(L_{R,J} C) + 1, so a nonsingular
// (s + 1) x (s + 1) minor of [L_{R,J}; 1^T] that uses the ones row proves
// floor(B) >= s. Such minors nest along the chain:
//  * tall blocks (|R| >= |J| - 1, the first ones), with t the last: the ones row
//    and any |J_k| - 1 rows of R_t (inside every earlier R_k) on the columns J_k
//    are the leading minors of [1^T; L_{R_t, J_t}] with its rows in any order;
//  * wide blocks (the rest), with w the first: the ones row and R_k (a prefix of
//    R_w in decreasing width) on any |R_k| + 1 columns of J_w (inside every later
//    J_k) are the leading minors of the transposed [1^T; L_{R_w, J_w}], columns
//    in any order.
// certified_leading_minors (linalg/leading_minors.hpp) proves each family's
// leading minors at once, choosing the free order by pivoting.
//
// Guarantee: every bound set is proven for every L within the enclosures `logs`;
// a block whose proof falls short keeps the bound it had (0 when new).

#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/reach/masked.hpp>

#include <vector>

namespace attnrank::detail {

/// Sets lower (and its ones-row minor, MaskedBlock::minor_with_ones_row) on each
/// block of the chain where the two factorisations prove more than it has.
/// logs: enclosures of log A on the allowed set (n x n; only the blocks' entries
/// are read). Throws std::logic_error when the blocks are not a chain.
void chain_lower_bounds(const BoundsMatrix& logs, const std::vector<MaskedBlock*>& chain);

}  // namespace attnrank::detail
