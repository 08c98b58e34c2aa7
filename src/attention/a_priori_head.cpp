// One attention head with a priori bounded products, fused (attnrank/attention/detail/a_priori_head.hpp).
#include <attnrank/attention/detail/a_priori_head.hpp>

#include <attnrank/attention/detail/score_tile.hpp>
#include <attnrank/numbers/a_priori_product.hpp>
#include <attnrank/numbers/certified_tanh.hpp>
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/detail/vector_exp.hpp>

#include <bit>
#include <cmath>
#include <vector>

namespace attnrank::detail {
namespace {

using Eigen::Index;

constexpr double tiny = 0x1p-1021;  // covers exp's absolute error below 2^-1022, normal
constexpr double shrink = 1 - 0x1p-50, grow = 1 + 0x1p-50;  // 8u: more than 4u / (1 - 4u)
constexpr double narrow_width = 0x1p-20;  // below it, exp(lo) >= exp(hi) (1 - w) costs less than a second exp
// Columns per tile: three tile buffers of 256 rows stay in L1 between the mode switches.
constexpr Index tile_columns = 4;

/// Keeps the compiler from moving the stores to `p` across a change of rounding mode.
inline void barrier(const double* p) { asm volatile("" : : "g"(p) : "memory"); }

/// The block's rows, in upward rounding: the radius of score (i, j) and its
/// scaled bounds [lo, hi] (lo computed as -((-x) op y), each op rounded up).
struct ScaledScore {
  double lo, hi;
};
[[gnu::always_inline]] inline ScaledScore scaled_score(double c, double ga, double b, double eta, double s_lo,
                                                       double s_hi) {
  const double r = ga * b + eta;
  const double hi = c + r, neg_lo = (-c) + r;  // -neg_lo <= c - r
  // x s over s in [s_lo, s_hi]: the larger product rounded up is the upper end; the
  // lower end is -(the larger of (-lo) s), rounded up.
  const double h1 = hi * s_hi, h2 = hi * s_lo, n1 = neg_lo * s_lo, n2 = neg_lo * s_hi;
  return {-(n1 > n2 ? n1 : n2), h1 > h2 ? h1 : h2};
}

/// In upward rounding: the bounds [lo, hi] of an allowed score shifted by t (hi - t above,
/// -(t - lo) below) and their width; a masked score's are -inf (exp gives exactly 0), width 0.
[[gnu::always_inline]] inline void shifted(double lo, double hi, double t, bool in, double& x_hi, double& x_lo,
                                           double& width) {
  const double h = hi - t, l = -(t - lo);
  x_hi = in ? h : -inf;
  x_lo = in ? l : -inf;
  width = in ? h - l : 0.0;
}

}  // namespace

APrioriHead::APrioriHead(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                         const ScaleBounds& scale, const Mask* mask, const ScoreModifiers& modifiers)
    : Q_(Q),
      KT_(K.transpose()),
      V_(V),
      scale_(scale),
      mask_(mask),
      modifiers_(modifiers),
      q_norms_(row_norms_upper(Q)),
      k_norms_(row_norms_upper(K)),
      v_abs_max_(V.cwiseAbs().colwise().maxCoeff()),
      v_min_(V.colwise().minCoeff()),
      v_max_(V.colwise().maxCoeff()),
      gamma_d_(a_priori_gamma(Q.cols())),
      eta_d_(a_priori_underflow(Q.cols())),
      gamma_n_(a_priori_gamma(K.rows())),
      eta_n_(a_priori_underflow(K.rows())),
      shift_(0.6931471805599453 * static_cast<double>(std::bit_width(static_cast<unsigned long>(K.rows())))) {
  if (modifiers_.keep) throw input_error("the fused forward pass has no dropout (its weights leave V's range)");
  // A row without a key (EmptyRows::zero) or a sink: O is a combination of V's rows and 0.
  if (modifiers_.sink || (mask && mask->first_empty_row() >= 0)) {
    v_min_ = v_min_.cwiseMin(0.0);
    v_max_ = v_max_.cwiseMax(0.0);
  }
}

BoundsMatrix APrioriHead::rows(Index first, Index count) const {
  const Index keys = KT_.cols();
  const Eigen::MatrixXd C = nearest_product(Q_.middleRows(first, count), KT_);
  // Which keys each row may see, column-major like C (only with a mask).
  std::vector<unsigned char> open;
  if (mask_) {
    open.resize(static_cast<std::size_t>(count * keys));
    for (Index j = 0; j < keys; ++j)
      for (Index i = 0; i < count; ++i)
        open[static_cast<std::size_t>(j * count + i)] = mask_->allows(first + i, j) ? 1 : 0;
  }
  const auto allowed = [&](Index j) { return mask_ ? open.data() + j * count : nullptr; };
  const double s_lo = scale_.lo, s_hi = scale_.hi, eta = eta_d_;

  // A score that overflowed (or is NaN) is no midpoint: its row is not bounded here.
  std::vector<unsigned char> unbounded(static_cast<std::size_t>(count), 0);
  if (!C.allFinite())
    for (Index j = 0; j < keys; ++j) {
      const unsigned char* a = allowed(j);
      for (Index i = 0; i < count; ++i)
        if (!std::isfinite(C(i, j)) && (!a || a[i])) unbounded[static_cast<std::size_t>(i)] = 1;
    }

  // Per row: gamma_d ||q_i||, the shift, the sums of e_hi and -e_lo, of the midpoints and the radii.
  std::vector<double> ga(static_cast<std::size_t>(count)), top(static_cast<std::size_t>(count), -inf);
  std::vector<double> sum_hi(static_cast<std::size_t>(count), 0.0), neg_sum_lo(static_cast<std::size_t>(count), 0.0);
  std::vector<double> mid_sum(static_cast<std::size_t>(count), 0.0), rad_sum(static_cast<std::size_t>(count), 0.0);
  Eigen::MatrixXd M(count, keys);  // midpoints of the e-balls
  const std::size_t tile_size = static_cast<std::size_t>(count * tile_columns);
  std::vector<double> x_hi(tile_size), x_lo(tile_size), width(tile_size);

  const bool modified = modifiers_.changes_scores();
  const Index queries = Q_.rows();
  // ALiBi's and the bias's term at (i, j), rounded up (an upper end's share).
  const auto added_upper = [&](Index i, Index j) {
    double t = 0;
    if (modifiers_.alibi_slope) {
      const Index offset = modifiers_.alignment == MaskAlignment::bottom_right ? keys - queries : 0;
      t = (-*modifiers_.alibi_slope) * static_cast<double>(std::abs(first + i + offset - j));
    }
    if (modifiers_.bias) t = t + (*modifiers_.bias)(first + i, j);
    return t;
  };
  {  // The shift: m_i = max_j hi_ij over the allowed keys, of the modified scores.
    std::vector<double> added(static_cast<std::size_t>(count), -inf);  // with a softcap: max_j of ALiBi + bias
    {
      ThreadRounding<FE_UPWARD> up;
      for (Index i = 0; i < count; ++i) ga[static_cast<std::size_t>(i)] = q_norms_(first + i) * gamma_d_;
      for (Index j = 0; j < keys; ++j) {
        const double* c = C.col(j).data();
        const unsigned char* a = allowed(j);
        const double b = k_norms_(j);
        for (Index i = 0; i < count; ++i) {
          double h = scaled_score(c[i], ga[static_cast<std::size_t>(i)], b, eta, s_lo, s_hi).hi;
          if (a && !a[i]) h = -inf;
          double& t = top[static_cast<std::size_t>(i)];
          if (modified && h != -inf) {
            const double extra = modifiers_.alibi_slope || modifiers_.bias ? added_upper(i, j) : 0.0;
            if (modifiers_.softcap > 0) {
              double& x = added[static_cast<std::size_t>(i)];
              x = extra > x ? extra : x;
            } else {
              h = h + extra;
            }
          }
          t = h > t ? h : t;
        }
      }
      barrier(top.data());
    }
    if (modifiers_.softcap > 0) {  // c tanh(max_j hi / c) + max_j (ALiBi + bias): tanh is increasing
      const double c = modifiers_.softcap;
      std::vector<double> scaled(top.size());
      {
        ThreadRounding<FE_UPWARD> up;
        for (std::size_t i = 0; i < top.size(); ++i) scaled[i] = top[i] / c;
        barrier(scaled.data());
      }
      std::vector<double> t_lo(top.size()), t_hi(top.size());
      tanh_bounds(scaled.data(), scaled.data(), t_lo.data(), t_hi.data(), top.size());
      ThreadRounding<FE_UPWARD> up;
      for (std::size_t i = 0; i < top.size(); ++i)
        if (std::isfinite(top[i])) top[i] = t_hi[i] * c + (added[i] > -inf ? added[i] : 0.0);
      barrier(top.data());
    }
    ThreadRounding<FE_UPWARD> up;
    if (modifiers_.sink)
      for (double& t : top) t = std::isfinite(t) && t > *modifiers_.sink ? t : *modifiers_.sink;  // the sink's exponent <= 0 too
    // + shift_: every e_ij <= 1/N. A row without a finite top is caught below (its sums are not finite).
    for (double& t : top) t = std::isfinite(t) ? t + shift_ : 0;
    barrier(top.data());
  }

  for (Index j0 = 0; j0 < keys; j0 += tile_columns) {
    const Index columns = std::min(tile_columns, keys - j0);
    const std::size_t length = static_cast<std::size_t>(columns * count);
    bool narrow = true;
    if (modified) {  // the variant's scores: the tile's scaled bounds, then the modifiers on them
      {
        ThreadRounding<FE_UPWARD> up;
        for (Index jj = 0; jj < columns; ++jj) {
          const double* c = C.col(j0 + jj).data();
          const double b = k_norms_(j0 + jj);
          double* xh = x_hi.data() + jj * count;
          double* xl = x_lo.data() + jj * count;
          for (Index i = 0; i < count; ++i) {
            const auto [lo, hi] = scaled_score(c[i], ga[static_cast<std::size_t>(i)], b, eta, s_lo, s_hi);
            xl[i] = lo;
            xh[i] = hi;
          }
        }
        barrier(x_hi.data());
        barrier(x_lo.data());
      }
      modify_score_tile(x_lo.data(), x_hi.data(), count, columns, modifiers_, first, j0, queries, keys);
      ThreadRounding<FE_UPWARD> up;
      for (Index jj = 0; jj < columns; ++jj) {
        const unsigned char* a = allowed(j0 + jj);
        double* xh = x_hi.data() + jj * count;
        double* xl = x_lo.data() + jj * count;
        double* w = width.data() + jj * count;
        for (Index i = 0; i < count; ++i) shifted(xl[i], xh[i], top[static_cast<std::size_t>(i)], !a || a[i], xh[i], xl[i], w[i]);
      }
    } else {  // the scaled bounds shifted as they are formed
      ThreadRounding<FE_UPWARD> up;
      for (Index jj = 0; jj < columns; ++jj) {
        const Index j = j0 + jj;
        const double* c = C.col(j).data();
        const unsigned char* a = allowed(j);
        const double b = k_norms_(j);
        double* xh = x_hi.data() + jj * count;
        double* xl = x_lo.data() + jj * count;
        double* w = width.data() + jj * count;
        for (Index i = 0; i < count; ++i) {
          const auto [lo, hi] = scaled_score(c[i], ga[static_cast<std::size_t>(i)], b, eta, s_lo, s_hi);
          shifted(lo, hi, top[static_cast<std::size_t>(i)], !a || a[i], xh[i], xl[i], w[i]);
        }
      }
    }
    for (std::size_t k = 0; k < length; ++k) narrow &= width[k] <= narrow_width;  // NaN is not narrow
    barrier(x_hi.data());
    barrier(x_lo.data());
    barrier(width.data());
    {
      ThreadRounding<FE_TONEAREST> nearest;  // exp_double's error bound holds in round-to-nearest
      exp_in_place(x_hi.data(), length);
      if (!narrow) exp_in_place(x_lo.data(), length);
      barrier(x_hi.data());
      barrier(x_lo.data());
    }
    {  // e_lo <= e <= e_hi, the ball (M, rad) around them, and the row sums.
      ThreadRounding<FE_UPWARD> up;
      for (Index jj = 0; jj < columns; ++jj) {
        const Index j = j0 + jj;
        const unsigned char* a = allowed(j);
        const double* eh = x_hi.data() + jj * count;
        const double* el = x_lo.data() + jj * count;
        const double* w = width.data() + jj * count;
        double* m = M.col(j).data();
        for (Index i = 0; i < count; ++i) {
          double lo;
          if (narrow) {
            // (e_hi's lower bound) x (1 - w), each factor and the product rounded down
            const double below = -((-eh[i]) * shrink + tiny);
            const double f = below > 0 ? below : 0.0, g = -(w[i] - 1.0);
            lo = -((-f) * g);
          } else {
            const double below = -((-el[i]) * shrink + tiny);
            lo = below > 0 ? below : 0.0;
          }
          double hi = eh[i] * grow + tiny;
          const bool in = !a || a[i];
          lo = in ? lo : 0.0;
          hi = in ? hi : 0.0;
          const double mid = 0.5 * (lo + hi);
          const double r1 = mid - lo, r2 = hi - mid;
          const std::size_t r = static_cast<std::size_t>(i);
          sum_hi[r] += hi;
          neg_sum_lo[r] += -lo;
          mid_sum[r] += mid;
          rad_sum[r] += r1 > r2 ? r1 : r2;
          m[i] = mid;
        }
      }
      barrier(M.data());
      barrier(sum_hi.data());
      barrier(neg_sum_lo.data());
      barrier(mid_sum.data());
      barrier(rad_sum.data());
    }
  }

  if (modifiers_.sink) {  // the sink's term exp(sink - m_i) in both row sums, enclosed as a key's
    std::vector<double> y_lo(static_cast<std::size_t>(count)), y_hi(static_cast<std::size_t>(count));
    {
      ThreadRounding<FE_UPWARD> up;
      for (std::size_t r = 0; r < y_hi.size(); ++r) {
        y_hi[r] = *modifiers_.sink - top[r];
        y_lo[r] = -(top[r] - *modifiers_.sink);
      }
      barrier(y_hi.data());
      barrier(y_lo.data());
    }
    {
      ThreadRounding<FE_TONEAREST> nearest;
      exp_in_place(y_hi.data(), y_hi.size());
      exp_in_place(y_lo.data(), y_lo.size());
      barrier(y_hi.data());
      barrier(y_lo.data());
    }
    ThreadRounding<FE_UPWARD> up;
    for (std::size_t r = 0; r < y_hi.size(); ++r) {
      const double below = -((-y_lo[r]) * shrink + tiny);
      sum_hi[r] += y_hi[r] * grow + tiny;
      neg_sum_lo[r] += -(below > 0 ? below : 0.0);
    }
    barrier(sum_hi.data());
    barrier(neg_sum_lo.data());
  }

  const Eigen::MatrixXd numerator = nearest_product(M, V_);  // row i of M V: row i of M only
  BoundsMatrix out;
  out.lo.resize(count, V_.cols());
  out.hi.resize(count, V_.cols());
  {
    ThreadRounding<FE_UPWARD> up;
    for (Index i = 0; i < count; ++i) {
      const std::size_t r = static_cast<std::size_t>(i);
      const double weight = mid_sum[r] * gamma_n_ + rad_sum[r];
      const double s_up = sum_hi[r], s_down = -neg_sum_lo[r];
      if (mask_ && mask_->allowed_in_row(first + i) == 0) {  // no key (EmptyRows::zero): exactly 0
        out.lo.row(i).setZero();
        out.hi.row(i).setZero();
        continue;
      }
      const bool usable =
          !unbounded[r] && std::isfinite(weight) && std::isfinite(s_up) && std::isfinite(s_down) && s_down > 0;
      for (Index l = 0; l < V_.cols(); ++l) {
        double lo = -inf, hi = inf;
        const double o = numerator(i, l);
        if (usable && std::isfinite(o)) {  // an overflowed GEMM entry is no midpoint either
          const double radius = weight * v_abs_max_(l) + eta_n_;
          const double n_hi = o + radius, neg_n_lo = (-o) + radius;  // -neg_n_lo <= o - radius
          hi = n_hi / (n_hi >= 0 ? s_down : s_up);
          lo = -(neg_n_lo / (neg_n_lo <= 0 ? s_up : s_down));
        }
        // A convex combination of column l of V; NaN compares false and gets the range too.
        out.lo(i, l) = lo >= v_min_(l) ? lo : v_min_(l);
        out.hi(i, l) = hi <= v_max_(l) ? hi : v_max_(l);
      }
    }
    rounding_barrier(out.lo);
    rounding_barrier(out.hi);
  }
  return out;
}

}  // namespace attnrank::detail
