#pragma once
// Exact solution of B X = C for integer matrices by p-adic (Dixon) lifting.
//
// With B^-1 mod p known, the lifting computes integer matrices X_k, R_k with
//     B X_k = C - p^k R_k        (exactly, by construction)
// one p-adic digit per step, using only double GEMMs on exact small integers.
// Rational reconstruction then proposes Xnum and D > 0 with Xnum = D X_k mod p^k,
// hence B Xnum = D C mod p^k. The proposal is accepted only if
//     r * max|B| * max|Xnum| + D * max|C| < p^k,
// which makes the integer matrix B Xnum - D C, divisible by p^k and smaller than
// p^k, exactly zero. So a returned solution is proven, not probable; when the
// proof does not go through the solver lifts further, and it gives up (returns
// nothing, and the caller falls back to fraction-free elimination) only at
// Hadamard's bound or when the entries are too large for exact doubles.

#include <attnrank/linalg/detail/modular.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <cmath>
#include <optional>

namespace attnrank::detail {

struct DixonSolution {
  Matrix<Integer> numerators;  ///< Xnum, r x k
  Integer denominator;         ///< D > 0, with B * Xnum == D * C exactly
};

/// floor(sqrt(x / 2)) for x >= 0.
inline Integer half_sqrt(const Integer& x) {
  Integer r;
  mpz_fdiv_q_2exp(r.backend().data(), x.backend().data(), 1);
  mpz_sqrt(r.backend().data(), r.backend().data());
  return r;
}

/// n/d with n = d u mod m, |n| <= sqrt(m/2), 0 < d <= sqrt(m/2); false if none.
inline bool rational_reconstruction(const Integer& u, const Integer& m, Integer& num, Integer& den) {
  const Integer bound = half_sqrt(m);
  Integer r0 = m, r1 = u % m, t0 = 0, t1 = 1, q, tmp;
  if (r1 < 0) r1 += m;
  while (r1 > bound) {
    q = r0 / r1;
    tmp = r0 - q * r1;
    r0 = r1;
    r1 = tmp;
    tmp = t0 - q * t1;
    t0 = t1;
    t1 = tmp;
  }
  if (t1 == 0 || abs(t1) > bound) return false;
  num = t1 < 0 ? Integer(-r1) : r1;
  den = abs(t1);
  Integer g = gcd(num, den);
  return g == 1;
}

/// Largest |entry| of an integer matrix as a double, or +inf when it does not fit
/// in 2^52 (then the double kernels below are not exact and are not used).
inline double max_abs_exact(const Matrix<Integer>& A) {
  double m = 0;
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      mpz_srcptr z = A(i, j).backend().data();
      if (mpz_sizeinbase(z, 2) > 52) return INFINITY;
      m = std::max(m, std::fabs(mpz_get_d(z)));
    }
  return m;
}

/// Solves B X = C (B square and nonsingular over Q). Returns nothing when the
/// entries are too large for the exact double kernels, when B is singular, or when
/// Hadamard's bound is reached without a proof.
inline std::optional<DixonSolution> dixon_solve(const Matrix<Integer>& B, const Matrix<Integer>& C) {
  using Eigen::Index;
  const Index r = B.rows(), k = C.cols();
  const double max_b = max_abs_exact(B), max_c = max_abs_exact(C);
  if (!std::isfinite(max_b) || !std::isfinite(max_c) || r == 0) return std::nullopt;
  // Exactness: |R| <= m0 throughout, |R - B x| <= m0 p, and Binv (R mod p) <= r p^2.
  const double m0 = std::max({max_c, static_cast<double>(r) * max_b, 1.0});
  const double limit = std::min({std::ldexp(1.0, 21), std::sqrt(std::ldexp(1.0, 52) / static_cast<double>(r)),
                                 std::ldexp(1.0, 52) / m0});
  if (limit < 256) return std::nullopt;

  const Eigen::MatrixXd Bd = B.unaryExpr([](const Integer& z) { return mpz_get_d(z.backend().data()); });
  Eigen::MatrixXd R = C.unaryExpr([](const Integer& z) { return mpz_get_d(z.backend().data()); });

  std::uint32_t prime = static_cast<std::uint32_t>(limit);
  ModMatrix binv(0, 0);
  std::optional<Modulus> mod;
  for (int tries = 0; tries < 8 && !mod; ++tries) {
    prime = prime_below(prime);
    Modulus m(prime);
    ModMatrix bm(r, r);
    for (Index i = 0; i < r; ++i)
      for (Index j = 0; j < r; ++j) bm(i, j) = m.reduce(Bd(i, j));
    if (inverse_mod(bm, m, binv)) mod = m;
  }
  if (!mod) return std::nullopt;
  const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> Binv(binv.a.data(), r, r);

  // Stop lifting at Hadamard's bound on numerators and denominators (Cramer's
  // rule), squared for reconstruction, plus slack.
  double hadamard_bits = 2;
  for (Index i = 0; i < r; ++i) hadamard_bits += 0.5 * std::log2(Bd.row(i).squaredNorm() + R.row(i).squaredNorm() + 1) + 1e-6;
  const double max_bits = 2 * hadamard_bits + 64;

  Matrix<Integer> X = Matrix<Integer>::Zero(r, k);
  Eigen::Matrix<std::uint64_t, Eigen::Dynamic, Eigen::Dynamic> chunk = decltype(chunk)::Zero(r, k);
  Integer pk{1};  // p^(digits folded into X)
  const double p = mod->p;
  const unsigned long p3 = static_cast<unsigned long>(p) * static_cast<unsigned long>(p) * static_cast<unsigned long>(p);
  double next_attempt_bits = 64, bits = 0;
  Eigen::MatrixXd x(r, k), T(r, k);
  for (int step = 0;; ++step) {
    const Eigen::MatrixXd Rm = R.unaryExpr([&](double v) { return mod->reduce(v); });
    x.noalias() = Binv * Rm;
    x = x.unaryExpr([&](double v) { return mod->reduce(v); });
    T = R;
    T.noalias() -= Bd * x;
    R = T / p;
    if ((R * p).cwiseNotEqual(T).any()) return std::nullopt;  // B^-1 mod p was wrong: never trust it
    const unsigned long scale = step % 3 == 0 ? 1ul : step % 3 == 1 ? static_cast<unsigned long>(p)
                                                                     : static_cast<unsigned long>(p * p);
    for (Index j = 0; j < k; ++j)
      for (Index i = 0; i < r; ++i) chunk(i, j) += static_cast<std::uint64_t>(x(i, j)) * scale;
    bits += std::log2(p);
    if (step % 3 != 2) continue;

    for (Index j = 0; j < k; ++j)
      for (Index i = 0; i < r; ++i) {
        mpz_addmul_ui(X(i, j).backend().data(), pk.backend().data(), chunk(i, j));
        chunk(i, j) = 0;
      }
    pk *= p3;
    if (bits < next_attempt_bits && bits < max_bits) continue;
    next_attempt_bits = bits * 1.25;

    // Reconstruct with a common denominator, found from the few entries whose
    // scaled residue is not already small.
    Integer D{1}, y, num, den;
    const Integer half = pk / 2, small = half_sqrt(pk);
    bool ok = true;
    Matrix<Integer> Xnum(r, k);
    for (Index j = 0; j < k && ok; ++j)
      for (Index i = 0; i < r && ok; ++i) {
        y = (D * X(i, j)) % pk;
        if (y > half) y -= pk;
        if (abs(y) > small) {
          if (!rational_reconstruction(X(i, j), pk, num, den)) {
            ok = false;
            break;
          }
          D = lcm(D, den);
          y = (D * X(i, j)) % pk;
          if (y > half) y -= pk;
        }
        Xnum(i, j) = y;
      }
    if (ok) {
      // Entries reconstructed before D last grew were scaled by an older D.
      for (Index j = 0; j < k; ++j)
        for (Index i = 0; i < r; ++i) {
          y = (D * X(i, j)) % pk;
          if (y > half) y -= pk;
          Xnum(i, j) = y;
        }
      Integer max_x{0};
      for (Index j = 0; j < k; ++j)
        for (Index i = 0; i < r; ++i)
          if (abs(Xnum(i, j)) > max_x) max_x = abs(Xnum(i, j));
      const Integer bound = Integer(r) * Integer(max_b) * max_x + D * Integer(max_c);
      if (bound < pk) return DixonSolution{std::move(Xnum), std::move(D)};
    }
    if (bits >= max_bits) return std::nullopt;
  }
}

}  // namespace attnrank::detail
