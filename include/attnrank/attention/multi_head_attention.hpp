#pragma once
// The multi-head attention layer (Vaswani et al., Section 3.2.2; the tutorial's
// Section 2.2), with every intermediate kept in a trace.
//
//   Q = X W^Q, K = X W^K, V = X W^V                 one full-width projection each
//   Q_i, K_i = columns (i-1) d_k + 1 .. i d_k        "dealt" to head i (Section 2.2.1)
//   V_i      = columns (i-1) d_v + 1 .. i d_v
//   A_i = softmax(Q_i K_i^T / sqrt(d_k)),  Z_i = A_i V_i
//   output = Concat(Z_1, ..., Z_h) W^O
//
// With masks (attention/mask.hpp; one shared by every head, or one per head)
// the masked scaled scores are minus infinity: A_i is exactly 0 there and each
// row is normalised over its allowed keys (softmax_rows(S, mask)).
//
// Two scalars: the linear part (projections, slices, raw scores Q_i K_i^T) runs in
// tier L; from the division by sqrt(d_k) on, in tier N. With L = Rational and
// N = Interval the linear part is exact and the rest certified (the "exact path");
// otherwise L = N.

#include <attnrank/error.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/attention/softmax.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

/// Sizes of a layer. d_k and d_v are per head; W^Q, W^K are d_model x h d_k,
/// W^V is d_model x h d_v, W^O is h d_v x d_model.
struct AttentionShape {
  Eigen::Index d_model = 0, heads = 0, d_k = 0, d_v = 0;

  /// The paper's shape: d_k = d_v = d_model / h (Equation 2-3), unless given.
  /// Throws input_error when a size is not positive, or when d_k or d_v is
  /// defaulted and h does not divide d_model.
  static AttentionShape make(Eigen::Index d_model, Eigen::Index heads,
                             std::optional<Eigen::Index> d_k = std::nullopt,
                             std::optional<Eigen::Index> d_v = std::nullopt);

  /// Number of weights: 2 d_model h d_k + d_model h d_v + h d_v d_model. With
  /// d_k = d_v = d_model / h this is 4 d_model^2 whatever h is (Section 2.1).
  Eigen::Index parameter_count() const { return 2 * d_model * heads * d_k + 2 * d_model * heads * d_v; }
};

/// Every intermediate of one forward pass.
template <class L, class N = L>
struct LayerTrace {
  struct Head {
    Matrix<L> Q, K, V;   ///< this head's column slices
    Matrix<L> scores;    ///< Q_i K_i^T (exact when L is exact)
    Matrix<N> scaled;    ///< Q_i K_i^T / sqrt(d_k); where `mask` forbids, the score is -inf (the entry keeps the finite value, which softmax does not read)
    Matrix<N> A;         ///< softmax of the scaled scores, row-wise
    Matrix<N> Z;         ///< A_i V_i
    std::optional<Mask> mask;  ///< this head's mask, if any
  };
  AttentionShape shape;
  Matrix<L> Q, K, V;     ///< full-width projections
  std::vector<Head> heads;
  Matrix<N> concat;      ///< Concat(Z_1, ..., Z_h), n x h d_v
  Matrix<N> output;      ///< concat W^O, n x d_model
};

/// Columns of head `head` (0-based) when M's columns are dealt in blocks of `width`.
template <class T>
Matrix<T> head_slice(const Matrix<T>& M, Eigen::Index head, Eigen::Index width) {
  return M.middleCols(head * width, width);
}

template <class T>
class MultiHeadAttention {
 public:
  /// Takes the four weight matrices and the head count; d_k and d_v are read off
  /// the shapes (cols(W^Q) / h and cols(W^V) / h). Throws input_error naming the
  /// matrix and both sizes when the shapes do not fit together.
  MultiHeadAttention(Matrix<T> w_q, Matrix<T> w_k, Matrix<T> w_v, Matrix<T> w_o, Eigen::Index heads);

  const AttentionShape& shape() const { return shape_; }
  const Matrix<T>& w_q() const { return w_q_; }
  const Matrix<T>& w_k() const { return w_k_; }
  const Matrix<T>& w_v() const { return w_v_; }
  const Matrix<T>& w_o() const { return w_o_; }

  /// The forward pass on X (n x d_model, n >= 1) with the trace of every step.
  /// The linear part runs in T, the rest in N (N = T, or T = Rational with N a
  /// floating or interval tier). With N = Interval every entry of the trace
  /// encloses the exact real value for the given X and weights.
  /// Throws input_error when X has the wrong width, no rows or a non-finite entry.
  template <class N = T>
  LayerTrace<T, N> forward(const Matrix<T>& X) const;

  /// The same with masks: none (empty), one for every head, or one per head
  /// (masks[i] for head i), each n x n for n = rows(X). Throws input_error on
  /// another count of masks or a mask of the wrong size.
  template <class N = T>
  LayerTrace<T, N> forward(const Matrix<T>& X, const std::vector<Mask>& masks) const;

 private:
  Matrix<T> w_q_, w_k_, w_v_, w_o_;
  AttentionShape shape_;
};

/// The same layer with its exact weights moved to tier T (from_rational: to
/// nearest for floating tiers, enclosing for Interval).
template <class T>
MultiHeadAttention<T> layer_in_tier(const MultiHeadAttention<Rational>& layer) {
  return MultiHeadAttention<T>(to_tier<T>(layer.w_q()), to_tier<T>(layer.w_k()), to_tier<T>(layer.w_v()),
                               to_tier<T>(layer.w_o()), layer.shape().heads);
}

}  // namespace attnrank

#include <attnrank/attention/detail/multi_head_attention_impl.hpp>
