// The variants' changes to a head's scores (attnrank/attention/score_modifiers.hpp).
#include <attnrank/attention/score_modifiers.hpp>

#include <attnrank/attention/detail/score_tile.hpp>

#include <attnrank/numbers/bands.hpp>
#include <attnrank/numbers/certified_tanh.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace attnrank {

using Eigen::Index;

namespace {
/// [lo, hi] holding x f for every x in [x_lo, x_hi] and f in [f_lo, f_hi], 0 <= f_lo: each end one
/// product of ends. Call in upward rounding (the lower end is -((-x_lo) f), rounded up).
inline void times_nonnegative(double x_lo, double x_hi, double f_lo, double f_hi, double& lo, double& hi) {
  const double neg_lo = -x_lo;
  hi = x_hi >= 0 ? x_hi * f_hi : x_hi * f_lo;
  lo = -(neg_lo >= 0 ? neg_lo * f_hi : neg_lo * f_lo);
}
}  // namespace

void validate(const ScoreModifiers& m) {
  if (!(m.softcap >= 0 && std::isfinite(m.softcap)))
    throw input_error("softcap " + shortest_decimal(m.softcap) + " is not a positive finite number (0: no softcap)",
                      "softcap");
  if (m.alibi_slope && !std::isfinite(*m.alibi_slope))
    throw input_error("ALiBi slope " + shortest_decimal(*m.alibi_slope) + " is not finite");
  if (m.sink && !std::isfinite(*m.sink))
    throw input_error("sink logit " + shortest_decimal(*m.sink) + " is not finite");
  if (m.keep) {
    if (!(m.dropout_p >= 0 && m.dropout_p < 1))
      throw input_error("dropout_p " + shortest_decimal(m.dropout_p) + " is not in [0, 1)");
    for (Index j = 0; j < m.keep->cols(); ++j)
      for (Index i = 0; i < m.keep->rows(); ++i)
        if ((*m.keep)(i, j) != 0 && (*m.keep)(i, j) != 1)
          throw input_error("dropout keep-mask entry [" + std::to_string(i) + ", " + std::to_string(j) +
                            "] (0-based) is " + shortest_decimal((*m.keep)(i, j)) + ", not 0 (dropped) or 1 (kept)");
  }
  if (m.bias && !m.bias->allFinite())
    for (Index j = 0; j < m.bias->cols(); ++j)
      for (Index i = 0; i < m.bias->rows(); ++i)
        if (!std::isfinite((*m.bias)(i, j)))
          throw input_error("bias entry [" + std::to_string(i) + ", " + std::to_string(j) + "] (0-based) is " +
                            shortest_decimal((*m.bias)(i, j)) + " (a -inf entry is a masked key: give it as the mask)");
}

BoundsMatrix dropout_bounds(const BoundsMatrix& X, const ScoreModifiers& m, Index first_row) {
  const Eigen::MatrixXd& Z = *m.keep;
  const Index rows = X.lo.rows(), cols = X.lo.cols();
  if (first_row < 0 || first_row + rows > Z.rows() || Z.cols() != cols)
    throw input_error("the dropout keep-mask is " + std::to_string(Z.rows()) + " x " + std::to_string(Z.cols()) +
                      " but the weights are " + std::to_string(first_row + rows) + " x " + std::to_string(cols));
  BoundsMatrix out{Eigen::MatrixXd(rows, cols), Eigen::MatrixXd(rows, cols)};
  UpwardRounding up;
  // 1 / (1 - p) in [k_lo, k_hi]: 1 - p rounded each way, then the quotients outward.
  const double one_minus_hi = 1.0 - m.dropout_p, one_minus_lo = -(m.dropout_p - 1.0);
  const double k_hi = 1.0 / one_minus_lo, k_lo = -((-1.0) / one_minus_hi);
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i) {
      if (Z(first_row + i, j) == 0) {
        out.lo(i, j) = out.hi(i, j) = 0;
        continue;
      }
      times_nonnegative(X.lo(i, j), X.hi(i, j), k_lo, k_hi, out.lo(i, j), out.hi(i, j));
    }
  detail::rounding_barrier(out.hi);
  detail::rounding_barrier(out.lo);
  unbounded_where_nan(out);
  return out;
}

void modify_score_bounds(BoundsMatrix& S, const ScoreModifiers& m, Index first_row, Index queries,
                         BoundsMatrix* tanh_of_capped) {
  const Index rows = S.lo.rows(), keys = S.lo.cols();
  if (m.bias && (first_row < 0 || first_row + rows > m.bias->rows() || m.bias->cols() != keys))
    throw input_error("the bias is " + std::to_string(m.bias->rows()) + " x " + std::to_string(m.bias->cols()) +
                      " but the scores are " + std::to_string(queries) + " x " + std::to_string(keys) +
                      " (one row per query, one column per key)");
  if (tanh_of_capped && m.softcap > 0) *tanh_of_capped = {Eigen::MatrixXd(rows, keys), Eigen::MatrixXd(rows, keys)};
  const bool keep_tanh = tanh_of_capped && m.softcap > 0;
  detail::modify_score_tile(S.lo.data(), S.hi.data(), rows, keys, m, first_row, 0, queries, keys,
                            keep_tanh ? tanh_of_capped->lo.data() : nullptr,
                            keep_tanh ? tanh_of_capped->hi.data() : nullptr);
  unbounded_where_nan(S);
}

namespace detail {

void modify_score_tile(double* lo, double* hi, Index rows, Index cols, const ScoreModifiers& m, Index first_row,
                       Index first_col, Index queries, Index keys, double* tanh_lo, double* tanh_hi) {
  const Index n = rows * cols;
  Eigen::Map<Eigen::ArrayXd> L(lo, n), H(hi, n);
  const auto barrier = [&] { asm volatile("" : : "g"(lo), "g"(hi) : "memory"); };
  if (m.softcap > 0) {
    // x / c outward, tanh bounds, c t outward, in place (the tanh bounds kept when asked).
    const double c = m.softcap;
    {
      UpwardRounding up;
      H = H / c;
      L = -((-L) / c);
      barrier();
    }
    tanh_bounds(lo, hi, lo, hi, static_cast<std::size_t>(n));
    if (tanh_lo) Eigen::Map<Eigen::ArrayXd>(tanh_lo, n) = L;
    if (tanh_hi) Eigen::Map<Eigen::ArrayXd>(tanh_hi, n) = H;
    {
      UpwardRounding up;
      H = H * c;
      L = -((-L) * c);
      barrier();
    }
  }
  if (m.alibi_slope) {
    const double slope = *m.alibi_slope;
    const Index offset = m.alignment == MaskAlignment::bottom_right ? keys - queries : 0;
    UpwardRounding up;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        const double distance = static_cast<double>(std::abs(first_row + i + offset - (first_col + j)));  // exact
        // x - slope d, upward: the upper end adds (-slope) d rounded up; the lower end is
        // -((-x) + slope d), the sum rounded up.
        double& h = hi[j * rows + i];
        double& l = lo[j * rows + i];
        h = h + (-slope) * distance;
        l = -((-l) + slope * distance);
      }
    barrier();
  }
  if (m.bias) {
    UpwardRounding up;
    for (Index j = 0; j < cols; ++j) {
      const double* b = m.bias->col(first_col + j).data() + first_row;
      for (Index i = 0; i < rows; ++i) {
        hi[j * rows + i] = hi[j * rows + i] + b[i];
        lo[j * rows + i] = -((-lo[j * rows + i]) - b[i]);
      }
    }
    barrier();
  }
}

}  // namespace detail

}  // namespace attnrank

namespace attnrank {

BoundsMatrix times_softcap_derivative(const BoundsMatrix& g, const BoundsMatrix& T) {
  BoundsMatrix out{Eigen::MatrixXd(g.lo.rows(), g.lo.cols()), Eigen::MatrixXd(g.lo.rows(), g.lo.cols())};
  UpwardRounding up;
  for (Index j = 0; j < g.lo.cols(); ++j)
    for (Index i = 0; i < g.lo.rows(); ++i) {
      const double tl = std::max(T.lo(i, j), -1.0), th = std::min(T.hi(i, j), 1.0);
      // f = 1 - t^2 in [f_lo, f_hi]: the largest square rounded up, the smallest rounded down.
      const double largest_square = std::max(tl * tl, th * th);
      const double smallest_square = tl > 0 ? -((-tl) * tl) : th < 0 ? -((-th) * th) : 0.0;
      const double f_lo = std::max(0.0, -(largest_square - 1.0));
      const double f_hi = std::min(1.0, 1.0 - smallest_square);
      times_nonnegative(g.lo(i, j), g.hi(i, j), f_lo, f_hi, out.lo(i, j), out.hi(i, j));
    }
  detail::rounding_barrier(out.hi);
  detail::rounding_barrier(out.lo);
  unbounded_where_nan(out);
  return out;
}

}  // namespace attnrank
