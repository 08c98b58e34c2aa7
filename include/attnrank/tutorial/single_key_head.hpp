#pragma once
// The d_k = 1 head of Section 2.5.4: scores q k_j for a scalar query q and keys k.
// softmax is increasing in the score, so the top-weighted token of the row is the
// argmax of q k: argmax k when q > 0, argmin k when q < 0, and no single token at
// q = 0 (the row is flat). Over all q, only argmax k and argmin k can ever win:
// the middle token of (2, 0, 1) -- "LLMs" -- never gets the top weight.
//
// Under a causal mask the query at position p sees keys 1..p only, so its top
// token is the argmax or argmin of that prefix. Over every position and every q,
// token j can take the top weight iff k_j is a (weak) running record,
// k_j >= max(k_1..k_(j-1)) or k_j <= min(k_1..k_(j-1)), and not every key is
// equal: the prefix's maximum only grows with p, so a token that tops some
// longer prefix tops its own (docs/reach.md, "The d_k = 1 head").

#include <attnrank/error.hpp>
#include <attnrank/numbers/scalar_traits.hpp>
#include <attnrank/attention/softmax.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <algorithm>
#include <optional>
#include <vector>

namespace attnrank {

/// Tokens (0-based) sharing the top weight of softmax(q k); empty when q = 0 or
/// all keys are equal (a flat row has no winner).
inline std::vector<Eigen::Index> top_tokens(const std::vector<Rational>& keys, const Rational& q) {
  std::vector<Eigen::Index> top;
  if (keys.empty() || q == 0) return top;
  Rational best = q * keys[0];
  for (const Rational& k : keys) best = std::max(best, Rational(q * k));
  bool all_equal = true;
  for (const Rational& k : keys) all_equal = all_equal && k == keys[0];
  if (all_equal) return top;
  for (std::size_t j = 0; j < keys.size(); ++j)
    if (q * keys[j] == best) top.push_back(static_cast<Eigen::Index>(j));
  return top;
}

/// Every token that takes the top weight for some q: the argmax and argmin sets.
inline std::vector<Eigen::Index> possible_winners(const std::vector<Rational>& keys) {
  std::vector<Eigen::Index> w = top_tokens(keys, Rational(1));
  for (Eigen::Index j : top_tokens(keys, Rational(-1)))
    if (std::find(w.begin(), w.end(), j) == w.end()) w.push_back(j);
  std::sort(w.begin(), w.end());
  return w;
}

/// The causal version: tokens (0-based) taking the top weight somewhere, for
/// some query position p (keys 1..p) and some q. See the header comment.
inline std::vector<Eigen::Index> causal_possible_winners(const std::vector<Rational>& keys) {
  std::vector<Eigen::Index> w;
  if (std::all_of(keys.begin(), keys.end(), [&](const Rational& k) { return k == keys[0]; })) return w;
  Rational top = keys[0], bottom = keys[0];
  for (std::size_t j = 0; j < keys.size(); ++j) {
    if (keys[j] >= top || keys[j] <= bottom) w.push_back(static_cast<Eigen::Index>(j));
    top = std::max(top, keys[j]);
    bottom = std::min(bottom, keys[j]);
  }
  return w;
}

/// Rows softmax(q k) for each q, in MPFI at the current precision (each row
/// contains the exact weights).
/// With `position` p (1 <= p <= keys.size()) under a causal mask the query sees
/// keys 1..p only: the others get exactly 0 (p = keys.size(): no mask).
inline Matrix<Interval> certified_single_key_sweep(const std::vector<Rational>& keys, const std::vector<Rational>& queries,
                                                   std::optional<Eigen::Index> position = std::nullopt) {
  Matrix<Interval> S(static_cast<Eigen::Index>(queries.size()), static_cast<Eigen::Index>(keys.size()));
  for (std::size_t r = 0; r < queries.size(); ++r)
    for (std::size_t j = 0; j < keys.size(); ++j)
      S(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j)) =
          scalar_traits<Interval>::from_rational(Rational(queries[r] * keys[j]));
  if (!position) return softmax_rows(S);
  const auto n = static_cast<Eigen::Index>(keys.size());
  if (*position < 1 || *position > n)
    throw input_error("query position " + std::to_string(*position) + " is outside 1.." + std::to_string(n));
  // A masked key's score is -inf: softmax over the prefix, exact zeros after it.
  Matrix<Interval> W = softmax_rows(S.leftCols(*position).eval());
  Matrix<Interval> out(S.rows(), n);
  for (Eigen::Index r = 0; r < S.rows(); ++r)
    for (Eigen::Index j = 0; j < n; ++j) out(r, j) = j < *position ? W(r, j) : Interval(0);
  return out;
}

/// The row softmax(q k) for a real query q given as an interval (1 x n, in MPFI
/// at the current precision): contains the weights for every q in the interval.
inline Matrix<Interval> single_key_weights(const std::vector<Rational>& keys, const Interval& q) {
  Matrix<Interval> S(1, static_cast<Eigen::Index>(keys.size()));
  for (std::size_t j = 0; j < keys.size(); ++j)
    S(0, static_cast<Eigen::Index>(j)) = Interval(q * scalar_traits<Interval>::from_rational(keys[j]));
  return softmax_rows(S);
}

}  // namespace attnrank
