// Certified attention in doubles (attnrank/attention/certified_attention.hpp).
#include <attnrank/attention/certified_attention.hpp>

#include <attnrank/attention/certified_softmax.hpp>

#include <cmath>
#include <string>

namespace attnrank {
namespace {

using Eigen::Index;

void require_finite(const Eigen::MatrixXd& M, const char* name) {
  if (M.allFinite()) return;
  for (Index i = 0; i < M.rows(); ++i)
    for (Index j = 0; j < M.cols(); ++j)
      if (!std::isfinite(M(i, j)))
        throw input_error(std::string(name) + "[" + std::to_string(i) + ", " + std::to_string(j) + "] is " +
                              std::to_string(M(i, j)) + " (0-based index): not a finite number",
                          name, i + 1, j + 1);
}

std::string shape(const Eigen::MatrixXd& M) { return std::to_string(M.rows()) + " x " + std::to_string(M.cols()); }

}  // namespace

ScaleBounds ScaleBounds::exactly(double s) {
  if (!(std::isfinite(s) && s > 0))
    throw input_error("the scale must be a positive finite number (got " + std::to_string(s) + ")");
  return {s, s};
}

ScaleBounds ScaleBounds::inverse_sqrt(Index d) {
  if (d < 1) throw input_error("1/sqrt(d) needs d >= 1 (got " + std::to_string(d) + ")");
  // 1 / sqrt(d) lies between 1 / sqrt_up(d) rounded down and 1 / sqrt_down(d) rounded up.
  double root_lo, root_hi;
  ScaleBounds s;
  {
    DownwardRounding down;
    root_lo = std::sqrt(static_cast<double>(d));
    detail::rounding_barrier(root_lo);
  }
  {
    UpwardRounding up;
    root_hi = std::sqrt(static_cast<double>(d));
    detail::rounding_barrier(root_hi);
    s.hi = 1.0 / root_lo;
    detail::rounding_barrier(s.hi);
  }
  {
    DownwardRounding down;
    s.lo = 1.0 / root_hi;
    detail::rounding_barrier(s.lo);
  }
  return s;
}

BoundsMatrix scale_bounds(const BoundsMatrix& S, const ScaleBounds& scale) {
  BoundsMatrix out;
  // x s over s in [lo, hi] with lo > 0: largest at hi when x >= 0, at lo when x < 0.
  {
    UpwardRounding up;
    out.hi = (S.hi.array() >= 0).select(S.hi.array() * scale.hi, S.hi.array() * scale.lo).matrix();
    detail::rounding_barrier(out.hi);
  }
  {
    DownwardRounding down;
    out.lo = (S.lo.array() >= 0).select(S.lo.array() * scale.lo, S.lo.array() * scale.hi).matrix();
    detail::rounding_barrier(out.lo);
  }
  return out;
}

BoundsMatrix certified_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                 const ScaleBounds& scale, const Mask* mask) {
  if (Q.rows() < 1 || K.rows() < 1 || Q.cols() < 1 || V.cols() < 1)
    throw input_error("attention: Q is " + shape(Q) + ", K " + shape(K) + ", V " + shape(V) +
                      "; every one needs at least one row and one column");
  if (K.cols() != Q.cols())
    throw input_error("attention: Q is " + shape(Q) + " but K is " + shape(K) + " (their columns must agree)", "K");
  if (V.rows() != K.rows())
    throw input_error("attention: K is " + shape(K) + " but V is " + shape(V) + " (one row of V per key)", "V");
  require_finite(Q, "Q");
  require_finite(K, "K");
  require_finite(V, "V");
  if (!(scale.lo > 0 && scale.lo <= scale.hi && std::isfinite(scale.hi)))
    throw input_error("attention: the scale bounds must satisfy 0 < lo <= hi < inf");
  BoundsMatrix S = scale_bounds(certified_product_bounds(Q, Eigen::MatrixXd(K.transpose())), scale);
  if (mask) {
    if (Q.rows() != K.rows())
      throw input_error("attention: a mask needs as many queries as keys (Q has " + std::to_string(Q.rows()) +
                        " rows, K " + std::to_string(K.rows()) + ")");
    S = certified_softmax_bounds(S, *mask);
  } else {
    S = certified_softmax_bounds(S);
  }
  return certified_product_bounds(to_ball(S), V);
}

}  // namespace attnrank
