#pragma once
// Exact structure of log A for a target of positive rationals.
//
// Every positive rational is a product of integer powers of a coprime base
// {q_1, ..., q_m} (pairwise coprime integers > 1, found by gcd refinement of the
// numerators and denominators -- no factoring needed), so
//     log A = sum_t log(q_t) E_t      with integer exponent matrices E_t.
// Pairwise coprime integers > 1 are multiplicatively independent, so their logs
// are linearly independent over Q. Hence for a rational vector v:
//     log(A) C v = 0   iff   E_t C v = 0 for every t,
// and the rational kernel vectors common to all E_t C are exact proofs that
// log(A) C has a kernel: floor = rank(log(A) C) <= n - dim(common kernel) =
// rank of the stacked matrix [n E_1 C; ...; n E_m C]. (The real kernel can be
// larger than the span of rational vectors, so this bound need not be tight.)

#include <attnrank/error.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace attnrank {

/// log A = sum_t log(bases[t]) * exponents[t], exactly.
struct LogDecomposition {
  std::vector<Integer> bases;             ///< pairwise coprime, > 1
  std::vector<Matrix<Integer>> exponents;  ///< one n x n integer matrix per base
};

/// Limits that keep the exact step from running away on huge inputs.
struct DecompositionLimits {
  std::size_t max_distinct_values = 4096;  ///< distinct numerators/denominators > 1
  std::size_t max_bits = 4096;             ///< bits of any numerator or denominator
  std::size_t max_bases = 512;
};

/// The decomposition of log A for a matrix of positive rationals, or nothing when
/// the limits are exceeded (the caller then has no exact upper bound).
std::optional<LogDecomposition> decompose_log(const Matrix<Rational>& A, const DecompositionLimits& limits = {});
/// The same for the entries where counted(i, j), the others taken as 1 (every
/// exponent 0), without copying A: a masked target's logs on its allowed set.
template <class Counted>
std::optional<LogDecomposition> decompose_log_where(const Matrix<Rational>& A, const DecompositionLimits& limits,
                                                    const Counted& counted);

/// The exponents of the positive integer x over the bases, or nothing when x has
/// a factor outside them. Used by certificate checkers to rebuild E_t on their own.
std::optional<std::vector<long>> exponents_over(Integer x, const std::vector<Integer>& bases);

/// The stacked integer matrix [n E_1 C; ...; n E_m C] (n C = n I - 1 1^T keeps it
/// integral); its exact rank is the upper bound on rank(log(A) C), and its
/// kernel the proof.
Matrix<Integer> stacked_centered_exponents(const LogDecomposition& d);

/// The exact rank and kernel of stacked_centered_exponents(d) for a target with
/// `cols` columns. With no bases (every entry is 1, so log A = 0) the stack has
/// no rows: rank 0, and the kernel is the identity.
ExactRank centered_exponents_rank(const LogDecomposition& d, Eigen::Index cols);

namespace detail {

/// Classical factor refinement into pairwise coprime factors: whenever a value and
/// a base element differ and share g = gcd > 1, both are replaced by g, a / g and
/// b / g (ones dropped). The product of all values held falls from a b to a b / g
/// at each step, so the loop ends; every input is a product of powers of the result.
inline std::vector<Integer> coprime_base(std::vector<Integer> values, std::size_t max_bases) {
  std::vector<Integer> base;
  while (!values.empty()) {
    Integer x = values.back();
    values.pop_back();
    if (x <= 1) continue;
    bool split = false;
    for (std::size_t i = 0; i < base.size(); ++i) {
      if (base[i] == x) {
        split = true;  // already present
        break;
      }
      const Integer g = gcd(base[i], x);
      if (g > 1) {
        const Integer b = base[i];
        base.erase(base.begin() + static_cast<std::ptrdiff_t>(i));
        values.push_back(g);
        values.push_back(Integer(b / g));
        values.push_back(Integer(x / g));
        split = true;
        break;
      }
    }
    if (!split) base.push_back(x);
    if (base.size() > max_bases) return {};
  }
  std::sort(base.begin(), base.end());
  return base;
}

}  // namespace detail

inline std::optional<std::vector<long>> exponents_over(Integer x, const std::vector<Integer>& bases) {
  std::vector<long> e(bases.size(), 0);
  if (x <= 0) return std::nullopt;
  for (std::size_t t = 0; t < bases.size() && x > 1; ++t) {
    if (bases[t] <= 1) return std::nullopt;
    while (x % bases[t] == 0) {
      x /= bases[t];
      ++e[t];
    }
  }
  if (x != 1) return std::nullopt;
  return e;
}

inline std::optional<LogDecomposition> decompose_log(const Matrix<Rational>& A, const DecompositionLimits& limits) {
  return decompose_log_where(A, limits, [](Eigen::Index, Eigen::Index) { return true; });
}

template <class Counted>
std::optional<LogDecomposition> decompose_log_where(const Matrix<Rational>& A, const DecompositionLimits& limits,
                                                    const Counted& counted) {
  // Distinct values kept sorted as they come: a target of doubles exceeds the
  // limit within its first few thousand entries, not after sorting a million.
  std::set<Integer> distinct;
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      if (!counted(i, j)) continue;
      if (A(i, j) <= 0)
        throw input_error("log of a non-positive entry, " + entry_text("the target", static_cast<long>(i), static_cast<long>(j)),
                          "", static_cast<long>(i + 1), static_cast<long>(j + 1));
      for (const Integer& v : {Integer(numerator(A(i, j))), Integer(denominator(A(i, j)))}) {
        if (v <= 1) continue;
        if (mpz_sizeinbase(v.backend().data(), 2) > limits.max_bits) return std::nullopt;
        distinct.insert(v);
        if (distinct.size() > limits.max_distinct_values) return std::nullopt;
      }
    }
  const std::vector<Integer> values(distinct.begin(), distinct.end());
  LogDecomposition d;
  d.bases = detail::coprime_base(values, limits.max_bases);
  if (d.bases.empty() && !values.empty()) return std::nullopt;
  d.exponents.assign(d.bases.size(), Matrix<Integer>::Zero(A.rows(), A.cols()));
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      if (!counted(i, j)) continue;  // 1 = every base to the power 0
      const auto up = exponents_over(numerator(A(i, j)), d.bases);
      const auto down = exponents_over(denominator(A(i, j)), d.bases);
      if (!up || !down) return std::nullopt;  // cannot happen for a true coprime base
      for (std::size_t t = 0; t < d.bases.size(); ++t) d.exponents[t](i, j) = (*up)[t] - (*down)[t];
    }
  return d;
}

inline Matrix<Integer> stacked_centered_exponents(const LogDecomposition& d) {
  const Eigen::Index n = d.exponents.empty() ? 0 : d.exponents[0].cols();
  const Eigen::Index m = d.exponents.empty() ? 0 : d.exponents[0].rows();
  Matrix<Integer> S(static_cast<Eigen::Index>(d.exponents.size()) * m, n);
  for (std::size_t t = 0; t < d.exponents.size(); ++t) {
    const Matrix<Integer>& E = d.exponents[t];
    for (Eigen::Index i = 0; i < m; ++i) {
      Integer row_sum{0};
      for (Eigen::Index j = 0; j < n; ++j) row_sum += E(i, j);
      for (Eigen::Index j = 0; j < n; ++j) S(static_cast<Eigen::Index>(t) * m + i, j) = E(i, j) * n - row_sum;
    }
  }
  return S;
}

inline ExactRank centered_exponents_rank(const LogDecomposition& d, Eigen::Index cols) {
  if (d.bases.empty()) {
    ExactRank r;
    r.method = "log A = 0";
    r.kernel = Matrix<Integer>::Identity(cols, cols);
    for (Eigen::Index j = 0; j < cols; ++j) r.free_cols.push_back(j);
    return r;
  }
  return exact_rank(stacked_centered_exponents(d));
}

}  // namespace attnrank
