#pragma once
// Generators and containment checks shared by the tests of one attention head's
// enclosures (forward, backward, variants): heads with N_q != N_k and masks of every
// kind, magnitudes from 2^-1074 to DBL_MAX/2, and "a double band contains an MPFI
// enclosure" up to one ulp of the band's ends.
#include "mask_support.hpp"
#include "support.hpp"

#include <attnrank/attention/detail/interval_attention.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/numbers/bands.hpp>

#include <cfloat>
#include <cmath>
#include <optional>

namespace attnrank::test {

inline constexpr double u = 0x1p-53;

/// Entries c * (integer in [-1000, 1000]) / 1000, or with c = 0 exact subnormals k 2^-1074.
inline Eigen::MatrixXd gen_entries(Eigen::Index rows, Eigen::Index cols, double c) {
  Eigen::MatrixXd M(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j)
      M(i, j) = c == 0 ? *rc::gen::inRange(-1000, 1001) * 0x1p-1074 : c * (*rc::gen::inRange(-1000, 1001) / 1000.0);
  return M;
}

/// Magnitudes of V and dO from subnormal to near overflow.
inline double gen_magnitude() { return *rc::gen::element(0.0, 1e-300, 1e-5, 1.0, 3.0, 1e150, 1e300, DBL_MAX / 2); }

inline bool inside(const Interval& x, double lo, double hi) {
  const double l = lower_bound(x).convert_to<double>(), h = upper_bound(x).convert_to<double>();
  return std::nextafter(lo, -INFINITY) <= h && l <= std::nextafter(hi, INFINITY);
}

inline bool contains_all(const BoundsMatrix& B, const Matrix<Interval>& E) {
  if (B.lo.rows() != E.rows() || B.lo.cols() != E.cols()) return false;
  for (Eigen::Index i = 0; i < E.rows(); ++i)
    for (Eigen::Index j = 0; j < E.cols(); ++j)
      if (!inside(E(i, j), B.lo(i, j), B.hi(i, j))) return false;
  return true;
}

inline bool all_bands(const BoundsMatrix& B) {
  for (Eigen::Index i = 0; i < B.lo.size(); ++i)
    if (!is_band(B.lo.data()[i], B.hi.data()[i])) return false;
  return true;
}

inline Matrix<Real> reals(const Eigen::MatrixXd& M) { return M.cast<Real>(); }

/// sum over entries of dO o softmax(s Q K^T) V, in MPFR at the precision in force.
inline Real contracted_forward(const Matrix<Real>& Q, const Matrix<Real>& K, const Matrix<Real>& V, const Matrix<Real>& dO,
                        const Real& s, const Mask* mask) {
  Matrix<Real> S = multiply_transposed(Q, K);
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < S.cols(); ++j) S(i, j) *= s;
  const Matrix<Real> O = multiply(mask ? softmax_rows(S, *mask) : softmax_rows(S), V);
  Real sum = 0;
  for (Eigen::Index i = 0; i < O.rows(); ++i)
    for (Eigen::Index j = 0; j < O.cols(); ++j) sum += O(i, j) * dO(i, j);
  return sum;
}

/// A direction for central differences: entries in -3 .. 3, M's shape.
inline Matrix<Real> gen_direction(const Matrix<Real>& M) {
  Matrix<Real> E(M.rows(), M.cols());
  for (auto& x : E.reshaped()) x = Real(*rc::gen::inRange(-3, 4));
  return E;
}

inline Real midpoint(const Interval& x) { return Real(median(x)); }

/// sum of E o G for a direction E and MPFI gradient G (midpoints).
inline Real pairing(const Matrix<Real>& E, const Matrix<Interval>& G) {
  Real sum = 0;
  for (Eigen::Index i = 0; i < E.rows(); ++i)
    for (Eigen::Index j = 0; j < E.cols(); ++j) sum += E(i, j) * midpoint(G(i, j));
  return sum;
}

struct Head {
  Eigen::MatrixXd Q, K, V, dO;
  std::optional<Mask> mask;
  std::optional<double> scale;
  const Mask* mask_ptr() const { return mask ? &*mask : nullptr; }
};

/// FlashAttention's window (left, right) for N_q x N_k in either alignment, or nothing when a
/// query row would be left without a key (FlashAttention's zero rows are refused).
inline std::optional<Mask> gen_window(Eigen::Index nq, Eigen::Index nk) {
  const long left = *rc::gen::inRange(-1, 4), right = *rc::gen::inRange(-1, 3);
  const MaskAlignment a = *rc::gen::element(MaskAlignment::bottom_right, MaskAlignment::top_left);
  try {
    return Mask::window(nq, nk, left, right, a);
  } catch (const input_error&) {
    return std::nullopt;
  }
}

/// N_q, N_k in [1, 8], d, d_v in [1, 4]; masks of every kind when N_q = N_k, windows in both
/// alignments (causal among them) when not.
inline Head gen_head(double q_size, double v_size, double do_size) {
  const int masked = *rc::gen::inRange(0, 3);  // none, any square mask, a window
  const auto nq = *rc::gen::inRange<Eigen::Index>(1, 9);
  const auto nk = masked == 1 ? nq : *rc::gen::inRange<Eigen::Index>(1, 9);
  const auto d = *rc::gen::inRange<Eigen::Index>(1, 5), dv = *rc::gen::inRange<Eigen::Index>(1, 5);
  Head h{gen_entries(nq, d, q_size), gen_entries(nk, d, q_size), gen_entries(nk, dv, v_size),
         gen_entries(nq, dv, do_size), std::nullopt, std::nullopt};
  if (masked == 1) h.mask = test::gen_any_mask(nq);
  if (masked == 2) h.mask = gen_window(nq, nk);
  if (*rc::gen::arbitrary<bool>()) h.scale = *rc::gen::element(0.125, 0.3, 1.0, 2.5);
  return h;
}

/// The MPFI enclosure's midpoint as the nearest double.
inline Eigen::MatrixXd nearest(const Matrix<Interval>& E) {
  Eigen::MatrixXd M(E.rows(), E.cols());
  for (Eigen::Index i = 0; i < E.rows(); ++i)
    for (Eigen::Index j = 0; j < E.cols(); ++j) M(i, j) = midpoint(E(i, j)).convert_to<double>();
  return M;
}

}  // namespace attnrank::test
