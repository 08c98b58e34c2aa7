#pragma once
// Matrices with known structure and their closed forms, the oracles the general
// algorithms are tested against (and the form the tutorial's log A takes).
//
// a I + b J (J the all-ones matrix) has eigenvalues a + n b (eigenvector 1) and a
// (multiplicity n - 1, on the vectors summing to 0), so
//     det(a I + b J) = a^(n-1) (a + n b),
//     rank(a I + b J) = n           if a != 0 and a + n b != 0,
//                       n - 1       if a != 0 and a + n b == 0,
//                       1           if a == 0 and b != 0 (n >= 1), 0 if both are 0.

#include <attnrank/numbers/tiers.hpp>

namespace attnrank {

/// The n x n matrix a I + b J.
template <class T>
Matrix<T> scaled_identity_plus_ones(const T& a, const T& b, Eigen::Index n) {
  Matrix<T> M = Matrix<T>::Constant(n, n, b);
  for (Eigen::Index i = 0; i < n; ++i) M(i, i) = a + b;
  return M;
}

/// det(a I + b J) = a^(n-1) (a + n b), for any ring-like scalar (exact or interval).
template <class T>
T det_scaled_identity_plus_ones(const T& a, const T& b, Eigen::Index n) {
  if (n == 0) return T(1);
  T p = T(1);
  for (Eigen::Index i = 0; i + 1 < n; ++i) p *= a;
  T last = a + T(static_cast<long>(n)) * b;
  return T(p * last);
}

/// rank(a I + b J) from the eigenvalues above (exact scalars only).
inline Eigen::Index rank_scaled_identity_plus_ones(const Rational& a, const Rational& b, Eigen::Index n) {
  if (n == 0) return 0;
  if (a == 0) return b == 0 ? 0 : 1;
  return (a + Rational(n) * b == 0) ? n - 1 : n;
}

}  // namespace attnrank
