#pragma once
// Balanced factors of a truncated SVD: Q = U diag(sqrt(scale s)), K = V diag(sqrt(scale s)),
// so Q K^T = scale U diag(s) V^T, zero-padded to `cols` columns. No error control:
// every witness built from it is certified afterwards, for the factors it returns.

#include <Eigen/Core>

#include <algorithm>
#include <utility>

namespace attnrank::detail {

/// U (n x k'), s (k'), V (n x k') with k' >= min(k', cols); the first
/// min(cols, s.size()) triplets are used, the remaining columns are zero.
template <class Real, class UMatrix, class Values, class VMatrix>
std::pair<Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>, Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>>
balanced_factors(const UMatrix& U, const Values& s, const VMatrix& V, Eigen::Index cols, const Real& scale) {
  using M = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>;
  using std::sqrt;
  const Eigen::Index k = std::min<Eigen::Index>(cols, s.size());
  M Q = M::Zero(U.rows(), cols), K = M::Zero(V.rows(), cols);
  for (Eigen::Index t = 0; t < k; ++t) {
    const Real root = sqrt(Real(s(t) * scale));
    Q.col(t) = U.col(t) * root;
    K.col(t) = V.col(t) * root;
  }
  return {std::move(Q), std::move(K)};
}

}  // namespace attnrank::detail
