// Attention and its backward pass in MPFI (attnrank/attention/detail/interval_attention.hpp).
#include <attnrank/attention/detail/interval_attention.hpp>

#include <attnrank/attention/softmax.hpp>
#include <attnrank/linalg/product.hpp>

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

}  // namespace

Matrix<Interval> interval_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                    const std::optional<double>& scale, const Mask* mask) {
  const Matrix<Interval> S = scaled_scores(Q, K, interval_scale(scale, Q.cols()));
  const Matrix<Interval> A = mask ? softmax_rows(S, *mask) : softmax_rows(S);
  return multiply(A, to_intervals(V));
}

IntervalGradients interval_attention_gradients(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                               const Eigen::MatrixXd& V, const Eigen::MatrixXd& dO,
                                               const std::optional<double>& scale, const Mask* mask,
                                               const GradientsWanted& wanted) {
  const Interval s = interval_scale(scale, Q.cols());
  const Matrix<Interval> S = scaled_scores(Q, K, s);
  IntervalGradients out;
  if (wanted.lse) {
    out.lse.resize(S.rows(), 1);
    for (Index i = 0; i < S.rows(); ++i) {
      Interval sum = 0;
      for (Index j = 0; j < S.cols(); ++j)
        if (!mask || mask->allows(i, j)) sum += exp(S(i, j));
      out.lse(i, 0) = log(sum);
    }
  }
  if (!wanted.any_gradient()) return out;
  const Matrix<Interval> P = mask ? softmax_rows(S, *mask) : softmax_rows(S);
  const Matrix<Interval> Vi = to_intervals(V), dOi = to_intervals(dO);
  const Matrix<Interval> O = multiply(P, Vi);
  Matrix<Interval> dS = multiply_transposed(dOi, Vi);  // dP, then dS in place
  for (Index i = 0; i < dS.rows(); ++i) {
    Interval d = 0;
    for (Index l = 0; l < O.cols(); ++l) d += dOi(i, l) * O(i, l);
    for (Index j = 0; j < dS.cols(); ++j) {
      Interval t = dS(i, j) - d;
      dS(i, j) = P(i, j) * t;
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
    const Matrix<Interval> PT = P.transpose();
    out.dv = multiply(PT, dOi);
  }
  return out;
}

}  // namespace attnrank::detail
