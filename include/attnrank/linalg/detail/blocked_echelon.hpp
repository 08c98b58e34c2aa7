#pragma once
// Row echelon form modulo a prime, blocked: the same ModEchelon as
// echelon_mod_unblocked (identical pivot rows, pivot columns and determinant,
// since both make the same choices on the same residues), with most of the
// work in double GEMMs on exact integers.
//
// Columns are taken in panels of b. A panel is eliminated entry by entry, its
// multipliers kept in place of the zeros they create; the columns to its right
// then get U12 = L11^-1 A12 and A22 - L21 U12 in one GEMM. Every sum of up to b
// products of residues stays below 2^53 (b (p - 1)^2 + p < 2^53), so the GEMM
// and the triangular solve are exact in any summation order and are reduced
// mod p once per panel instead of once per pivot.

#include <attnrank/linalg/detail/modular.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <utility>

namespace attnrank::detail {

/// The widest panel for which b (p - 1)^2 + p < 2^53, at most 64: sums of b
/// products of residues are then exact integers in a double. 0 or 1 means p is
/// too large for delayed reduction (primes below 2^23 give 64).
inline Eigen::Index echelon_panel_width(const Modulus& m) {
  const double limit = 9007199254740992.0;  // 2^53
  const double q = (m.p - 1) * (m.p - 1);
  return static_cast<Eigen::Index>(std::min(64.0, std::floor((limit - m.p) / std::max(q, 1.0)) - 1));
}

inline ModEchelon echelon_mod(ModMatrix M, const Modulus& m) {
  using Eigen::Index;
  const Index b = echelon_panel_width(m);
  if (b < 8 || M.cols < 2 * b || M.rows < 2 * b) return echelon_mod_unblocked(std::move(M), m);

  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Block = Eigen::Map<RowMajor, 0, Eigen::OuterStride<>>;
  ModEchelon out;
  PivotRows rows(M.rows);
  Index r = 0;  // the next pivot row
  std::vector<Index> panel_pivots;
  RowMajor L21;
  for (Index c0 = 0; c0 < M.cols && r < M.rows; c0 += b) {
    const Index c1 = std::min(c0 + b, M.cols);
    // The panel, entry by entry: the same pivots as the unblocked elimination.
    panel_pivots.clear();
    Index k = 0;
    for (Index c = c0; c < c1 && r + k < M.rows; ++c) {
      const Index top = r + k;
      double inv = 0;
      if (!rows.take(M, m, top, c, inv)) continue;  // whole rows move: multipliers and trailing columns too
      const double* pr = M.row(top);
      for (Index i = top + 1; i < M.rows; ++i) {
        double* ri = M.row(i);
        if (ri[c] == 0) continue;  // multiplier 0, already in place
        const double f = m.mul(ri[c], inv);
        const double g = m.p - f;  // ri -= f * pr within the panel
        for (Index j = c + 1; j < c1; ++j) ri[j] = m.reduce(ri[j] + g * pr[j]);
        ri[c] = f;  // the multiplier, for the columns right of the panel
      }
      out.pivot_rows.push_back(rows.origin[static_cast<std::size_t>(top)]);
      out.pivot_cols.push_back(c);
      panel_pivots.push_back(c);
      ++k;
    }
    const Index width = M.cols - c1;
    if (k == 0 || width == 0) {
      r += k;
      continue;
    }
    // U12 = L11^-1 A12, row by row: row t less its multipliers times the rows above.
    for (Index t = 1; t < k; ++t) {
      double* ut = M.row(r + t) + c1;
      for (Index s = 0; s < t; ++s) {
        const double l = M(r + t, panel_pivots[static_cast<std::size_t>(s)]);
        if (l == 0) continue;
        const double* us = M.row(r + s) + c1;
        for (Index j = 0; j < width; ++j) ut[j] -= l * us[j];  // |sum| < t (p - 1)^2 + p: exact
      }
      for (Index j = 0; j < width; ++j) ut[j] = m.reduce(ut[j]);
    }
    // A22 -= L21 U12: one exact GEMM, one reduction.
    const Index below = M.rows - r - k;
    if (below > 0) {
      L21.resize(below, k);
      for (Index i = 0; i < below; ++i)
        for (Index s = 0; s < k; ++s) L21(i, s) = M(r + k + i, panel_pivots[static_cast<std::size_t>(s)]);
      Block A22(M.row(r + k) + c1, below, width, Eigen::OuterStride<>(M.cols));
      const Block U12(M.row(r) + c1, k, width, Eigen::OuterStride<>(M.cols));
      A22.noalias() -= L21 * U12;
      for (Index i = 0; i < below; ++i) {
        double* ri = M.row(r + k + i) + c1;
        for (Index j = 0; j < width; ++j) ri[j] = m.reduce(ri[j]);
      }
    }
    r += k;
  }
  out.det = (M.rows == M.cols && r == M.rows) ? rows.det : 0;
  return out;
}

}  // namespace attnrank::detail
