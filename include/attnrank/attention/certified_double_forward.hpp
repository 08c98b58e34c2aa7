#pragma once
// The fifth tier of the layer: certified, in doubles. Every matrix of the trace
// is a pair of double matrices lo <= M <= hi that encloses the exact real value
// of that step for the given inputs, computed by directed-rounding GEMMs (Rump's
// midpoint-radius products), the certified double softmax
// (attention/certified_softmax.hpp) and no MPFR: a few times the cost of the
// double tier, with widths a small multiple of n u for well-scaled inputs
// (u = 2^-53). docs/tiers.md says why it is a path of its own and not a
// scalar of the tier table.
//
// Inputs are taken exactly: double weights and embeddings as the dyadic
// rationals they store; rational ones (decimals read from text) as the double
// balls that contain them (numbers/balls.hpp's to_ball), so the trace
// encloses the exact layer of the rationals themselves. A bound that overflows
// becomes infinite or NaN, never a wrong finite number: `finite()` says whether
// every output bound is finite, and the CLI prints no digit from any other.

#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/multi_head_attention.hpp>

#include <optional>
#include <vector>

namespace attnrank {

struct CertifiedDoubleTrace {
  struct Head {
    BoundsMatrix Q, K, V;  ///< this head's column slices
    BoundsMatrix scores;   ///< Q_i K_i^T
    BoundsMatrix scaled;   ///< Q_i K_i^T / sqrt(d_k)
    BoundsMatrix A;        ///< softmax of the scaled scores (masked entries exactly 0)
    BoundsMatrix Z;        ///< A_i V_i
    std::optional<Mask> mask;
  };
  AttentionShape shape;
  BoundsMatrix Q, K, V;  ///< full-width projections X W^Q, X W^K, X W^V
  std::vector<Head> heads;
  BoundsMatrix concat, output;

  /// True when every bound of the output is finite (then every bound is).
  bool finite() const;
};

/// The layer on X in the certified double tier, masks as in
/// MultiHeadAttention::forward. Throws input_error as forward does.
CertifiedDoubleTrace certified_double_forward(const MultiHeadAttention<double>& layer, const Eigen::MatrixXd& X,
                                              const std::vector<Mask>& masks = {});

/// The same for exact weights and embeddings, each enclosed in a double ball.
CertifiedDoubleTrace certified_double_forward(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X,
                                              const std::vector<Mask>& masks = {});

}  // namespace attnrank
