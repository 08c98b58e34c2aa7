// Attention and its backward pass in MPFI (attnrank/attention/detail/interval_attention.hpp).
#include <attnrank/attention/detail/interval_attention.hpp>

#include <attnrank/attention/softmax.hpp>
#include <attnrank/linalg/product.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

namespace attnrank::detail {

using Eigen::Index;

Matrix<Interval> to_intervals(const Eigen::MatrixXd& M) {
  Matrix<Interval> out(M.rows(), M.cols());
  for (Index j = 0; j < M.cols(); ++j)
    for (Index i = 0; i < M.rows(); ++i) mpfi_set_d(out(i, j).backend().data(), M(i, j));  // exact: bits >= 53
  return out;
}

Interval interval_scale(const std::optional<double>& scale, Index d) {
  Interval s;
  if (scale) {
    mpfi_set_d(s.backend().data(), *scale);
  } else {
    Interval dd;
    mpfi_set_si(dd.backend().data(), static_cast<long>(d));
    s = 1 / sqrt(dd);
  }
  return s;
}

namespace {

Matrix<Interval> scaled_scores(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Interval& s) {
  Matrix<Interval> S = multiply_transposed(to_intervals(Q), to_intervals(K));
  for (Index j = 0; j < S.cols(); ++j)
    for (Index i = 0; i < S.rows(); ++i) S(i, j) *= s;
  return S;
}

/// The modified scores in place (softcap, then ALiBi); with a softcap, T gets tanh(x / c).
void modify(Matrix<Interval>& S, const ScoreModifiers& m, Matrix<Interval>& T) {
  if (m.softcap > 0) {
    Interval c;
    mpfi_set_d(c.backend().data(), m.softcap);
    T.resize(S.rows(), S.cols());
    for (Index j = 0; j < S.cols(); ++j)
      for (Index i = 0; i < S.rows(); ++i) {
        T(i, j) = tanh(S(i, j) / c);
        S(i, j) = c * T(i, j);
      }
  }
  if (m.alibi_slope) {
    Interval slope;
    mpfi_set_d(slope.backend().data(), *m.alibi_slope);
    const Index offset = m.alignment == MaskAlignment::bottom_right ? S.cols() - S.rows() : 0;
    for (Index j = 0; j < S.cols(); ++j)
      for (Index i = 0; i < S.rows(); ++i) {
        Interval distance;
        mpfi_set_si(distance.backend().data(), static_cast<long>(std::abs(i + offset - j)));
        S(i, j) -= slope * distance;
      }
  }
  if (m.bias)
    for (Index j = 0; j < S.cols(); ++j)
      for (Index i = 0; i < S.rows(); ++i) {
        Interval b;
        mpfi_set_d(b.backend().data(), (*m.bias)(i, j));  // exact: bits >= 53
        S(i, j) += b;
      }
}

/// Softmax of each row over the allowed keys and the sink: p_ij = 1 / (1 + rest_j / e_j) with
/// rest_j the sink's term and every other key's (one interval each: narrower than e_j / sum).
/// With `sink_weight`, the sink's own weight 1 / (1 + sum_j e_j / e_sink) per row there.
Matrix<Interval> softmax_with_sink(const Matrix<Interval>& S, const Mask* mask, double sink_logit,
                                   std::vector<Interval>* sink_weight = nullptr) {
  Interval sink;
  mpfi_set_d(sink.backend().data(), sink_logit);
  Matrix<Interval> P(S.rows(), S.cols());
  std::vector<Interval> e(static_cast<std::size_t>(S.cols())), prefix, suffix;
  for (Index i = 0; i < S.rows(); ++i) {
    // Any shift leaves the weights unchanged; the largest midpoint keeps exp's arguments small.
    double shift = sink_logit;
    for (Index j = 0; j < S.cols(); ++j)
      if (!mask || mask->allows(i, j)) shift = std::max(shift, mpfi_get_d(S(i, j).backend().data()));
    Interval top;
    mpfi_set_d(top.backend().data(), shift);
    const Interval sink_term = exp(sink - top);
    for (Index j = 0; j < S.cols(); ++j) {
      const bool in = !mask || mask->allows(i, j);
      e[static_cast<std::size_t>(j)] = in ? Interval(exp(S(i, j) - top)) : Interval(0);
    }
    // rest_j = sink + (keys before j) + (keys after j): prefix and suffix sums, not sum - e_j
    // (which would double e_j's width), and not a sum per j.
    const std::size_t n = e.size();
    prefix.assign(n + 1, Interval(0));
    suffix.assign(n + 1, Interval(0));
    for (std::size_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + e[k];
    for (std::size_t k = n; k-- > 0;) suffix[k] = suffix[k + 1] + e[k];
    if (sink_weight) sink_weight->push_back(1 / (1 + prefix[n] / sink_term));
    for (Index j = 0; j < S.cols(); ++j) {
      if (mask && !mask->allows(i, j)) {
        P(i, j) = 0;
        continue;
      }
      const std::size_t k = static_cast<std::size_t>(j);
      const Interval rest = sink_term + prefix[k] + suffix[k + 1];
      P(i, j) = 1 / (1 + rest / e[k]);
    }
  }
  return P;
}

Matrix<Interval> weights(const Matrix<Interval>& S, const Mask* mask, const ScoreModifiers& m) {
  if (m.sink) return softmax_with_sink(S, mask, *m.sink);
  return mask ? softmax_rows(S, *mask) : softmax_rows(S);
}

/// X o Z / (1 - p) with dropout's keep-mask (X itself without one).
Matrix<Interval> dropped(const Matrix<Interval>& X, const ScoreModifiers& m) {
  if (!m.keep) return X;
  Interval one_minus;
  mpfi_set_d(one_minus.backend().data(), m.dropout_p);
  one_minus = 1 - one_minus;
  const Interval k = 1 / one_minus;
  Matrix<Interval> out(X.rows(), X.cols());
  for (Index j = 0; j < X.cols(); ++j)
    for (Index i = 0; i < X.rows(); ++i) out(i, j) = (*m.keep)(i, j) != 0 ? Interval(X(i, j) * k) : Interval(0);
  return out;
}

}  // namespace

Matrix<Interval> interval_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                    const std::optional<double>& scale, const Mask* mask,
                                    const ScoreModifiers& modifiers) {
  Matrix<Interval> S = scaled_scores(Q, K, interval_scale(scale, Q.cols())), T;
  modify(S, modifiers, T);
  return multiply(dropped(weights(S, mask, modifiers), modifiers), to_intervals(V));
}

IntervalGradients interval_attention_gradients(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                               const Eigen::MatrixXd& V, const Eigen::MatrixXd& dO,
                                               const std::optional<double>& scale, const Mask* mask,
                                               const GradientsWanted& wanted, const ScoreModifiers& modifiers) {
  const Interval s = interval_scale(scale, Q.cols());
  Matrix<Interval> S = scaled_scores(Q, K, s), T;
  modify(S, modifiers, T);
  IntervalGradients out;
  if (wanted.lse) {
    out.lse.resize(S.rows(), 1);
    for (Index i = 0; i < S.rows(); ++i) {
      Interval sum = 0;
      if (modifiers.sink) {
        mpfi_set_d(sum.backend().data(), *modifiers.sink);
        sum = exp(sum);
      }
      for (Index j = 0; j < S.cols(); ++j)
        if (!mask || mask->allows(i, j)) sum += exp(S(i, j));
      if (mask && mask->allowed_in_row(i) == 0 && !modifiers.sink)  // no key: FlashAttention's +inf
        mpfi_set_d(out.lse(i, 0).backend().data(), std::numeric_limits<double>::infinity());
      else
        out.lse(i, 0) = log(sum);
    }
  }
  if (!wanted.any_gradient()) return out;
  std::vector<Interval> sink_weight;
  const Matrix<Interval> P = modifiers.sink && wanted.dsink ? softmax_with_sink(S, mask, *modifiers.sink, &sink_weight)
                                                            : weights(S, mask, modifiers);
  const Matrix<Interval> Vi = to_intervals(V), dOi = to_intervals(dO);
  const Matrix<Interval> Pd = dropped(P, modifiers);  // the weights V reads
  const Matrix<Interval> O = multiply(Pd, Vi);
  Matrix<Interval> dS = dropped(multiply_transposed(dOi, Vi), modifiers);  // dP, then dS in place
  if (wanted.dsink) out.dsink = Matrix<Interval>::Constant(1, 1, Interval(0));
  for (Index i = 0; i < dS.rows(); ++i) {
    Interval d = 0;
    for (Index l = 0; l < O.cols(); ++l) d += dOi(i, l) * O(i, l);
    if (!sink_weight.empty()) out.dsink(0, 0) -= sink_weight[static_cast<std::size_t>(i)] * d;  // dz = -sum_i p_iz D_i
    for (Index j = 0; j < dS.cols(); ++j) {
      Interval t = dS(i, j) - d;
      dS(i, j) = P(i, j) * t;
      if (modifiers.softcap > 0) dS(i, j) *= 1 - T(i, j) * T(i, j);
    }
  }
  if (wanted.dq) {
    out.dq = multiply(dS, to_intervals(K));
    for (Index j = 0; j < out.dq.cols(); ++j)
      for (Index i = 0; i < out.dq.rows(); ++i) out.dq(i, j) *= s;
  }
  if (wanted.dk) {
    const Matrix<Interval> dST = dS.transpose();
    out.dk = multiply(dST, to_intervals(Q));
    for (Index j = 0; j < out.dk.cols(); ++j)
      for (Index i = 0; i < out.dk.rows(); ++i) out.dk(i, j) *= s;
  }
  if (wanted.dv) {
    const Matrix<Interval> PT = Pd.transpose();
    out.dv = multiply(PT, dOi);
  }
  return out;
}

}  // namespace attnrank::detail
