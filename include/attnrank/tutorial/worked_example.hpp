#pragma once
// The tutorial's worked example (Section 2.2.2): three tokens "I love LLMs",
// d_model = 4, h = 2, from "Multi-Head Attention" by Hao Ma (haoma7.github.io),
// whose page lost some of them; restored here, they are exact integers.

#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/io/parse.hpp>

namespace attnrank::worked_example {

inline const char* const tokens[] = {"I", "love", "LLMs"};
inline constexpr Eigen::Index heads = 2;

inline Matrix<Rational> X() { return parse_matrix("0,0,1,1\n0,1,0,1\n1,0,0,1", "worked example X"); }
inline Matrix<Rational> W_Q() { return parse_matrix("0,-1,1,1\n0,1,0,0\n1,0,0,-1\n1,1,0,1", "worked example W^Q"); }
inline Matrix<Rational> W_K() { return parse_matrix("0,-1,0,1\n-1,1,0,0\n1,-1,1,-1\n1,1,0,1", "worked example W^K"); }
inline Matrix<Rational> W_V() { return parse_matrix("0,0,1,0\n1,0,0,1\n0,1,0,0\n1,0,0,0", "worked example W^V"); }
inline Matrix<Rational> W_O() { return parse_matrix("0,0,1,1\n1,1,0,0\n0,1,-1,1\n1,0,0,0", "worked example W^O"); }

/// The layer of Section 2.2.2 in tier T (exact for T = Rational).
template <class T = Rational>
MultiHeadAttention<T> layer() {
  return MultiHeadAttention<T>(to_tier<T>(W_Q()), to_tier<T>(W_K()), to_tier<T>(W_V()),
                               to_tier<T>(W_O()), heads);
}

}  // namespace attnrank::worked_example
