// Certified attention in doubles (attnrank/attention/certified_attention.hpp).
#include <attnrank/attention/certified_attention.hpp>

#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/detail/a_priori_head.hpp>
#include <attnrank/attention/detail/certified_head.hpp>
#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/bands.hpp>

#include <cmath>
#include <string>

namespace attnrank {
namespace {

using Eigen::Index;

std::string shape(const Eigen::MatrixXd& M) { return std::to_string(M.rows()) + " x " + std::to_string(M.cols()); }

bool is_point(const BallMatrix& B) { return (B.rad.array() == 0).all(); }

/// Bounds of A B, with the cheaper products when a side is a point matrix.
BoundsMatrix product(const BallMatrix& A, bool a_point, const BallMatrix& B, bool b_point) {
  if (a_point && b_point) return certified_product_bounds(A.mid, B.mid);
  if (a_point) return certified_product_bounds(A.mid, B);
  if (b_point) return certified_product_bounds(A, B.mid);
  return certified_product_bounds(A, B);
}

BallMatrix rows_of(const BallMatrix& B, Index first, Index count) {
  return {B.mid.middleRows(first, count), B.rad.middleRows(first, count)};
}

void put_rows(BoundsMatrix& into, Index first, const BoundsMatrix& block) {
  into.lo.middleRows(first, block.lo.rows()) = block.lo;
  into.hi.middleRows(first, block.hi.rows()) = block.hi;
}

void resize(BoundsMatrix& M, Index rows, Index cols) {
  M.lo.resize(rows, cols);
  M.hi.resize(rows, cols);
}

/// Every row block of the fused head on the library's threads: 256 rows a block amortise
/// packing K^T and V for the block's two GEMMs.
void fused_rows(const detail::APrioriHead& head, Index n, double work, BoundsMatrix& output) {
  detail::for_row_blocks(static_cast<long>(n), work / 50, [&](long begin, long end) {
    for (Index first = begin; first < end; first += 256)
      put_rows(output, first, head.rows(first, std::min<Index>(256, end - first)));
  });
}

}  // namespace

namespace detail {

void require_attention_inputs(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                              const ScaleBounds& scale, const Mask* mask, const std::string& what) {
  if (Q.rows() < 1 || K.rows() < 1 || Q.cols() < 1 || V.cols() < 1)
    throw input_error(what + ": Q is " + shape(Q) + ", K " + shape(K) + ", V " + shape(V) +
                      "; every one needs at least one row and one column");
  if (K.cols() != Q.cols())
    throw input_error(what + ": Q is " + shape(Q) + " but K is " + shape(K) + " (their columns must agree)", "K");
  if (V.rows() != K.rows())
    throw input_error(what + ": K is " + shape(K) + " but V is " + shape(V) + " (one row of V per key)", "V");
  detail::require_finite(Matrix<double>(Q), "Q");
  detail::require_finite(Matrix<double>(K), "K");
  detail::require_finite(Matrix<double>(V), "V");
  if (!(scale.lo > 0 && scale.lo <= scale.hi && std::isfinite(scale.hi)))
    throw input_error(what + ": the scale bounds must satisfy 0 < lo <= hi < inf");
  if (mask && (mask->size() != Q.rows() || mask->cols() != K.rows()))
    throw input_error(what + ": the mask is " + std::to_string(mask->size()) + " x " + std::to_string(mask->cols()) +
                      " but Q has " + std::to_string(Q.rows()) + " rows and K " + std::to_string(K.rows()) +
                      " (one mask row per query, one column per key)");
}

HeadBounds certified_head(const BallMatrix& Q, const BallMatrix& K, const BallMatrix& V, const ScaleBounds& scale,
                          const Mask* mask, bool keep_trace, AttentionProducts products) {
  const Index n = Q.mid.rows(), keys = K.mid.rows();
  const bool q_point = is_point(Q), k_point = is_point(K), v_point = is_point(V);
  // The a priori path keeps no trace (check_kernel's use); the layer's trace takes the directed one.
  const bool a_priori = products == AttentionProducts::a_priori && q_point && k_point && v_point && !keep_trace;
  HeadBounds out;
  resize(out.output, n, V.mid.cols());
  if (keep_trace)
    for (BoundsMatrix* m : {&out.scores, &out.scaled, &out.weights}) resize(*m, n, keys);
  const double work = static_cast<double>(n) * static_cast<double>(keys) *
                      static_cast<double>(Q.mid.cols() + V.mid.cols());
  if (a_priori) {  // one fused pass per block (attention/detail/a_priori_head.hpp)
    fused_rows(APrioriHead(Q.mid, K.mid, V.mid, scale, mask), n, work, out.output);
    return out;
  }
  const BallMatrix KT{K.mid.transpose(), K.rad.transpose()};
  // for_row_blocks counts MPFR operations (~50 double multiply-adds each).
  for_row_blocks(static_cast<long>(n), work / 50, [&](long begin, long end) {
    const SerialDirectedProducts serial;  // this thread's share; no threads inside
    for (Index first = begin; first < end; first += 64) {
      const Index rows = std::min<Index>(64, end - first);
      BoundsMatrix S = product(rows_of(Q, first, rows), q_point, KT, k_point);
      if (keep_trace) put_rows(out.scores, first, S);
      S = scale_bounds(S, scale);
      if (keep_trace) put_rows(out.scaled, first, S);
      S = mask ? certified_softmax_bounds(S, *mask, first) : certified_softmax_bounds(S);
      if (keep_trace) put_rows(out.weights, first, S);
      put_rows(out.output, first, product(to_ball(S), false, V, v_point));
    }
  });
  // An overflow on this path can meet an infinite ball in a product and give NaN:
  // that end then bounds nothing, and says so as an infinite end, never as NaN.
  for (BoundsMatrix* m : {&out.scores, &out.scaled, &out.weights, &out.output}) unbounded_where_nan(*m);
  return out;
}

}  // namespace detail

BoundsMatrix certified_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                 const ScaleBounds& scale, const Mask* mask, AttentionProducts products) {
  detail::require_attention_inputs(Q, K, V, scale, mask, "attention");
  const auto point = [](const Eigen::MatrixXd& M) {
    return BallMatrix{M, Eigen::MatrixXd::Zero(M.rows(), M.cols())};
  };
  return detail::certified_head(point(Q), point(K), point(V), scale, mask, false, products).output;
}

namespace detail {

BoundsMatrix a_priori_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                const ScaleBounds& scale, const Mask* mask, const ScoreModifiers& modifiers) {
  detail::require_attention_inputs(Q, K, V, scale, mask, "attention");
  validate(modifiers);
  if (modifiers.bias && (modifiers.bias->rows() != Q.rows() || modifiers.bias->cols() != K.rows()))
    throw input_error("attention: the bias is " + shape(*modifiers.bias) + " but the scores are " +
                      std::to_string(Q.rows()) + " x " + std::to_string(K.rows()));
  BoundsMatrix out;
  resize(out, Q.rows(), V.cols());
  fused_rows(APrioriHead(Q, K, V, scale, mask, modifiers), Q.rows(),
             static_cast<double>(Q.rows()) * static_cast<double>(K.rows()) * static_cast<double>(Q.cols() + V.cols()),
             out);
  return out;
}

}  // namespace detail

}  // namespace attnrank
