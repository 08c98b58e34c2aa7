// The layer in the certified double tier (attnrank/attention/certified_double_forward.hpp).
#include <attnrank/attention/certified_double_forward.hpp>

#include <attnrank/attention/certified_attention.hpp>
#include <attnrank/attention/detail/certified_head.hpp>
#include <attnrank/linalg/certified_rank.hpp>

#include <string>

namespace attnrank {
namespace {

using Eigen::Index;

BallMatrix point(const Eigen::MatrixXd& M) { return {M, Eigen::MatrixXd::Zero(M.rows(), M.cols())}; }

BoundsMatrix columns(const BoundsMatrix& M, Index first, Index count) {
  return {M.lo.middleCols(first, count), M.hi.middleCols(first, count)};
}

/// The trace for X and weights given as balls; `shape` and the checks come from the caller.
CertifiedDoubleTrace forward_balls(const AttentionShape& shape, const BallMatrix& X, const BallMatrix& wq,
                                   const BallMatrix& wk, const BallMatrix& wv, const BallMatrix& wo,
                                   const std::vector<Mask>& masks) {
  const Index n = X.mid.rows();
  if (masks.size() > 1 && static_cast<Index>(masks.size()) != shape.heads)
    throw input_error(std::to_string(masks.size()) + " masks for " + std::to_string(shape.heads) +
                      " heads: give one mask for every head, or one per head");
  for (const Mask& m : masks) m.require_size(n, "X");
  CertifiedDoubleTrace t;
  t.shape = shape;
  t.Q = certified_product_bounds(X, wq);
  t.K = certified_product_bounds(X, wk);
  t.V = certified_product_bounds(X, wv);
  const ScaleBounds scale = ScaleBounds::inverse_sqrt(shape.d_k);
  t.concat.lo.resize(n, shape.heads * shape.d_v);
  t.concat.hi.resize(n, shape.heads * shape.d_v);
  for (Index i = 0; i < shape.heads; ++i) {
    CertifiedDoubleTrace::Head h;
    h.Q = columns(t.Q, i * shape.d_k, shape.d_k);
    h.K = columns(t.K, i * shape.d_k, shape.d_k);
    h.V = columns(t.V, i * shape.d_v, shape.d_v);
    if (!masks.empty()) h.mask = masks[masks.size() == 1 ? 0 : static_cast<std::size_t>(i)];
    detail::HeadBounds b =
        detail::certified_head(to_ball(h.Q), to_ball(h.K), to_ball(h.V), scale, h.mask ? &*h.mask : nullptr, true);
    h.scores = std::move(b.scores);
    h.scaled = std::move(b.scaled);
    h.A = std::move(b.weights);
    h.Z = std::move(b.output);
    t.concat.lo.middleCols(i * shape.d_v, shape.d_v) = h.Z.lo;
    t.concat.hi.middleCols(i * shape.d_v, shape.d_v) = h.Z.hi;
    t.heads.push_back(std::move(h));
  }
  t.output = certified_product_bounds(to_ball(t.concat), wo);
  return t;
}

}  // namespace

bool CertifiedDoubleTrace::finite() const { return output.lo.allFinite() && output.hi.allFinite(); }

CertifiedDoubleTrace certified_double_forward(const MultiHeadAttention<double>& layer, const Eigen::MatrixXd& X,
                                              const std::vector<Mask>& masks) {
  detail::require_embeddings(Matrix<double>(X), layer.shape());
  return forward_balls(layer.shape(), point(X), point(layer.w_q()), point(layer.w_k()), point(layer.w_v()),
                       point(layer.w_o()), masks);
}

CertifiedDoubleTrace certified_double_forward(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X,
                                              const std::vector<Mask>& masks) {
  detail::require_embeddings(X, layer.shape());
  return forward_balls(layer.shape(), to_ball(X), to_ball(layer.w_q()), to_ball(layer.w_k()), to_ball(layer.w_v()),
                       to_ball(layer.w_o()), masks);
}

}  // namespace attnrank
