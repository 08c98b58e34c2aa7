#pragma once
// Generators for the rank and determinant tests: integer and rational matrices
// with the structure that breaks rank algorithms on purpose -- built-in rank
// deficiency, zero and repeated rows, rows that are multiples of each other,
// 1 x n and n x 1 shapes, and empty ones.

#include "support.hpp"

#include <cmath>
#include <optional>

#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/linalg/structured_matrices.hpp>

namespace attnrank::test {

/// The exact rational value of every double in D.
inline Matrix<Rational> exact_of(const Eigen::MatrixXd& D) {
  return D.unaryExpr([](double x) { return to_rational(x); });
}

/// Doubles across the whole exponent range, including products that underflow
/// to subnormals and mantissas with up to six significant digits.
inline Eigen::MatrixXd gen_double_matrix(Eigen::Index r, Eigen::Index c) {
  Eigen::MatrixXd m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) {
      const double mant = *rc::gen::inRange(-1000000, 1000001) / 1000.0;
      const int e = *rc::gen::element(0, 0, 0, -40, 40, -1060, 300);  // includes subnormal products
      m(i, j) = std::ldexp(mant, e);
    }
  return m;
}

/// The precisions the certified tests run at.
inline unsigned gen_bits() { return *rc::gen::element(53u, 64u, 128u, 256u); }

/// The n x n Hilbert matrix, exactly.
inline Matrix<Rational> hilbert(Eigen::Index n) { return *builtin_matrix("hilbert:" + std::to_string(n)); }

/// An r x c integer matrix with entries in [-bound, bound].
inline Matrix<Integer> gen_integer_matrix(Eigen::Index r, Eigen::Index c, int bound) {
  Matrix<Integer> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = *rc::gen::inRange(-bound, bound + 1);
  return m;
}

/// A matrix of rank at most k (random k in [0, min(m, n)]), as a product of
/// generated rational factors.
inline Matrix<Rational> gen_low_rank(Eigen::Index m, Eigen::Index n) {
  const auto k = *rc::gen::inRange<Eigen::Index>(0, std::min(m, n) + 1);
  return gen_matrix(m, k) * gen_matrix(k, n);
}

/// Shapes from 0 x 0 to 10 x 10; about half are deliberately rank deficient, and
/// some have a row that is a rational multiple of another.
/// With `least` = 1, never empty: a property that needs entries must not rely on
/// discarding empty draws (at RapidCheck's small sizes every draw is empty).
inline Matrix<Rational> gen_structured_rational_matrix(Eigen::Index least = 0) {
  const auto m = *rc::gen::inRange<Eigen::Index>(least, 11), n = *rc::gen::inRange<Eigen::Index>(least, 11);
  Matrix<Rational> A = *rc::gen::arbitrary<bool>() ? gen_low_rank(m, n) : gen_matrix(m, n);
  // Not on m x 0: Eigen's row() of an empty matrix offsets its null data pointer (UBSan).
  if (m >= 2 && n >= 1 && *rc::gen::arbitrary<bool>()) A.row(m - 1) = A.row(0) * *gen_rational();
  return A;
}

/// The number of eigenvalues of the symmetric H above t, exactly; nothing when a
/// pivot is exactly zero (t is then an eigenvalue of a leading block: no verdict).
inline std::optional<Eigen::Index> eigenvalues_above(Matrix<Rational> H, const Rational& t) {
  const Eigen::Index n = H.rows();
  for (Eigen::Index i = 0; i < n; ++i) H(i, i) -= t;
  Eigen::Index positive = 0;
  for (Eigen::Index p = 0; p < n; ++p) {
    const Rational d = H(p, p);
    if (d == 0) return std::nullopt;
    if (d > 0) ++positive;
    for (Eigen::Index i = p + 1; i < n; ++i) {
      if (H(i, p) == 0) continue;
      const Rational f = H(i, p) / d;
      for (Eigen::Index j = p + 1; j < n; ++j) H(i, j) -= f * H(p, j);
    }
  }
  return positive;
}

/// The smaller Gram matrix of M: its eigenvalues are the squared singular values.
inline Matrix<Rational> gram(const Matrix<Rational>& M) {
  return M.rows() >= M.cols() ? Matrix<Rational>(M.transpose() * M) : Matrix<Rational>(M * M.transpose());
}

template <class M>
bool is_zero(const M& x) {
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j)
      if (x(i, j) != 0) return false;
  return true;
}

}  // namespace attnrank::test
