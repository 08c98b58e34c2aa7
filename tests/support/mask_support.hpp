#pragma once
// Targets and masks for the masked-reachability tests: targets a masked head of
// known width makes, generic causal targets, and every kind of mask (nested and not).

#include "support.hpp"

#include <attnrank/attention/mask.hpp>

#include <algorithm>
#include <random>
#include <vector>

namespace attnrank::test {

/// 2^M on the allowed set, 0 elsewhere (rows not normalised: softmax does that).
inline Matrix<Rational> masked_power_target(const Matrix<Integer>& M, const Mask& mask) {
  Matrix<Rational> A(M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) {
      const long k = M(i, j).convert_to<long>();
      A(i, j) = !mask.allows(i, j) ? Rational(0)
                : k >= 0           ? Rational(Integer(1) << k)
                                   : Rational(Integer(1), Integer(1) << -k);
    }
  return A;
}

/// U V^T for n x r integer factors with entries in [-2, 2].
inline Matrix<Integer> gen_low_rank_exponents(Eigen::Index n, Eigen::Index r) {
  Matrix<Integer> U(n, r), V(n, r);
  for (auto& x : U.reshaped()) x = *rc::gen::inRange(-2, 3);
  for (auto& x : V.reshaped()) x = *rc::gen::inRange(-2, 3);
  return U * V.transpose();
}

/// A generic causal target: 17-digit decimals of a softmax of random scores,
/// as a user's file holds them.
inline Matrix<Rational> generic_causal_target(Eigen::Index n, std::mt19937_64& rng) {
  std::uniform_int_distribution<long> digits(1, 99999999999999999L);
  Matrix<Rational> A(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) A(i, j) = j <= i ? Rational(digits(rng), 100000000000000000L) : Rational(0);
  return A;
}

/// Mask kinds: causal, prefix-LM (a bidirectional prefix of p tokens, causal
/// after), a row-and-column permuted nested mask, sliding window (not nested),
/// random with a key in every row.
inline Mask gen_any_mask(Eigen::Index n) {
  const int kind = *rc::gen::inRange(0, 5);
  Matrix<Rational> M = Matrix<Rational>::Zero(n, n);
  if (kind == 0) return Mask::causal(n);
  const Eigen::Index p = *rc::gen::inRange<Eigen::Index>(1, n + 1), w = *rc::gen::inRange<Eigen::Index>(1, n + 1);
  std::vector<Eigen::Index> perm_rows(static_cast<std::size_t>(n)), perm_cols(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) perm_rows[static_cast<std::size_t>(i)] = perm_cols[static_cast<std::size_t>(i)] = i;
  if (kind == 2) {
    std::mt19937 shuffle(static_cast<unsigned>(*rc::gen::arbitrary<unsigned>()));
    std::shuffle(perm_rows.begin(), perm_rows.end(), shuffle);
    std::shuffle(perm_cols.begin(), perm_cols.end(), shuffle);
  }
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      bool allowed = false;
      if (kind == 1 || kind == 2) allowed = j <= std::max(i, p - 1);
      if (kind == 3) allowed = j <= i && i - j < w;
      if (kind == 4) allowed = *rc::gen::inRange(0, 3) > 0 || j == i;
      M(perm_rows[static_cast<std::size_t>(i)], perm_cols[static_cast<std::size_t>(j)]) = allowed ? 1 : 0;
    }
  return Mask::from_matrix(M, "generated");
}


}  // namespace attnrank::test
