// The backward pass of one head, certified in doubles (attnrank/attention/certified_gradients.hpp).
#include <attnrank/attention/certified_gradients.hpp>

#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/detail/certified_head.hpp>
#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/bands.hpp>
#include <attnrank/numbers/certified_log.hpp>
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/detail/parallel.hpp>

#include <mutex>
#include <string>
#include <vector>

namespace attnrank {
namespace {

using Eigen::Index;
using detail::inf;

std::string shape_text(const Eigen::MatrixXd& M) { return std::to_string(M.rows()) + " x " + std::to_string(M.cols()); }

BoundsMatrix zeros(Index rows, Index cols) {
  return {Eigen::MatrixXd::Zero(rows, cols), Eigen::MatrixXd::Zero(rows, cols)};
}

/// acc += [C - R, C + R] with R_il = weight_i b_abs_max_l + eta, each end in its own direction;
/// C from a product in round-to-nearest with |exact - C| <= R. Where C is not finite (an
/// overflow) or R is NaN nothing is bounded. R is formed a column at a time, never stored.
void accumulate_around(BoundsMatrix& acc, const Eigen::MatrixXd& C, const Eigen::VectorXd& weight,
                       const Eigen::RowVectorXd& b_abs_max, double eta) {
  UpwardRounding up;
  for (Index l = 0; l < C.cols(); ++l) {
    const auto c = C.col(l).array();
    const auto r = weight.array() * b_abs_max(l) + eta;
    const auto known = c.isFinite() && !r.isNaN();
    acc.hi.col(l) = known.select(acc.hi.col(l).array() + (c + r), inf);
    acc.lo.col(l) = known.select(-((-acc.lo.col(l).array()) + (r - c)), -inf);
  }
  detail::rounding_barrier(acc.hi);
  detail::rounding_barrier(acc.lo);
}

/// An interval matrix X (bounds) as the left factor of products with point matrices,
/// X B and X^T B: with a priori bounds, ONE GEMM of X's midpoint M each and the radius
///   |X B - fl(M B)|_il <= (gamma_k sum_j |M_ij| + sum_j rad_ij) max_j |B_jl| + k 2^-1074
/// (numbers/a_priori_product.hpp; k the inner dimension), whose row (or column) sums are
/// computed once for both products; otherwise Rump's product with directed pairs. A row
/// (column) of X with an end that is not finite leaves its row of X B (of X^T B) unbounded.
class IntervalOperand {
 public:
  IntervalOperand(const BoundsMatrix& X, bool a_priori) : a_priori_(a_priori) {
    mid_ = 0.5 * X.lo + 0.5 * X.hi;  // any double will do; halves first: lo + hi may overflow
    const auto finite = X.lo.array().isFinite() && X.hi.array().isFinite();
    bad_rows_ = !finite.rowwise().all();
    bad_cols_ = !finite.colwise().all().transpose();
    UpwardRounding up;
    rad_ = (X.hi - mid_).cwiseMax(mid_ - X.lo);
    detail::rounding_barrier(rad_);
    if (a_priori_) {
      const double g_cols = a_priori_gamma(mid_.cols()), g_rows = a_priori_gamma(mid_.rows());
      row_weight_ = (mid_.cwiseAbs().rowwise().sum() * g_cols + rad_.rowwise().sum()).eval();
      col_weight_ = (mid_.cwiseAbs().colwise().sum() * g_rows + rad_.colwise().sum()).transpose().eval();
      // A row (column) with an end that is not finite: its products are not bounded.
      row_weight_ = bad_rows_.select(inf, row_weight_);
      col_weight_ = bad_cols_.select(inf, col_weight_);
      detail::rounding_barrier(row_weight_);
      detail::rounding_barrier(col_weight_);
    }
  }

  /// Bounds of X B (b_abs_max(l) >= max_j |B(j, l)|); C is scratch space.
  BoundsMatrix times(const Eigen::MatrixXd& B, const Eigen::RowVectorXd& b_abs_max, Eigen::MatrixXd& C) const {
    BoundsMatrix out;
    if (a_priori_) {
      out = zeros(mid_.rows(), B.cols());
      nearest(C, mid_, B);
      accumulate_around(out, C, row_weight_, b_abs_max, a_priori_underflow(mid_.cols()));
    } else {
      out = certified_product_bounds(BallMatrix{mid_, rad_}, B);
    }
    unbounded(out, bad_rows_);
    return out;
  }

  /// acc += X^T B, each end in its own direction; C is scratch space.
  void add_transposed_times(BoundsMatrix& acc, const Eigen::MatrixXd& B, const Eigen::RowVectorXd& b_abs_max,
                            Eigen::MatrixXd& C) const {
    if (a_priori_) {
      nearest(C, mid_.transpose(), B);
      accumulate_around(acc, C, col_weight_, b_abs_max, a_priori_underflow(mid_.rows()));
      return;
    }
    BoundsMatrix part = certified_product_bounds(BallMatrix{mid_.transpose(), rad_.transpose()}, B);
    unbounded(part, bad_cols_);
    detail::add_bounds(acc, part);
  }

 private:
  /// C = fl(A B) in round-to-nearest (the a priori bound's assumption), into C's storage.
  template <class Left>
  static void nearest(Eigen::MatrixXd& C, const Left& A, const Eigen::MatrixXd& B) {
    const RoundingScope<FE_TONEAREST> nearest;
    C.noalias() = A * B;
    detail::rounding_barrier(C);
  }

  static void unbounded(BoundsMatrix& out, const Eigen::Array<bool, Eigen::Dynamic, 1>& bad) {
    for (Index i = 0; i < bad.size(); ++i)
      if (bad(i)) {
        out.lo.row(i).setConstant(-inf);
        out.hi.row(i).setConstant(inf);
      }
    unbounded_where_nan(out);
  }

  bool a_priori_;
  Eigen::MatrixXd mid_, rad_;
  Eigen::VectorXd row_weight_, col_weight_;
  Eigen::Array<bool, Eigen::Dynamic, 1> bad_rows_, bad_cols_;
};

/// A thread's scratch space, kept across its blocks (a product's 4 MB result would
/// otherwise be allocated, and its pages faulted in, block after block).
struct Workspace {
  Eigen::MatrixXd rows, keys;  // a block's rows x d products; N_k x d products
};

/// One head's shared data: transposes, norms and column maxima the blocks read.
class GradientHead {
 public:
  GradientHead(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V, const Eigen::MatrixXd& dO,
               const ScaleBounds& scale, const Mask* mask, AttentionProducts products, const GradientsWanted& wanted,
               const ScoreModifiers& modifiers)
      : Q_(Q), K_(K), V_(V), dO_(dO), KT_(K.transpose()), VT_(V.transpose()), scale_(scale), mask_(mask),
        a_priori_(products == AttentionProducts::a_priori), wanted_(wanted), modifiers_(modifiers) {
    v_min_ = V.colwise().minCoeff();
    v_max_ = V.colwise().maxCoeff();
    // With a sink the weights sum to less than 1, and a row without a key has the output 0:
    // O is a combination of V's rows and 0.
    if (modifiers.sink || (mask && mask->first_empty_row() >= 0)) {
      v_min_ = v_min_.cwiseMin(0.0);
      v_max_ = v_max_.cwiseMax(0.0);
    }
    v_abs_max_ = V.cwiseAbs().colwise().maxCoeff();
    k_abs_max_ = K.cwiseAbs().colwise().maxCoeff();
    if (a_priori_) {
      q_norms_ = row_norms_upper(Q);
      k_norms_ = row_norms_upper(K);
      v_norms_ = row_norms_upper(V);
      if (dO.size()) do_norms_ = row_norms_upper(dO);
    }
  }

  /// Rows first .. first + rows - 1: their dQ rows and lse entries into `out`,
  /// their shares of dK (unscaled) and dV added to `dk` and `dv`.
  void block(Index first, Index rows, GradientBounds& out, BoundsMatrix& dk, BoundsMatrix& dv, BoundsMatrix& dsink,
             Workspace& work) const {
    const Eigen::MatrixXd Qb = Q_.middleRows(first, rows);
    BoundsMatrix S = a_priori_ ? a_priori_product_bounds(Qb, KT_, q_norms_.segment(first, rows), k_norms_)
                               : certified_product_bounds(Qb, KT_);
    S = scale_bounds(S, scale_);
    BoundsMatrix T;  // tanh(x / c) with a softcap
    if (modifiers_.changes_scores())
      modify_score_bounds(S, modifiers_, first, Q_.rows(), wanted_.any_gradient() ? &T : nullptr);
    BoundsMatrix W;  // the sink's weight per row, for its gradient
    const BoundsMatrix P = modifiers_.sink ? certified_softmax_bounds(S, mask_, first, *modifiers_.sink,
                                                                      wanted_.dsink ? &W : nullptr)
                           : mask_         ? certified_softmax_bounds(S, *mask_, first)
                                           : certified_softmax_bounds(S);
    if (wanted_.lse) logsumexp(S, P, first, out.lse);
    if (!wanted_.any_gradient() && !wanted_.output) return;

    // O within V's column range (and 0's, with a sink; not with dropout, whose kept weights
    // are scaled up); D = rowsum(dO o O) in upward rounding.
    const IntervalOperand p(modifiers_.keep ? dropout_bounds(P, modifiers_, first) : P, a_priori_);
    BoundsMatrix O = p.times(V_, v_abs_max_, work.rows);
    if (!modifiers_.keep) {
      O.lo = O.lo.cwiseMax(v_min_.replicate(rows, 1));
      O.hi = O.hi.cwiseMin(v_max_.replicate(rows, 1));
    }
    zero_empty_rows(O, first);
    if (wanted_.output) {
      out.output.lo.middleRows(first, rows) = O.lo;
      out.output.hi.middleRows(first, rows) = O.hi;
    }
    if (!wanted_.any_gradient()) return;
    const Eigen::MatrixXd dOb = dO_.middleRows(first, rows);
    Eigen::VectorXd d_lo, d_hi;
    {
      UpwardRounding up;
      const Eigen::ArrayXXd g = dOb.array();
      d_hi = (g * O.lo.array()).max(g * O.hi.array()).rowwise().sum().matrix();
      d_lo = -((-g) * O.lo.array()).max((-g) * O.hi.array()).rowwise().sum().matrix();
      detail::rounding_barrier(d_hi);
      detail::rounding_barrier(d_lo);
    }
    if (wanted_.dsink && modifiers_.sink) {
      // dz = -sum_i p_iz D_i with p_iz >= 0: each end of p_iz D_i one product of ends; the sum
      // of minus the lower ends rounded up is the upper end of dz, and the other way round.
      UpwardRounding up;
      const auto w_lo = W.lo.col(0).array(), w_hi = W.hi.col(0).array();
      const Eigen::ArrayXd minus_lo = (d_lo.array() >= 0).select(w_lo * (-d_lo.array()), w_hi * (-d_lo.array()));
      const Eigen::ArrayXd hi = (d_hi.array() >= 0).select(w_hi * d_hi.array(), w_lo * d_hi.array());
      double upper = minus_lo.isNaN().any() ? inf : minus_lo.sum(), lower_neg = hi.isNaN().any() ? inf : hi.sum();
      detail::rounding_barrier(upper);
      detail::rounding_barrier(lower_neg);
      dsink.hi(0, 0) += upper;
      dsink.lo(0, 0) = -((-dsink.lo(0, 0)) + lower_neg);
      detail::rounding_barrier(dsink.hi);
      detail::rounding_barrier(dsink.lo);
    }
    if (!wanted_.dq && !wanted_.dk && !wanted_.dv) return;

    // dS = P o (dP - D 1^T), P >= 0: each end one product of ends, 0 where P is exactly 0.
    BoundsMatrix dP = a_priori_ ? a_priori_product_bounds(dOb, VT_, do_norms_.segment(first, rows), v_norms_)
                                : certified_product_bounds(dOb, VT_);
    if (modifiers_.keep) dP = dropout_bounds(dP, modifiers_, first);  // the gradient reaching P through Z / (1 - p)
    BoundsMatrix dS;
    {
      UpwardRounding up;
      // t_hi >= dP - D and minus_t_lo >= D - dP, both rounded up (so neither is -inf).
      const Eigen::ArrayXXd t_hi = dP.hi.array().colwise() - d_lo.array();
      const Eigen::ArrayXXd minus_t_lo = (-dP.lo.array()).colwise() + d_hi.array();
      const auto p_lo = P.lo.array(), p_hi = P.hi.array();
      dS.hi = (p_hi == 0).select(0.0, (t_hi >= 0).select(p_hi * t_hi, p_lo * t_hi)).matrix();
      dS.lo = (p_hi == 0).select(0.0, -(minus_t_lo >= 0).select(p_hi * minus_t_lo, p_lo * minus_t_lo)).matrix();
      detail::rounding_barrier(dS.hi);
      detail::rounding_barrier(dS.lo);
    }
    unbounded_where_nan(dS);
    if (modifiers_.softcap > 0) dS = times_softcap_derivative(dS, T);  // the chain rule through c tanh(x / c)

    if (wanted_.dv) p.add_transposed_times(dv, dOb, dOb.cwiseAbs().colwise().maxCoeff(), work.keys);
    const IntervalOperand ds(dS, a_priori_);
    if (wanted_.dq) {
      BoundsMatrix g = scale_bounds(ds.times(K_, k_abs_max_, work.rows), scale_);
      zero_empty_rows(g, first);
      out.dq.lo.middleRows(first, rows) = g.lo;
      out.dq.hi.middleRows(first, rows) = g.hi;
    }
    if (wanted_.dk) ds.add_transposed_times(dk, Qb, Qb.cwiseAbs().colwise().maxCoeff(), work.keys);
  }

 private:
  /// Rows of `block` (rows first .. of the head) whose mask allows no key are exactly 0: their
  /// weights are (the a priori products would leave a radius of k 2^-1074 around them).
  void zero_empty_rows(BoundsMatrix& block, Index first) const {
    if (!mask_) return;
    for (Index i = 0; i < block.lo.rows(); ++i)
      if (mask_->allowed_in_row(first + i) == 0) {
        block.lo.row(i).setZero();
        block.hi.row(i).setZero();
      }
  }

  /// lse_i = x_ij - log p_ij at the allowed j with the largest lower weight bound. A row without
  /// a key (EmptyRows::zero): the sink exactly, or FlashAttention's +inf without one.
  void logsumexp(const BoundsMatrix& S, const BoundsMatrix& P, Index first, BoundsMatrix& lse) const {
    const Index rows = S.lo.rows();
    Eigen::VectorXd p_lo(rows), p_hi(rows), x_lo(rows), x_hi(rows), log_lo(rows), log_hi(rows);
    std::vector<Index> empty;
    for (Index i = 0; i < rows; ++i) {
      if (mask_ && mask_->allowed_in_row(first + i) == 0) {
        empty.push_back(i);
        p_lo(i) = p_hi(i) = 1;  // any weight in (0, 1]: overwritten below
        x_lo(i) = x_hi(i) = 0;
        continue;
      }
      Index j = 0;
      if (P.lo.row(i).maxCoeff(&j) == 0) P.hi.row(i).maxCoeff(&j);  // nothing proven positive: the largest upper end
      p_lo(i) = P.lo(i, j);
      p_hi(i) = P.hi(i, j);
      x_lo(i) = S.lo(i, j);
      x_hi(i) = S.hi(i, j);
    }
    // p_hi > 0 at an allowed key (certified_softmax_bounds never gives an upper end of 0 there).
    log_bounds(p_lo.data(), p_hi.data(), log_lo.data(), log_hi.data(), static_cast<std::size_t>(rows));
    UpwardRounding up;
    Eigen::VectorXd hi = x_hi - log_lo, lo = -((-x_lo) + log_hi);
    detail::rounding_barrier(hi);
    detail::rounding_barrier(lo);
    lse.hi.middleRows(first, rows) = hi;
    lse.lo.middleRows(first, rows) = lo;
    for (Index i : empty) lse.lo(first + i, 0) = lse.hi(first + i, 0) = modifiers_.sink ? *modifiers_.sink : inf;
  }

  const Eigen::MatrixXd &Q_, &K_, &V_, &dO_;
  Eigen::MatrixXd KT_, VT_;
  ScaleBounds scale_;
  const Mask* mask_;
  bool a_priori_;
  GradientsWanted wanted_;
  ScoreModifiers modifiers_;
  Eigen::RowVectorXd v_min_, v_max_, v_abs_max_, k_abs_max_;
  Eigen::VectorXd q_norms_, k_norms_, v_norms_, do_norms_;
};

}  // namespace

GradientBounds certified_attention_gradients(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                             const Eigen::MatrixXd& V, const Eigen::MatrixXd& dO,
                                             const ScaleBounds& scale, const Mask* mask, AttentionProducts products,
                                             const GradientsWanted& wanted, const ScoreModifiers& modifiers) {
  validate(modifiers);
  detail::require_attention_inputs(Q, K, V, scale, mask, "attention backward");
  if (wanted.any_gradient() && (dO.rows() != Q.rows() || dO.cols() != V.cols()))
    throw input_error("attention backward: dO is " + shape_text(dO) + " but the output is " +
                          std::to_string(Q.rows()) + " x " + std::to_string(V.cols()) + " (rows of Q x columns of V)",
                      "dO");
  if (wanted.any_gradient()) detail::require_finite(Matrix<double>(dO), "dO");

  const Index n = Q.rows(), keys = K.rows();
  GradientBounds out;
  if (wanted.dq) out.dq = zeros(n, Q.cols());
  if (wanted.lse) out.lse = zeros(n, 1);
  if (wanted.output) out.output = zeros(n, V.cols());
  BoundsMatrix dk = zeros(wanted.dk ? keys : 0, Q.cols()), dv = zeros(wanted.dv ? keys : 0, V.cols()),
               dsink = zeros(wanted.dsink ? 1 : 0, 1);
  const GradientHead head(Q, K, V, dO, scale, mask, products, wanted, modifiers);
  const double work = static_cast<double>(n) * static_cast<double>(keys) * static_cast<double>(3 * Q.cols() + 3 * V.cols());
  std::mutex joining;
  detail::for_row_blocks(static_cast<long>(n), work / 50, [&](long begin, long end) {
    const detail::SerialDirectedProducts serial;  // this thread's share; no threads inside
    BoundsMatrix my_dk = zeros(dk.lo.rows(), dk.lo.cols()), my_dv = zeros(dv.lo.rows(), dv.lo.cols()),
                 my_dsink = zeros(dsink.lo.rows(), 1);
    Workspace work;
    for (Index first = begin; first < end; first += 128)
      head.block(first, std::min<Index>(128, end - first), out, my_dk, my_dv, my_dsink, work);
    const std::lock_guard<std::mutex> lock(joining);
    detail::add_bounds(dk, my_dk);
    detail::add_bounds(dv, my_dv);
    detail::add_bounds(dsink, my_dsink);
  });
  if (wanted.dk) out.dk = scale_bounds(dk, scale);
  if (wanted.dv) out.dv = dv;
  if (wanted.dsink) out.dsink = dsink;  // without a sink: exactly 0 (nothing depends on it)
  for (BoundsMatrix* m : {&out.dq, &out.dk, &out.dv, &out.lse, &out.output, &out.dsink}) unbounded_where_nan(*m);
  return out;
}

}  // namespace attnrank
