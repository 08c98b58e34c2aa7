#pragma once
// The variants' changes to one head's scores, written once for the forward and the
// backward enclosures. FlashAttention's definitions and order, for the scaled
// scores x_ij = s q_i . k_j of a head with N_q queries and N_k keys:
//   softcap  x -> c tanh(x / c)                    (Gemma 2; FlashAttention's softcap = c > 0)
//   ALiBi    x -> x - slope |i + off - j|           off = N_k - N_q (bottom-right, FlashAttention)
//                                                  or 0 (top-left, PyTorch's alignment)
//   bias     x -> x + b_ij                         an additive float bias (PyTorch's float attn_mask;
//                                                  its -inf entries are the caller's mask)
//   mask     masked keys get weight exactly 0      (attention/mask.hpp)
//   sink     p_ij = exp(x_ij) / (exp(sink) + sum_j exp(x_ij))   (a logit in the denominator
//            only: the weights of a row sum to less than 1, and no output row reads it)
//   dropout  O = (P o Z) V / (1 - p) for a known keep-mask Z (1: kept) and probability p,
//            FlashAttention's: the softmax (and lse) before dropout, the weights V reads after;
//            backward dV = (P o Z)^T dO / (1 - p), dP = (dO V^T) o Z / (1 - p), D = rowsum(dO o O)
// Softcap comes before the bias, as in FlashAttention. FlashAttention's causal ALiBi kernel
// adds slope (j - N_k + 1) instead; the two differ by a constant per row, which softmax
// ignores (not with a sink: the definition above is the one checked).
//
// Guarantee: modify_score_bounds turns bounds lo <= x <= hi of the scaled scores into
// bounds of the modified scores, every end rounded outward (tanh by
// numbers/certified_tanh.hpp, never libm's), and keeps the bounds of tanh(x / c) the
// backward pass needs (d/dx c tanh(x / c) = 1 - tanh^2(x / c)).

#include <attnrank/attention/mask.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <optional>

namespace attnrank {

/// One head's variant: what changes its scores and its softmax.
struct ScoreModifiers {
  double softcap = 0;                 ///< c > 0 caps the scores at c tanh(x / c); 0: no cap
  std::optional<double> alibi_slope;  ///< ALiBi's slope (finite); none: no bias
  MaskAlignment alignment = MaskAlignment::bottom_right;  ///< where ALiBi's distance is measured from
  std::optional<double> sink;         ///< the sink logit (finite); none: no sink
  const Eigen::MatrixXd* bias = nullptr;  ///< N_q x N_k, finite; nullptr: none
  const Eigen::MatrixXd* keep = nullptr;  ///< dropout's keep-mask Z, N_q x N_k of 0s and 1s; nullptr: none
  double dropout_p = 0;                   ///< with keep: the dropout probability, 0 <= p < 1
  bool changes_scores() const { return softcap > 0 || alibi_slope.has_value() || bias != nullptr; }
  bool any() const { return changes_scores() || sink.has_value() || keep != nullptr; }
};

/// input_error naming the value unless softcap is 0 or positive and finite, the slope, the
/// sink and every bias entry are finite, the keep-mask holds only 0 and 1, and 0 <= p < 1.
void validate(const ScoreModifiers& m);

/// Bounds of X o Z / (1 - p) for rows first_row .. of the keep-mask Z = *m.keep (X holds those
/// rows), outward; exactly 0 where Z is 0. input_error when X does not fit Z.
BoundsMatrix dropout_bounds(const BoundsMatrix& X, const ScoreModifiers& m, Eigen::Index first_row);

/// S holds bounds of rows first_row .. of a head's scaled scores (queries rows in all,
/// one column per key). Applies the softcap, then ALiBi and the bias, in place, outward. With
/// `tanh_of_capped` (and a softcap), stores there bounds of tanh(x / c) per entry.
void modify_score_bounds(BoundsMatrix& S, const ScoreModifiers& m, Eigen::Index first_row, Eigen::Index queries,
                         BoundsMatrix* tanh_of_capped = nullptr);

/// Bounds of g o (1 - T^2), for bounds T of tanh values in [-1, 1] and bounds g (same shape),
/// outward: the chain rule through the softcap. An end of g that is infinite where the
/// factor's lower end is 0 leaves that entry unbounded on its side.
BoundsMatrix times_softcap_derivative(const BoundsMatrix& g, const BoundsMatrix& T);

}  // namespace attnrank
