#pragma once
// Fraction-free (Bareiss) elimination on integer matrices. After k pivots every
// entry of the working matrix is a (k+1) x (k+1) minor of the input, so the
// divisions by the previous pivot are exact and intermediate sizes stay within
// Hadamard's bound instead of growing like fractions do. Raw GMP calls on a
// row-major copy: the expression templates of Boost.Multiprecision would allocate
// a temporary per operation.

#include <attnrank/numbers/tiers.hpp>

#include <vector>

namespace attnrank::detail {

/// Row-major integer matrix on which the fraction-free eliminations work.
struct IntegerRows {
  Eigen::Index rows = 0, cols = 0;
  std::vector<Integer> a;
  explicit IntegerRows(const Matrix<Integer>& A) : rows(A.rows()), cols(A.cols()), a(static_cast<std::size_t>(rows * cols)) {
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) at(i, j) = A(i, j);
  }
  Integer& at(Eigen::Index i, Eigen::Index j) { return a[static_cast<std::size_t>(i * cols + j)]; }
  mpz_ptr z(Eigen::Index i, Eigen::Index j) { return at(i, j).backend().data(); }
  void swap_rows(Eigen::Index i, Eigen::Index k) {
    for (Eigen::Index j = 0; j < cols; ++j) std::swap(at(i, j), at(k, j));
  }
};

/// The outcome of a fraction-free elimination: the pivot positions (row indices
/// are the input's), the sign of the row permutation, and the last pivot (the
/// determinant of the pivot minor up to that sign).
struct BareissResult {
  std::vector<Eigen::Index> pivot_rows, pivot_cols;
  int sign = 1;
  Integer last_pivot{1};
};

/// Bareiss forward elimination. With `reduce_above` it is the fraction-free
/// Gauss-Jordan variant: rows above each pivot are cleared too, and at the end
/// every pivot equals `last_pivot`, so the pivot rows are last_pivot times the
/// reduced row echelon form.
inline BareissResult bareiss(IntegerRows& M, bool reduce_above) {
  BareissResult out;
  std::vector<Eigen::Index> origin(static_cast<std::size_t>(M.rows));
  for (Eigen::Index i = 0; i < M.rows; ++i) origin[static_cast<std::size_t>(i)] = i;
  Integer prev{1}, t;
  mpz_ptr tz = t.backend().data();
  Eigen::Index r = 0;
  for (Eigen::Index c = 0; c < M.cols && r < M.rows; ++c) {
    Eigen::Index piv = r;
    while (piv < M.rows && mpz_sgn(M.z(piv, c)) == 0) ++piv;
    if (piv == M.rows) continue;
    if (piv != r) {
      M.swap_rows(piv, r);
      std::swap(origin[static_cast<std::size_t>(piv)], origin[static_cast<std::size_t>(r)]);
      out.sign = -out.sign;
    }
    mpz_srcptr pivot = M.z(r, c);
    const mpz_srcptr divisor = prev.backend().data();
    for (Eigen::Index i = reduce_above ? 0 : r + 1; i < M.rows; ++i) {
      if (i == r) continue;
      mpz_ptr lead = M.z(i, c);
      // Row r is zero left of c, so rows below need only j > c; rows above (the
      // Gauss-Jordan case) may hold nonzeros left of c, which the same formula
      // scales by pivot / prev.
      for (Eigen::Index j = i < r ? 0 : c + 1; j < M.cols; ++j) {
        if (j == c) continue;
        mpz_ptr e = M.z(i, j);
        mpz_mul(tz, pivot, e);
        mpz_submul(tz, lead, M.z(r, j));
        mpz_divexact(e, tz, divisor);
      }
      mpz_set_ui(lead, 0);
    }
    prev = M.at(r, c);
    out.pivot_rows.push_back(origin[static_cast<std::size_t>(r)]);
    out.pivot_cols.push_back(c);
    ++r;
  }
  out.last_pivot = prev;
  return out;
}

}  // namespace attnrank::detail
