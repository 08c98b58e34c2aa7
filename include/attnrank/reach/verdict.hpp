#pragma once
// What every reachability question answers with (free, masked, on embeddings,
// approximate): a verdict that is proven or says it is not, and a witness head
// whose error is certified.
//
// Guarantee: `reachable` and `unreachable` are only ever set with a proof behind
// them (each question's header says which); a Witness's max_abs_error is a
// certified upper bound for exactly the Q, K it holds (or Q_exact, K_exact).

#include <attnrank/numbers/tiers.hpp>

#include <Eigen/Core>

namespace attnrank {

enum class Verdict { reachable, unreachable, undecided };

inline const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::reachable: return "reachable";
    case Verdict::unreachable: return "unreachable";
    default: return "undecided";
  }
}

struct Witness {
  Eigen::MatrixXd Q, K;        ///< n x d_k; scores Q K^T / sqrt(d_k)
  double max_abs_error = 0;    ///< certified: max |softmax(Q K^T / sqrt(d_k)) - Â| <= this
  /// With bits > 53 (and n <= high_precision_witness_size): the witness computed
  /// in MPFR, as the exact dyadic rationals it holds; Q and K above are then
  /// only its doubles, and max_abs_error is certified for these exact values.
  Matrix<Rational> Q_exact, K_exact;
  unsigned bits = 53;
  /// The MPFI precision max_abs_error was computed at (a checker recomputes it there).
  unsigned error_bits = 64;
};

}  // namespace attnrank
