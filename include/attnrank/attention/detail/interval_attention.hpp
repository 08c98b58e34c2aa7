#pragma once
// One head's attention and its backward pass in MPFI at the precision in force:
// the fallback of the kernel checks when the double enclosures are too wide.
// Every input double is taken exactly (precision >= 53); every result is an MPFI
// enclosure of the exact value (softmax over the keys a mask allows, masked
// weights exactly 0), by the formulas of attention/certified_gradients.hpp, with a
// variant's score modifiers (attention/score_modifiers.hpp) applied in MPFI (tanh by
// mpfi_tanh).

#include <attnrank/attention/certified_gradients.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <optional>

namespace attnrank::detail {

/// The matrix's doubles as point intervals.
Matrix<Interval> to_intervals(const Eigen::MatrixXd& M);

/// The scale s: exactly the double given, or 1/sqrt(d) enclosed.
Interval interval_scale(const std::optional<double>& scale, Eigen::Index d);

/// softmax(s Q K^T) V enclosed.
Matrix<Interval> interval_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                    const std::optional<double>& scale, const Mask* mask,
                                    const ScoreModifiers& modifiers = {});

/// dq, dk, dv, lse (N_q x 1) and dsink (1 x 1, 0 without a sink) enclosed; empty where not wanted.
struct IntervalGradients {
  Matrix<Interval> dq, dk, dv, lse, dsink;
};
IntervalGradients interval_attention_gradients(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                               const Eigen::MatrixXd& V, const Eigen::MatrixXd& dO,
                                               const std::optional<double>& scale, const Mask* mask,
                                               const GradientsWanted& wanted, const ScoreModifiers& modifiers = {});

}  // namespace attnrank::detail
