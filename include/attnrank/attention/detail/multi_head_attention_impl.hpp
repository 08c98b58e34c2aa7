#pragma once
// Bodies for attnrank/attention/multi_head_attention.hpp.

namespace attnrank {
namespace detail {

inline std::string shape_text(Eigen::Index r, Eigen::Index c) {
  return std::to_string(r) + " x " + std::to_string(c);
}

template <class T>
void require_finite(const Matrix<T>& m, const char* name) {
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (!scalar_traits<T>::is_finite(m(i, j)))
        throw input_error(entry_text(name, static_cast<long>(i), static_cast<long>(j)) + " is not finite",
                          name, static_cast<long>(i + 1), static_cast<long>(j + 1));
}

/// The checks of forward on the embeddings X: at least one row, d_model columns,
/// finite entries.
template <class T>
void require_embeddings(const Matrix<T>& X, const AttentionShape& shape) {
  if (X.rows() < 1) throw input_error("X has no rows (a sentence needs at least one token)", "X");
  if (X.cols() != shape.d_model)
    throw input_error("X is " + shape_text(X.rows(), X.cols()) + " but the weights expect d_model = " +
                      std::to_string(shape.d_model) + " columns", "X");
  require_finite(X, "X");
}

}  // namespace detail

inline AttentionShape AttentionShape::make(Eigen::Index d_model, Eigen::Index heads,
                                           std::optional<Eigen::Index> d_k, std::optional<Eigen::Index> d_v) {
  if (d_model < 1) throw input_error("d_model must be at least 1 (got " + std::to_string(d_model) + ")");
  if (heads < 1) throw input_error("the number of heads h must be at least 1 (got " + std::to_string(heads) + ")");
  if ((!d_k || !d_v) && d_model % heads != 0)
    throw input_error("d_model = " + std::to_string(d_model) + " is not divisible by h = " + std::to_string(heads) +
                      "; d_k = d_model / h is not an integer (give d_k and d_v explicitly)");
  AttentionShape s{d_model, heads, d_k.value_or(d_model / heads), d_v.value_or(d_model / heads)};
  if (s.d_k < 1 || s.d_v < 1)
    throw input_error("d_k and d_v must be at least 1 (got d_k = " + std::to_string(s.d_k) +
                      ", d_v = " + std::to_string(s.d_v) + ")");
  return s;
}

template <class T>
MultiHeadAttention<T>::MultiHeadAttention(Matrix<T> w_q, Matrix<T> w_k, Matrix<T> w_v, Matrix<T> w_o,
                                          Eigen::Index heads)
    : w_q_(std::move(w_q)), w_k_(std::move(w_k)), w_v_(std::move(w_v)), w_o_(std::move(w_o)) {
  using detail::shape_text;
  if (heads < 1) throw input_error("the number of heads h must be at least 1 (got " + std::to_string(heads) + ")");
  const Eigen::Index d_model = w_q_.rows();
  if (d_model < 1 || w_q_.cols() < 1) throw input_error("W^Q is empty", "W^Q");
  if (w_k_.rows() != d_model || w_k_.cols() != w_q_.cols())
    throw input_error("W^K is " + shape_text(w_k_.rows(), w_k_.cols()) + " but W^Q is " +
                      shape_text(w_q_.rows(), w_q_.cols()) + "; they must have the same shape", "W^K");
  if (w_q_.cols() % heads != 0)
    throw input_error("W^Q has " + std::to_string(w_q_.cols()) + " columns, not divisible by h = " +
                      std::to_string(heads) + " (it must be d_model x h d_k)", "W^Q");
  if (w_v_.rows() != d_model || w_v_.cols() < 1 || w_v_.cols() % heads != 0)
    throw input_error("W^V is " + shape_text(w_v_.rows(), w_v_.cols()) + "; it must be d_model x h d_v with d_model = " +
                      std::to_string(d_model) + " and a column count divisible by h = " + std::to_string(heads), "W^V");
  if (w_o_.rows() != w_v_.cols() || w_o_.cols() != d_model)
    throw input_error("W^O is " + shape_text(w_o_.rows(), w_o_.cols()) + "; it must be h d_v x d_model = " +
                      shape_text(w_v_.cols(), d_model), "W^O");
  shape_ = AttentionShape::make(d_model, heads, w_q_.cols() / heads, w_v_.cols() / heads);
  detail::require_finite(w_q_, "W^Q");
  detail::require_finite(w_k_, "W^K");
  detail::require_finite(w_v_, "W^V");
  detail::require_finite(w_o_, "W^O");
}

template <class T>
template <class N>
LayerTrace<T, N> MultiHeadAttention<T>::forward(const Matrix<T>& X) const {
  return forward<N>(X, std::vector<Mask>{});
}

template <class T>
template <class N>
LayerTrace<T, N> MultiHeadAttention<T>::forward(const Matrix<T>& X, const std::vector<Mask>& masks) const {
  using std::sqrt;
  detail::require_embeddings(X, shape_);
  if (masks.size() > 1 && static_cast<Eigen::Index>(masks.size()) != shape_.heads)
    throw input_error(std::to_string(masks.size()) + " masks for " + std::to_string(shape_.heads) +
                      " heads: give one mask for every head, or one per head");
  for (const Mask& m : masks) m.require_size(X.rows(), "X");

  LayerTrace<T, N> t;
  t.shape = shape_;
  t.Q = multiply(X, w_q_);
  t.K = multiply(X, w_k_);
  t.V = multiply(X, w_v_);
  const N root_dk = sqrt(N(shape_.d_k));
  t.concat.resize(X.rows(), shape_.heads * shape_.d_v);
  for (Eigen::Index i = 0; i < shape_.heads; ++i) {
    typename LayerTrace<T, N>::Head h;
    h.Q = head_slice(t.Q, i, shape_.d_k);
    h.K = head_slice(t.K, i, shape_.d_k);
    h.V = head_slice(t.V, i, shape_.d_v);
    h.scores = multiply_transposed(h.Q, h.K);
    h.scaled = to_tier<N>(h.scores);
    for (Eigen::Index c = 0; c < h.scaled.cols(); ++c)
      for (Eigen::Index r = 0; r < h.scaled.rows(); ++r) h.scaled(r, c) /= root_dk;
    if (!masks.empty()) h.mask = masks[masks.size() == 1 ? 0 : static_cast<std::size_t>(i)];
    h.A = h.mask ? softmax_rows(h.scaled, *h.mask) : softmax_rows(h.scaled);
    h.Z = multiply(h.A, to_tier<N>(h.V));
    t.concat.middleCols(i * shape_.d_v, shape_.d_v) = h.Z;
    t.heads.push_back(std::move(h));
  }
  t.output = multiply(t.concat, to_tier<N>(w_o_));
  return t;
}

}  // namespace attnrank
