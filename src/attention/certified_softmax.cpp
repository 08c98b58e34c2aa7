// Certified softmax in doubles (attnrank/attention/certified_softmax.hpp).
#include <attnrank/attention/certified_softmax.hpp>

#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/numbers/detail/vector_exp.hpp>
#include <attnrank/numbers/scaling.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace attnrank {
namespace {

using Eigen::Index;
using detail::inf;
// Covers exp's absolute error below 2^-1022 (2^-1075); normal, so that no
// operation meets a subnormal operand (each would cost a microcode assist).
constexpr double tiny = 0x1p-1021;

/// Rows first_row .. of the (masked) softmax: S holds those rows of the scores; with a
/// sink, exp(*sink) joins every row's denominator, and with `sink_weight` its own weight
/// exp(sink) / (exp(sink) + sum_j exp(x_ij)) is enclosed there (rows x 1).
BoundsMatrix softmax_bounds(const BoundsMatrix& S, const Mask* mask, Index first_row = 0, const double* sink = nullptr,
                            BoundsMatrix* sink_weight = nullptr) {
  const Index rows = S.lo.rows(), cols = S.lo.cols();
  BoundsMatrix P;
  if (rows == 0 || cols == 0) {
    P.lo = Eigen::MatrixXd::Zero(rows, cols);
    P.hi = Eigen::MatrixXd::Ones(rows, cols);
    if (sink_weight) *sink_weight = {Eigen::MatrixXd::Zero(rows, 1), Eigen::MatrixXd::Ones(rows, 1)};
    return P;
  }
  // Rows with a non-finite bound (or lo > hi) get [0, 1] at the end; the passes
  // below run over every row (whole-matrix array operations: vectorised), their
  // values in such rows discarded.
  // Column by column (the storage order): Eigen's rowwise reductions of a
  // column-major matrix walk it by rows.
  std::vector<char> usable(static_cast<std::size_t>(rows), 1);
  Eigen::VectorXd top = Eigen::VectorXd::Constant(rows, -inf);
  const auto allowed = [mask, first_row](Index i, Index j) { return !mask || mask->allows(first_row + i, j); };
  if (!mask && S.lo.allFinite() && S.hi.allFinite() && (S.lo.array() <= S.hi.array()).all()) {
    for (Index j = 0; j < cols; ++j) top = top.cwiseMax(S.hi.col(j));  // every row usable: vector code
  } else {
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        if (!allowed(i, j)) continue;
        const double lo = S.lo(i, j), hi = S.hi(i, j);
        usable[static_cast<std::size_t>(i)] &= static_cast<char>(std::isfinite(lo) && std::isfinite(hi) && lo <= hi);
        top(i) = std::max(top(i), hi);
      }
  }
  if (sink) top = top.cwiseMax(*sink);  // the sink's exponent <= 0 too
  for (Index i = 0; i < rows; ++i)
    if (!usable[static_cast<std::size_t>(i)]) top(i) = 0;
  // The sink's term exp(sink - top_i) of each row's denominator, enclosed as the others are.
  Eigen::VectorXd sink_lo, sink_hi;
  if (sink) {
    {
      UpwardRounding up;
      sink_hi = (*sink - top.array()).matrix();
      sink_lo = -((top.array() - *sink)).matrix();
      detail::rounding_barrier(sink_hi);
      detail::rounding_barrier(sink_lo);
    }
    {
      RoundingScope<FE_TONEAREST> nearest;
      detail::exp_in_place(sink_lo.data(), static_cast<std::size_t>(rows));
      detail::exp_in_place(sink_hi.data(), static_cast<std::size_t>(rows));
      detail::rounding_barrier(sink_lo);
      detail::rounding_barrier(sink_hi);
    }
  }
  const auto row_sums = [&](const Eigen::MatrixXd& M) {
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(rows);
    for (Index j = 0; j < cols; ++j) sum += M.col(j);
    return sum;
  };
  // P.lo and P.hi first hold the shifted exponents, then their exps, then the quotients.
  {
    DownwardRounding down;
    P.lo = (S.lo.array().colwise() - top.array()).matrix();
    detail::rounding_barrier(P.lo);
  }
  {
    UpwardRounding up;
    P.hi = (S.hi.array().colwise() - top.array()).matrix();
    detail::rounding_barrier(P.hi);
  }
  // Narrow score intervals (every width w = hi - lo of the shifted exponents below
  // 2^-20, the usual case) need one exp pass, not two: exp(lo) = exp(hi) exp(-w)
  // >= exp(hi) (1 - w), by the convexity of exp. Wider ones get their own exp.
  bool narrow = true;
  {
    UpwardRounding up;
    const Eigen::MatrixXd w = P.hi - P.lo;  // upward: at least the true width
    detail::rounding_barrier(w);
    const bool all_usable = std::all_of(usable.begin(), usable.end(), [](char c) { return c != 0; });
    if (!mask && all_usable) narrow = (w.array() <= 0x1p-20).all();  // vector code; NaN is not narrow
    else
      for (Index j = 0; j < cols && narrow; ++j)
        for (Index i = 0; i < rows; ++i)
          if (usable[static_cast<std::size_t>(i)] && allowed(i, j) && !(w(i, j) <= 0x1p-20)) {
            narrow = false;
            break;
          }
    if (narrow) {
      P.lo = w;  // from here P.lo holds the widths until the exps of P.hi are known
      detail::rounding_barrier(P.lo);
    }
  }
  if (mask)  // exp(-inf) = 0 exactly (numbers/detail/vector_exp.hpp); a masked width is 0
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i)
        if (!allowed(i, j)) {
          P.hi(i, j) = -inf;
          P.lo(i, j) = narrow ? 0.0 : -inf;
        }
  {
    RoundingScope<FE_TONEAREST> nearest;  // exp_double's error bound holds in round-to-nearest
    if (!narrow) detail::exp_in_place(P.lo.data(), static_cast<std::size_t>(P.lo.size()));
    detail::exp_in_place(P.hi.data(), static_cast<std::size_t>(P.hi.size()));
    detail::rounding_barrier(P.lo);
    detail::rounding_barrier(P.hi);
  }
  constexpr double shrink = 1 - 0x1p-50, grow = 1 + 0x1p-50;  // 8u: more than 4u / (1 - 4u)
  Eigen::VectorXd sum_lo, sum_hi;
  {
    DownwardRounding down;
    if (narrow)  // exp(lo) >= (lower bound of exp(hi)) x (1 - w), every operation rounded down
      P.lo = ((P.hi.array() * shrink - tiny).max(0.0) * (1.0 - P.lo.array())).matrix();
    else
      P.lo = (P.lo.array() * shrink - tiny).max(0.0).matrix();
    sum_lo = row_sums(P.lo);
    if (sink) sum_lo += (sink_lo.array() * shrink - tiny).max(0.0).matrix();
    detail::rounding_barrier(P.lo);
    detail::rounding_barrier(sum_lo);
  }
  {
    UpwardRounding up;
    P.hi = (P.hi.array() * grow + tiny).matrix();
    if (mask)  // a masked term is exactly 0, not [0, tiny]
      for (Index j = 0; j < cols; ++j)
        for (Index i = 0; i < rows; ++i)
          if (!allowed(i, j)) P.hi(i, j) = 0;
    sum_hi = row_sums(P.hi);
    if (sink) sum_hi += (sink_hi.array() * grow + tiny).matrix();
    detail::rounding_barrier(P.hi);
    detail::rounding_barrier(sum_hi);
  }
  if (sink && sink_weight) {  // the sink's term over the row's sums, as every key's
    {
      DownwardRounding down;
      sink_weight->lo = ((sink_lo.array() * shrink - tiny).max(0.0) / sum_hi.array()).matrix();
      detail::rounding_barrier(sink_weight->lo);
    }
    {
      UpwardRounding up;
      sink_weight->hi = ((sink_hi.array() * grow + tiny) / sum_lo.array()).min(1.0).matrix();
      detail::rounding_barrier(sink_weight->hi);
    }
    for (Index i = 0; i < rows; ++i)
      if (!usable[static_cast<std::size_t>(i)]) {
        sink_weight->lo(i, 0) = 0;
        sink_weight->hi(i, 0) = 1;
      }
  }
  {
    DownwardRounding down;
    P.lo.array().colwise() /= sum_hi.array();
    detail::rounding_barrier(P.lo);
  }
  {
    UpwardRounding up;
    // sum_lo = 0 (every lower end underflowed) gives +inf, then 1; and 0 / 0 = NaN
    // at a masked entry (and at both ends in a row without a key), which is exactly 0.
    P.hi = (P.hi.array().colwise() / sum_lo.array()).min(1.0).matrix();
    if (mask)
      for (Index j = 0; j < cols; ++j)
        for (Index i = 0; i < rows; ++i)
          if (!allowed(i, j)) P.hi(i, j) = P.lo(i, j) = 0;
    detail::rounding_barrier(P.hi);
    detail::rounding_barrier(P.lo);
  }
  for (Index i = 0; i < rows; ++i)
    if (!usable[static_cast<std::size_t>(i)]) {
      P.lo.row(i).setZero();
      P.hi.row(i).setOnes();
      if (mask)
        for (Index j = 0; j < cols; ++j)
          if (!allowed(i, j)) P.hi(i, j) = 0;
    }
  return P;
}

void require_rows_fit(const BoundsMatrix& S, const Mask& mask, Index first_row) {
  if (first_row < 0 || first_row + S.lo.rows() > mask.size() || S.lo.cols() != mask.cols() ||
      S.hi.rows() != S.lo.rows() || S.hi.cols() != S.lo.cols())
    throw input_error("masked softmax: rows " + std::to_string(first_row) + " .. " +
                      std::to_string(first_row + S.lo.rows() - 1) + " of " + std::to_string(S.lo.cols()) +
                      " columns do not fit a mask of " + std::to_string(mask.size()) + " x " + std::to_string(mask.cols()));
}

}  // namespace

BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S) { return softmax_bounds(S, nullptr); }

BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S, const Mask& mask) {
  mask.require_size(S.lo.rows(), "the score bounds");  // all of the mask's rows
  return certified_softmax_bounds(S, mask, 0);
}

BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S, const Mask& mask, Index first_row) {
  require_rows_fit(S, mask, first_row);
  return softmax_bounds(S, &mask, first_row);
}

BoundsMatrix certified_softmax_bounds(const BoundsMatrix& S, const Mask* mask, Index first_row, double sink,
                                      BoundsMatrix* sink_weight) {
  if (!std::isfinite(sink)) throw input_error("softmax with a sink: the sink logit is not finite");
  if (mask) require_rows_fit(S, *mask, first_row);
  return softmax_bounds(S, mask, first_row, &sink, sink_weight);
}

BoundsMatrix certified_scaled_scores(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K) {
  const BoundsMatrix S = certified_product_bounds(Q, Eigen::MatrixXd(K.transpose()));
  if (Q.cols() == 1) return S;
  return scale_bounds(S, ScaleBounds::inverse_sqrt(Q.cols()));
}

double max_abs_difference_upper(const BoundsMatrix& P, const BoundsMatrix& T) {
  // Whole-matrix expressions, no temporaries: each difference rounds upward.
  UpwardRounding up;
  const auto above = P.hi - T.lo, below = T.hi - P.lo;
  if (above.hasNaN() || below.hasNaN()) return inf;
  double worst = std::max({0.0, above.maxCoeff(), below.maxCoeff()});
  detail::rounding_barrier(worst);
  return std::isfinite(worst) ? worst : inf;
}

double max_softmax_distance_upper(const BoundsMatrix& S, const Mask* mask, const BoundsMatrix& T) {
  const Index n = S.lo.rows(), m = S.lo.cols();
  if (S.hi.rows() != n || S.hi.cols() != m || T.lo.rows() != n || T.lo.cols() != m || T.hi.rows() != n ||
      T.hi.cols() != m)
    throw input_error("softmax distance: the score bounds are " + std::to_string(n) + " x " + std::to_string(m) +
                      ", the target's " + std::to_string(T.lo.rows()) + " x " + std::to_string(T.lo.cols()));
  if (mask) require_rows_fit(S, *mask, 0);
  constexpr Index block = 128;  // rows per block: fixed, so the bound is the same on any number of cores
  const Index blocks = (n + block - 1) / block;
  std::vector<double> worst(static_cast<std::size_t>(std::max<Index>(blocks, 1)), 0.0);
  // for_row_blocks counts MPFR operations (~50 ns); an entry's bounds cost ~10 ns.
  detail::for_row_blocks(static_cast<long>(blocks), static_cast<double>(n) * static_cast<double>(m) / 5,
                         [&](long begin, long end) {
                           for (long k = begin; k < end; ++k) {
                             const Index first = k * block, rows = std::min(block, n - first);
                             const BoundsMatrix Sk{S.lo.middleRows(first, rows), S.hi.middleRows(first, rows)};
                             const BoundsMatrix Tk{T.lo.middleRows(first, rows), T.hi.middleRows(first, rows)};
                             worst[static_cast<std::size_t>(k)] =
                                 max_abs_difference_upper(softmax_bounds(Sk, mask, first), Tk);
                           }
                         });
  return *std::max_element(worst.begin(), worst.end());
}

}  // namespace attnrank
