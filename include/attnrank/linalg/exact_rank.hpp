#pragma once
// Exact linear algebra over the rationals: rank, determinant, reduced row echelon
// form and kernel. Every answer here is exact and proven by the computation that
// returns it; none is probabilistic.
//
// Two routes, one contract:
//  * fraction-free (Bareiss) elimination on the integer matrix obtained by
//    clearing each row's denominators (row scaling changes neither rank nor kernel,
//    and changes the determinant by a known factor);
//  * a fast path for rank and determinant through word-size primes:
//      - a minor that is nonsingular mod p is nonsingular over Z, so the rank mod p
//        is a proven lower bound, with the minor as witness;
//      - when that bound is below min(m, n), an exact kernel certificate (n - r
//        independent integer vectors, found by p-adic lifting and checked exactly)
//        proves the matching upper bound; if the check fails the prime was
//        unlucky, and the next prime (then Bareiss) is tried;
//      - the determinant is recovered by the Chinese remainder theorem from
//        enough primes to exceed twice Hadamard's bound.

#include <attnrank/error.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <string>
#include <vector>

namespace attnrank {

/// The exact rank of a matrix, with what proves it.
struct ExactRank {
  Eigen::Index rank = 0;
  /// A[pivot_rows, pivot_cols] is a nonsingular rank x rank minor: rank >= rank.
  std::vector<Eigen::Index> pivot_rows, pivot_cols;
  /// n x (n - rank) integer matrix of independent columns with A * kernel == 0
  /// (checked exactly): rank <= rank. Rows `free_cols` of it are d * identity.
  Matrix<Integer> kernel;
  std::vector<Eigen::Index> free_cols;
  /// "modular" (pivots from a prime, kernel by lifting) or "bareiss".
  std::string method;
};

/// The rank of A, exactly, with a nonsingular minor and a kernel basis as proof.
ExactRank exact_rank(const Matrix<Rational>& A);
ExactRank exact_rank(const Matrix<Integer>& A);

/// The rank by fraction-free elimination alone (the reference the fast path is
/// tested against; also its fallback).
ExactRank exact_rank_by_elimination(const Matrix<Rational>& A);

/// det(A), exactly. Throws input_error when A is not square.
Rational exact_determinant(const Matrix<Rational>& A);
Integer exact_determinant(const Matrix<Integer>& A);
/// det(A) by fraction-free elimination alone.
Integer exact_determinant_by_elimination(const Matrix<Integer>& A);

/// The reduced row echelon form R of A (pivot entries 1, zeros above and below
/// them, zero rows last) and its pivot columns.
struct RowEchelonForm {
  Matrix<Rational> R;
  std::vector<Eigen::Index> pivot_cols;
};
RowEchelonForm exact_reduced_row_echelon(const Matrix<Rational>& A);

/// A basis of {x : A x = 0} as the columns of an n x (n - rank) matrix; column t
/// has a 1 in the t-th free (non-pivot) column of the echelon form.
Matrix<Rational> exact_kernel_basis(const Matrix<Rational>& A);

/// Independent check of an ExactRank: the minor is nonsingular (exact
/// determinant), the kernel columns are annihilated by A and independent (their
/// free-column rows form a nonzero multiple of the identity), and the counts add
/// up to n. Returns false on any failure.
bool check_exact_rank(const Matrix<Rational>& A, const ExactRank& result);

/// A with every row multiplied by the least common multiple of its denominators;
/// `row_scale` (if given) receives those multipliers.
Matrix<Integer> clear_row_denominators(const Matrix<Rational>& A, std::vector<Integer>* row_scale = nullptr);

}  // namespace attnrank
