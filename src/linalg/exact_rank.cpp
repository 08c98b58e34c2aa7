// Exact rank, determinant, echelon form and kernel (attnrank/linalg/exact_rank.hpp):
// a modular fast path with exact certificates, fraction-free elimination behind it.
#include <attnrank/linalg/exact_rank.hpp>

#include <attnrank/linalg/detail/bareiss.hpp>
#include <attnrank/linalg/detail/blocked_echelon.hpp>
#include <attnrank/linalg/detail/require_square.hpp>
#include <attnrank/linalg/detail/dixon.hpp>
#include <attnrank/linalg/detail/modular.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

namespace attnrank {
namespace detail {

using Eigen::Index;

std::vector<Index> complement(const std::vector<Index>& chosen, Index n) {
  std::vector<char> taken(static_cast<std::size_t>(n), 0);
  for (Index c : chosen) taken[static_cast<std::size_t>(c)] = 1;
  std::vector<Index> rest;
  for (Index c = 0; c < n; ++c)
    if (!taken[static_cast<std::size_t>(c)]) rest.push_back(c);
  return rest;
}

Matrix<Integer> submatrix(const Matrix<Integer>& A, const std::vector<Index>& rows, const std::vector<Index>& cols) {
  Matrix<Integer> S(static_cast<Index>(rows.size()), static_cast<Index>(cols.size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols.size(); ++j) S(static_cast<Index>(i), static_cast<Index>(j)) = A(rows[i], cols[j]);
  return S;
}

/// True when A[row, pivots] * Xnum == D * A[row, free] for every listed row.
bool rows_satisfy(const Matrix<Integer>& A, const std::vector<Index>& rows, const std::vector<Index>& pivots,
                         const std::vector<Index>& free, const Matrix<Integer>& Xnum, const Integer& D) {
  Integer acc;
  mpz_ptr s = acc.backend().data();
  for (Index i : rows)
    for (std::size_t j = 0; j < free.size(); ++j) {
      mpz_mul(s, D.backend().data(), A(i, free[j]).backend().data());
      for (std::size_t t = 0; t < pivots.size(); ++t)
        mpz_submul(s, A(i, pivots[t]).backend().data(), Xnum(static_cast<Index>(t), static_cast<Index>(j)).backend().data());
      if (mpz_sgn(s) != 0) return false;
    }
  return true;
}

/// The kernel certificate: column j has D at free column j and -Xnum(:, j) at the
/// pivot columns.
Matrix<Integer> kernel_from_solution(Index n, const std::vector<Index>& pivots, const std::vector<Index>& free,
                                            const Matrix<Integer>& Xnum, const Integer& D) {
  Matrix<Integer> K = Matrix<Integer>::Zero(n, static_cast<Index>(free.size()));
  for (std::size_t j = 0; j < free.size(); ++j) {
    K(free[j], static_cast<Index>(j)) = D;
    for (std::size_t t = 0; t < pivots.size(); ++t) K(pivots[t], static_cast<Index>(j)) = -Xnum(static_cast<Index>(t), static_cast<Index>(j));
  }
  return K;
}

/// Rank by the fraction-free Gauss-Jordan form, whose pivot rows are d * RREF;
/// the kernel follows from them with integer entries.
ExactRank bareiss_integer_rank(const Matrix<Integer>& A) {
  IntegerRows M(A);
  const BareissResult b = bareiss(M, true);
  ExactRank out;
  out.method = "bareiss";
  out.rank = static_cast<Index>(b.pivot_cols.size());
  out.pivot_rows = b.pivot_rows;
  out.pivot_cols = b.pivot_cols;
  out.free_cols = complement(b.pivot_cols, A.cols());
  Matrix<Integer> Xnum(out.rank, static_cast<Index>(out.free_cols.size()));
  for (Index t = 0; t < out.rank; ++t)
    for (std::size_t j = 0; j < out.free_cols.size(); ++j) Xnum(t, static_cast<Index>(j)) = M.at(t, out.free_cols[j]);
  out.kernel = kernel_from_solution(A.cols(), out.pivot_cols, out.free_cols, Xnum, out.rank ? b.last_pivot : Integer(1));
  return out;
}

}  // namespace detail

Matrix<Integer> clear_row_denominators(const Matrix<Rational>& A, std::vector<Integer>* row_scale) {
  Matrix<Integer> Z(A.rows(), A.cols());
  if (row_scale) row_scale->assign(static_cast<std::size_t>(A.rows()), Integer(1));
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    Integer l{1};
    for (Eigen::Index j = 0; j < A.cols(); ++j) l = lcm(l, Integer(denominator(A(i, j))));
    for (Eigen::Index j = 0; j < A.cols(); ++j) Z(i, j) = numerator(A(i, j)) * (l / denominator(A(i, j)));
    if (row_scale) (*row_scale)[static_cast<std::size_t>(i)] = l;
  }
  return Z;
}

ExactRank exact_rank(const Matrix<Integer>& A) {
  using namespace detail;
  const Index m = A.rows(), n = A.cols();
  Index proven_lower = 0;
  PrimeSequence primes;
  for (int attempt = 0; attempt < 3 && m > 0 && n > 0; ++attempt) {
    const Modulus mod(primes.next());
    const ModEchelon e = echelon_mod(reduce_mod(A, mod), mod);
    const Index r = static_cast<Index>(e.pivot_cols.size());
    if (r < proven_lower) continue;
    proven_lower = r;
    ExactRank out;
    out.method = "modular";
    out.rank = r;
    out.pivot_rows = e.pivot_rows;
    out.pivot_cols = e.pivot_cols;
    out.free_cols = complement(e.pivot_cols, n);
    if (r == n) {
      out.kernel = Matrix<Integer>(n, 0);
      return out;
    }
    std::optional<DixonSolution> s;
    if (r == 0) {
      s = DixonSolution{Matrix<Integer>(0, n), Integer(1)};
    } else {
      s = dixon_solve(submatrix(A, e.pivot_rows, e.pivot_cols), submatrix(A, e.pivot_rows, out.free_cols));
      if (!s) break;  // entries too large for the fast path
    }
    // The pivot rows hold by construction (Dixon's proof); the others are checked.
    if (!rows_satisfy(A, complement(e.pivot_rows, m), e.pivot_cols, out.free_cols, s->numerators, s->denominator))
      continue;  // the rank over Q exceeds r: p divides every larger minor
    out.kernel = kernel_from_solution(n, e.pivot_cols, out.free_cols, s->numerators, s->denominator);
    return out;
  }
  return bareiss_integer_rank(A);
}

ExactRank exact_rank(const Matrix<Rational>& A) { return exact_rank(clear_row_denominators(A)); }

ExactRank exact_rank_by_elimination(const Matrix<Rational>& A) {
  return detail::bareiss_integer_rank(clear_row_denominators(A));
}

Integer exact_determinant_by_elimination(const Matrix<Integer>& A) {
  detail::require_square(A.rows(), A.cols());
  if (A.rows() == 0) return Integer(1);
  detail::IntegerRows M(A);
  const detail::BareissResult b = detail::bareiss(M, false);
  if (static_cast<Eigen::Index>(b.pivot_cols.size()) < A.rows()) return Integer(0);
  return b.sign < 0 ? Integer(-b.last_pivot) : b.last_pivot;
}

Integer exact_determinant(const Matrix<Integer>& A) {
  using namespace detail;
  detail::require_square(A.rows(), A.cols());
  const Index n = A.rows();
  if (n <= 12) return exact_determinant_by_elimination(A);
  // Hadamard: |det A| <= prod ||row_i||, and ||row_i||^2 < 2^b_i gives ||row_i|| < 2^(b_i / 2).
  double hadamard_bits = 0;
  Integer norm2, t;
  for (Index i = 0; i < n; ++i) {
    norm2 = 0;
    for (Index j = 0; j < n; ++j) mpz_addmul(norm2.backend().data(), A(i, j).backend().data(), A(i, j).backend().data());
    if (norm2 == 0) return Integer(0);
    hadamard_bits += 0.5 * static_cast<double>(mpz_sizeinbase(norm2.backend().data(), 2));
  }
  // CRT until the modulus exceeds 2 * 2^hadamard_bits.
  Integer value{0}, modulus{1};
  double modulus_bits = 0;
  PrimeSequence primes;
  while (modulus_bits <= hadamard_bits + 1) {
    const std::uint32_t p = primes.next();
    const Modulus mod(p);
    const double d = echelon_mod(reduce_mod(A, mod), mod).det;
    // value += modulus * ((d - value) * modulus^-1 mod p)
    const double v = static_cast<double>(mpz_fdiv_ui(value.backend().data(), p));
    const double mi = mod.inverse(static_cast<double>(mpz_fdiv_ui(modulus.backend().data(), p)));
    const double h = mod.mul(mod.reduce(d - v), mi);
    mpz_addmul_ui(value.backend().data(), modulus.backend().data(), static_cast<unsigned long>(h));
    modulus *= p;
    modulus_bits += std::floor(std::log2(static_cast<double>(p)));  // p >= 2^this
  }
  if (value > modulus / 2) value -= modulus;
  return value;
}

Rational exact_determinant(const Matrix<Rational>& A) {
  std::vector<Integer> scale;
  const Matrix<Integer> Z = clear_row_denominators(A, &scale);
  Integer den{1};
  for (const Integer& s : scale) den *= s;
  return Rational(exact_determinant(Z), den);
}

RowEchelonForm exact_reduced_row_echelon(const Matrix<Rational>& A) {
  detail::IntegerRows M(clear_row_denominators(A));
  const detail::BareissResult b = detail::bareiss(M, true);
  RowEchelonForm out{Matrix<Rational>::Zero(A.rows(), A.cols()), b.pivot_cols};
  for (Eigen::Index t = 0; t < static_cast<Eigen::Index>(b.pivot_cols.size()); ++t)
    for (Eigen::Index j = 0; j < A.cols(); ++j) out.R(t, j) = Rational(M.at(t, j), b.last_pivot);
  return out;
}

Matrix<Rational> exact_kernel_basis(const Matrix<Rational>& A) {
  const RowEchelonForm e = exact_reduced_row_echelon(A);
  const std::vector<Eigen::Index> free = detail::complement(e.pivot_cols, A.cols());
  Matrix<Rational> K = Matrix<Rational>::Zero(A.cols(), static_cast<Eigen::Index>(free.size()));
  for (std::size_t j = 0; j < free.size(); ++j) {
    K(free[j], static_cast<Eigen::Index>(j)) = 1;
    for (std::size_t t = 0; t < e.pivot_cols.size(); ++t)
      K(e.pivot_cols[t], static_cast<Eigen::Index>(j)) = -e.R(static_cast<Eigen::Index>(t), free[j]);
  }
  return K;
}

bool check_exact_rank(const Matrix<Rational>& A, const ExactRank& res) {
  using detail::Index;
  const Index n = A.cols(), r = res.rank;
  if (r < 0 || r > std::min(A.rows(), n) || static_cast<Index>(res.pivot_rows.size()) != r ||
      static_cast<Index>(res.pivot_cols.size()) != r || static_cast<Index>(res.free_cols.size()) != n - r ||
      res.kernel.rows() != n || res.kernel.cols() != n - r)
    return false;
  for (Index i : res.pivot_rows)
    if (i < 0 || i >= A.rows()) return false;
  for (Index j : res.pivot_cols)
    if (j < 0 || j >= n) return false;
  Matrix<Rational> minor(r, r);
  for (Index i = 0; i < r; ++i)
    for (Index j = 0; j < r; ++j) minor(i, j) = A(res.pivot_rows[static_cast<std::size_t>(i)], res.pivot_cols[static_cast<std::size_t>(j)]);
  if (r > 0 && exact_determinant_by_elimination(clear_row_denominators(minor)) == 0) return false;
  if (n - r == 0) return true;
  // Independence: the free-column rows of the kernel are d * I with d != 0.
  const Integer d = res.kernel(res.free_cols[0], 0);
  if (d == 0) return false;
  for (std::size_t s = 0; s < res.free_cols.size(); ++s)
    for (Index j = 0; j < n - r; ++j)
      if (res.kernel(res.free_cols[s], j) != (j == static_cast<Index>(s) ? d : Integer(0))) return false;
  const Matrix<Rational> K = res.kernel.unaryExpr([](const Integer& z) { return Rational(z); });
  const Matrix<Rational> AK = A * K;
  for (Index i = 0; i < AK.rows(); ++i)
    for (Index j = 0; j < AK.cols(); ++j)
      if (AK(i, j) != 0) return false;
  return true;
}

}  // namespace attnrank
