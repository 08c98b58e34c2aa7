#pragma once
// Linear algebra modulo a word-size prime, in double arithmetic.
//
// Residues live in doubles as integers in [0, p). With p < 2^26 a product of two
// residues is below 2^52 and so exact in a double (the primes the exact tools
// use are below 2^23, so that sums of 64 such products are exact too), and x - p * floor(x / p) with
// one correction step reduces any exact integer |x| < 2^53 into [0, p). The loops
// are plain arrays so the compiler vectorises them. Nothing here is approximate:
// every double holds an exact integer, which is why the exact rank tools may use
// these results as proofs (a minor that is nonsingular mod p is nonsingular over Z).

#include <attnrank/numbers/tiers.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnrank::detail {

/// Deterministic primality for 32-bit numbers (trial division; they are small).
inline bool is_small_prime(std::uint32_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (std::uint32_t d = 3; d * d <= n; d += 2)
    if (n % d == 0) return false;
  return true;
}

/// The largest prime strictly below `below` (below > 2).
inline std::uint32_t prime_below(std::uint32_t below) {
  std::uint32_t n = below - 1;
  while (!is_small_prime(n)) --n;
  return n;
}

/// A prime modulus with its reciprocal, and reduction of exact integers.
struct Modulus {
  double p;
  double inv;

  explicit Modulus(std::uint32_t prime) : p(prime), inv(1.0 / prime) {}

  /// x mod p in [0, p) for an exact integer |x| < 2^53.
  double reduce(double x) const {
    double r = x - p * std::floor(x * inv);
    if (r < 0) r += p;
    if (r >= p) r -= p;
    return r;
  }
  double mul(double a, double b) const { return reduce(a * b); }
  /// a^-1 mod p for a residue a != 0 (Fermat: a^(p-2)).
  double inverse(double a) const {
    std::uint64_t e = static_cast<std::uint64_t>(p) - 2;
    double base = a, result = 1;
    while (e) {
      if (e & 1) result = mul(result, base);
      base = mul(base, base);
      e >>= 1;
    }
    return result;
  }
};

/// Dense row-major matrix of residues.
struct ModMatrix {
  Eigen::Index rows = 0, cols = 0;
  std::vector<double> a;
  ModMatrix(Eigen::Index r, Eigen::Index c) : rows(r), cols(c), a(static_cast<std::size_t>(r * c), 0.0) {}
  double* row(Eigen::Index i) { return a.data() + i * cols; }
  const double* row(Eigen::Index i) const { return a.data() + i * cols; }
  double& operator()(Eigen::Index i, Eigen::Index j) { return a[static_cast<std::size_t>(i * cols + j)]; }
};

/// The integer matrix A reduced mod p.
inline ModMatrix reduce_mod(const Matrix<Integer>& A, const Modulus& m) {
  ModMatrix r(A.rows(), A.cols());
  const auto p = static_cast<unsigned long>(m.p);
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) r(i, j) = static_cast<double>(mpz_fdiv_ui(A(i, j).backend().data(), p));
  return r;
}

/// Row echelon form mod p by Gaussian elimination, one reduction per entry and
/// pivot (blocked_echelon.hpp's echelon_mod does the same in GEMMs; this is its
/// reference and its path for small matrices). Pivot columns are taken left to
/// right; `pivot_rows[k]` is the original index of the row that supplied the k-th
/// pivot. The minor A[pivot_rows, pivot_cols] is nonsingular mod p, and the rank
/// mod p is pivot_cols.size(). `det` is the determinant mod p when A is square.
struct ModEchelon {
  std::vector<Eigen::Index> pivot_rows, pivot_cols;
  double det = 0;
};

/// What both eliminations (this one and blocked_echelon.hpp's) keep while they
/// choose pivots: the original index of every row, and the determinant mod p so
/// far (negated by each row swap, times each pivot).
struct PivotRows {
  std::vector<Eigen::Index> origin;
  double det = 1;

  explicit PivotRows(Eigen::Index rows) : origin(static_cast<std::size_t>(rows)) {
    for (Eigen::Index i = 0; i < rows; ++i) origin[static_cast<std::size_t>(i)] = i;
  }

  /// Moves the first row at or below `top` with a nonzero entry in column c up
  /// to `top` (whole rows: whatever they carry moves with them) and sets
  /// `inverse` to 1 / pivot mod p. False, and det 0, when column c has none.
  bool take(ModMatrix& M, const Modulus& m, Eigen::Index top, Eigen::Index c, double& inverse) {
    Eigen::Index piv = top;
    while (piv < M.rows && M(piv, c) == 0) ++piv;
    if (piv == M.rows) {
      det = 0;
      return false;
    }
    if (piv != top) {
      std::swap_ranges(M.row(piv), M.row(piv) + M.cols, M.row(top));
      std::swap(origin[static_cast<std::size_t>(piv)], origin[static_cast<std::size_t>(top)]);
      det = det == 0 ? 0 : m.reduce(m.p - det);
    }
    det = m.mul(det, M(top, c));
    inverse = m.inverse(M(top, c));
    return true;
  }
};

inline ModEchelon echelon_mod_unblocked(ModMatrix M, const Modulus& m) {
  ModEchelon out;
  PivotRows rows(M.rows);
  Eigen::Index r = 0;
  for (Eigen::Index c = 0; c < M.cols && r < M.rows; ++c) {
    double inv = 0;
    if (!rows.take(M, m, r, c, inv)) continue;
    const double* pr = M.row(r);
    for (Eigen::Index i = r + 1; i < M.rows; ++i) {
      double* ri = M.row(i);
      if (ri[c] == 0) continue;
      const double f = m.p - m.mul(ri[c], inv);  // ri -= (ri[c] / pivot) * pr
      for (Eigen::Index j = c; j < M.cols; ++j) ri[j] = m.reduce(ri[j] + f * pr[j]);
    }
    out.pivot_rows.push_back(rows.origin[static_cast<std::size_t>(r)]);
    out.pivot_cols.push_back(c);
    ++r;
  }
  out.det = (M.rows == M.cols && r == M.rows) ? rows.det : 0;
  return out;
}

/// The inverse of a square matrix mod p by Gauss-Jordan, or false when it is
/// singular mod p.
inline bool inverse_mod(ModMatrix M, const Modulus& m, ModMatrix& inverse) {
  const Eigen::Index n = M.rows;
  inverse = ModMatrix(n, n);
  for (Eigen::Index i = 0; i < n; ++i) inverse(i, i) = 1;
  for (Eigen::Index c = 0; c < n; ++c) {
    Eigen::Index piv = c;
    while (piv < n && M(piv, c) == 0) ++piv;
    if (piv == n) return false;
    if (piv != c) {
      std::swap_ranges(M.row(piv), M.row(piv) + n, M.row(c));
      std::swap_ranges(inverse.row(piv), inverse.row(piv) + n, inverse.row(c));
    }
    const double inv = m.inverse(M(c, c));
    for (Eigen::Index j = 0; j < n; ++j) {
      M(c, j) = m.mul(M(c, j), inv);
      inverse(c, j) = m.mul(inverse(c, j), inv);
    }
    for (Eigen::Index i = 0; i < n; ++i) {
      if (i == c || M(i, c) == 0) continue;
      const double f = m.p - M(i, c);
      double* mi = M.row(i);
      double* ii = inverse.row(i);
      const double* mc = M.row(c);
      const double* ic = inverse.row(c);
      for (Eigen::Index j = 0; j < n; ++j) {
        mi[j] = m.reduce(mi[j] + f * mc[j]);
        ii[j] = m.reduce(ii[j] + f * ic[j]);
      }
    }
  }
  return true;
}

/// The primes just below 2^23, largest first: 64 products of two residues sum to
/// less than 2^53, so blocked elimination reduces once per panel of 64 columns.
/// A fixed, deterministic sequence, so every run makes the same choices.
class PrimeSequence {
 public:
  explicit PrimeSequence(std::uint32_t below = 1u << 23) : next_(below) {}
  std::uint32_t next() { return next_ = prime_below(next_); }

 private:
  std::uint32_t next_;
};

}  // namespace attnrank::detail
