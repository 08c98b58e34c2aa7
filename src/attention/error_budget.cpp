// The certified error budget of a precision profile (attention/error_budget.hpp):
// the derivation's steps in the order the header gives them, every quantity an
// upper bound computed in upward rounding (a lower bound L as -((-L) ...)).
#include <attnrank/attention/error_budget.hpp>

#include <attnrank/attention/certified_attention.hpp>
#include <attnrank/attention/certified_gradients.hpp>
#include <attnrank/error.hpp>
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/rounding_mode.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnrank {
namespace {

using detail::inf;
/// exp and log in round-to-nearest err by less than 1 ulp (glibc); widened to 8 ulps.
constexpr double libm_widening = 0x1p-49;

/// gamma_n(u) = n u / (1 - n u), rounded up; +inf when n u >= 1/2. Upward mode.
double gamma_up(double n, double u) {
  double x = n * u;
  detail::rounding_barrier(x);
  if (!(x < 0.5)) return inf;
  double below = -(x - 1.0);  // 1 - x rounded down
  detail::rounding_barrier(below);
  return x / below;
}

/// b^R for b >= 1 rounded up (upward mode), or for 0 <= b <= 1 rounded down when
/// called through pow_down; by squaring, each product rounded in the bound's direction.
double pow_up(double b, long r) {
  double result = 1, base = b;
  while (r > 0) {
    if (r & 1) result *= base;
    base *= base;
    r >>= 1;
  }
  return result;
}
double pow_down(double b, long r) {  // -(-x * y) rounds x y down in upward mode
  double result = 1, base = b;
  while (r > 0) {
    if (r & 1) result = -((-result) * base);
    base = -((-base) * base);
    r >>= 1;
  }
  return result;
}

/// Values of exp and log computed to nearest first (libm's accuracy holds there), then widened.
struct Nearest {
  static double exp(double x) {
    const ThreadRounding<FE_TONEAREST> nearest;
    return std::exp(x);
  }
  static double log(double x) {
    const ThreadRounding<FE_TONEAREST> nearest;
    return std::log(x);
  }
};
double exp_up(double x) { return Nearest::exp(x) * (1 + libm_widening) + 0x1p-1074; }
double exp_down(double x) { return std::max(0.0, -((-Nearest::exp(x)) * (1 - libm_widening))); }
/// log(x) rounded up for x > 0 (|log x| (1 + 2^-49) + 2^-1074 above the value).
double log_up(double x) {
  const double l = Nearest::log(x);
  return l + std::fabs(l) * libm_widening + 0x1p-1074;
}

void refuse_variants(const KernelCheckOptions& o) {
  const char* what = o.softcap != 0             ? "a softcap"
                     : !o.alibi_slopes.empty()  ? "ALiBi slopes"
                     : !o.sinks.empty()         ? "sinks"
                     : !o.biases.empty()        ? "an additive bias"
                     : !o.dropout_keep.empty()  ? "dropout"
                     : o.empty_rows == EmptyRows::zero ? "rows without a key (empty_rows zero)"
                                                       : nullptr;
  if (what)
    throw input_error(std::string("a precision profile's error budget does not model ") + what +
                      " yet: check this kernel with max_error or max_ratio");
}

/// The row-constant factors of the derivation (steps 1 and 3), upper bounds.
struct RowFactors {
  double smax = 0;        ///< bound on |computed score| (smax')
  double l_plus = 1, l_minus = 1;
  double a = 0;           ///< max(L+ - 1, 1 - L-) / L-
  double ratio = 1;       ///< L+ / L-
  double g_num = 0, g_den = 0;
  double keys = 0;        ///< N, the keys the row allows
};

}  // namespace

std::vector<HeadBudget> error_budget(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                                     const std::vector<Eigen::MatrixXd>& v, const KernelCheckOptions& options,
                                     const PrecisionProfile& p, bool with_lse) {
  refuse_variants(options);
  std::vector<HeadBudget> out;
  out.reserve(q.size());
  for (std::size_t t = 0; t < q.size(); ++t) {
    const std::size_t kv = options.kv_heads.empty() ? t : options.kv_heads[t];
    const Eigen::MatrixXd& Q = q[t];
    const Eigen::MatrixXd& K = k[kv];
    const Eigen::MatrixXd& V = v[kv];
    const Mask* mask = !options.masks.empty() ? &options.masks[t] : options.mask ? &*options.mask : nullptr;
    const ScaleBounds scale = options.scale ? ScaleBounds::exactly(*options.scale) : ScaleBounds::inverse_sqrt(Q.cols());
    const Eigen::Index nq = Q.rows(), nk = K.rows(), dv = V.cols(), d = Q.cols();
    if (!Q.allFinite() || !K.allFinite() || !V.allFinite())
      throw input_error("q, k and v must be finite for an error budget");

    // Step 2's enclosures: O, S = A(|V|) and Q2 = A(V o V) (its entries rounded up, which
    // only raises the bound; absent where a square overflows), and the exact lse.
    Eigen::MatrixXd values(nk, 3 * dv);
    bool squares = true;
    {
      const UpwardRounding up;
      values.leftCols(dv) = V;
      values.middleCols(dv, dv) = V.cwiseAbs();
      values.rightCols(dv) = V.cwiseAbs2();
      detail::rounding_barrier(values);
      squares = values.rightCols(dv).allFinite();
    }
    if (!squares) values.rightCols(dv) = values.middleCols(dv, dv);  // unused below
    GradientBounds exact;
    if (with_lse) {  // the backward pass's blocks, asking for O and lse only
      GradientsWanted wanted;
      wanted.dq = wanted.dk = wanted.dv = false;
      wanted.lse = wanted.output = true;
      exact = certified_attention_gradients(Q, K, values, Eigen::MatrixXd(), scale, mask, AttentionProducts::a_priori,
                                            wanted);
    } else {  // the fused forward pass
      exact.output = certified_attention(Q, K, values, scale, mask, AttentionProducts::a_priori);
    }
    HeadBudget h;
    h.exact_out.lo = exact.output.lo.leftCols(dv);
    h.exact_out.hi = exact.output.hi.leftCols(dv);
    h.exact_lse = exact.lse;
    h.out.resize(nq, dv);
    h.lse.resize(with_lse ? nq : 0);

    const UpwardRounding up;
    double k_max = 0;  // max_j ||k_j||, rounded up
    for (Eigen::Index j = 0; j < nk; ++j) k_max = std::max(k_max, std::sqrt(K.row(j).squaredNorm()));
    Eigen::VectorXd v_max = V.cwiseAbs().colwise().maxCoeff().transpose();
    const long rescales = (nk + p.min_block - 1) / p.min_block - 1 + (p.splits > 1 ? 1 : 0);
    const double e = p.exp_relative, u_p = p.probabilities.u, eta = p.fp32_eta();
    // Underflow: a stored probability or output below its format's smallest normal errs by
    // half its subnormal spacing, or by 2^-126 where fp32 results are flushed to zero.
    const double eta_p = std::max(p.probabilities.eta, p.flush_to_zero ? eta : 0.0);
    const double eta_out = std::max(p.output.eta, p.flush_to_zero ? eta : 0.0);
    for (Eigen::Index i = 0; i < nq; ++i) {
      RowFactors f;
      f.keys = static_cast<double>(mask ? mask->allowed_in_row(i) : nk);
      // Step 1: the exponent errors.
      const double qn = std::sqrt(Q.row(i).squaredNorm());
      const double dot = scale.hi * qn * k_max;
      const double gamma_s = gamma_up(static_cast<double>(d + p.scores.extra_terms), p.scores.u);
      f.smax = dot + gamma_s * dot;
      // (and each of the dot product's d + extra additions may underflow by eta, scaled)
      const double sigma = gamma_s * dot + 6 * p.argument_u * f.smax +
                           scale.hi * static_cast<double>(d + p.scores.extra_terms) * eta;
      const double rescale_arg = 4 * p.argument_u * f.smax;
      const double e_below = -(e - 1.0);  // 1 - e rounded down
      f.l_plus = exp_up(sigma) * (1 + e) * pow_up(exp_up(rescale_arg) * (1 + e), rescales);
      f.l_minus = -((-exp_down(-sigma)) * e_below);
      f.l_minus = -((-f.l_minus) * pow_down(-((-exp_down(-rescale_arg)) * e_below), rescales));
      // Step 2: the reweighting factor.
      f.a = std::max(f.l_plus - 1, 1 - f.l_minus) / f.l_minus;
      f.ratio = f.l_plus / f.l_minus;
      // Step 3: the numerator's and the row sum's own errors.
      const double terms = f.keys + static_cast<double>(rescales) + 1;
      const double rescale_products = pow_up(1 + p.rescale_u, rescales);
      f.g_num = (1 + u_p) * rescale_products * (1 + gamma_up(terms + static_cast<double>(p.pv.extra_terms), p.pv.u)) - 1;
      f.g_den = rescale_products * (1 + gamma_up(terms + static_cast<double>(p.row_sums.extra_terms), p.row_sums.u)) - 1;
      if (p.row_sum_of_stored) f.g_den = (1 + f.g_den) * (1 + u_p) - 1;
      // Absolute errors (underflow) in the kernel's scale, where the row sum is at least
      // l_floor: each exp result, each addition and rescale product of the sums (and each
      // stored P when the row sum adds those) errs by at most eta.
      const double l_floor = -((-f.l_minus) * exp_down(-sigma));
      const double sum_steps = 2 * f.keys + 2 * static_cast<double>(rescales) + 2;  // products, additions, rescales
      f.g_den += (f.keys * eta + sum_steps * eta + (p.row_sum_of_stored ? f.keys * eta_p : 0)) / l_floor;
      // How much a stored term may grow by its later rescales (each exact factor is at most 1).
      const double growth = pow_up(exp_up(rescale_arg) * (1 + e) * (1 + p.rescale_u), rescales);
      const double den_below = f.g_den < 1 ? -(f.g_den - 1.0) : 0;  // 1 - g_den rounded down
      const double abs_den = -((-e_below) * den_below);              // (1 - e)(1 - g_den) rounded down
      // Step 6's factor, and the split merge's weight error (step 4), which both need.
      // log(L+ (1 + g_den)) and -log(L- (1 - g_den)) = log(1 / (L- (1 - g_den))), rounded up.
      const double log_factor = std::max(log_up(f.l_plus * (1 + f.g_den)),
                                         den_below > 0 ? log_up(1 / -((-f.l_minus) * den_below)) : inf);
      const double log_keys = log_up(f.keys);
      double lse_budget = log_factor + 2 * p.argument_u * f.smax +
                          p.lse_u * (2 * (log_keys + log_factor) + f.smax + log_keys + 1);
      // Step 4. A partition's weight exp(lse_s - lse) times its output o_s = num_s / l_s is
      // num_s e^(m_s) / L whatever l_s's error: the partitions' exponent and sum errors are
      // steps 1-3's, not the merge's. What the merge adds is rounding: each lse_s and the
      // merged lse (scale times maximum, log, add; |lse| <= magnitude), the weights'
      // arguments and exps, and the merged lse's own sum and log over the partitions.
      double merge_weight = 0;
      if (p.splits > 1) {
        const double magnitude = f.smax + log_keys + log_factor + 1;
        const double splits_log = log_up(static_cast<double>(p.splits)) + 1;
        const double lse_rounding = 2 * (p.lse_u + p.argument_u) * magnitude + p.lse_u * (magnitude + splits_log) +
                                    gamma_up(static_cast<double>(p.splits), p.divide_u) + e;
        merge_weight = exp_up(2 * lse_rounding + 2 * p.argument_u * magnitude) * (1 + e) - 1;
        lse_budget += lse_rounding;
      }
      if (with_lse) h.lse(i) = std::isfinite(lse_budget) ? lse_budget : inf;
      for (Eigen::Index c = 0; c < dv; ++c) {
        const double o_lo = exact.output.lo(i, c), o_hi = exact.output.hi(i, c);
        const double o_abs = std::max(std::fabs(o_lo), std::fabs(o_hi));
        const double s_hi = exact.output.hi(i, dv + c);
        double deviation = s_hi + o_abs;
        if (squares) {
          const double o_square_below = o_lo > 0 ? -((-o_lo) * o_lo) : o_hi < 0 ? -((-o_hi) * o_hi) : 0;
          const double variance = std::max(0.0, exact.output.hi(i, 2 * dv + c) - o_square_below);
          deviation = std::min(deviation, std::sqrt(variance));
        }
        const double t1 = f.a * deviation;
        const double o1 = o_abs + t1;
        // P's storage and exp's flush per term (times |v_j|, and the later rescales), and
        // the P V sum's products, additions and rescale products, each eta.
        const double absolute =
            abs_den > 0 ? (f.keys * (eta_p + eta) * v_max(c) * growth + sum_steps * eta) / (abs_den * l_floor) : inf;
        // The accumulator itself, in the kernel's scale, must stay below fp32's largest value.
        const bool accumulator_fits = f.keys * growth * f.l_plus * v_max(c) * (1 + f.g_num) < 0x1.fffffep127;
        const double t2 = f.g_num * f.ratio * s_hi + absolute;
        double b3 = den_below > 0 ? t1 + (t2 + o1 * f.g_den) / den_below : inf;
        if (p.splits > 1)
          b3 += (merge_weight + gamma_up(static_cast<double>(p.splits), p.divide_u) + p.divide_u) * (s_hi + b3);
        const double o2 = o_abs + b3;
        double b = b3 + p.divide_u * o2 + eta + p.output.u * ((1 + p.divide_u) * o2 + eta) + eta_out;
        if (!accumulator_fits || !(o2 * (1 + p.divide_u) < p.output.max) || !(b >= 0))
          b = inf;  // an overflow (or NaN): unbounded
        h.out(i, c) = b;
      }
    }
    out.push_back(std::move(h));
  }
  return out;
}

BudgetVerdict judge_budget(const std::vector<Eigen::MatrixXd>& candidate, const std::vector<BoundsMatrix>& exact,
                           const std::vector<Eigen::MatrixXd>& budget) {
  BudgetVerdict r;
  bool all_within = true, any_exceeded = false;
  double best_upper = -1;
  const UpwardRounding up;
  for (std::size_t t = 0; t < candidate.size(); ++t) {
    const Eigen::MatrixXd& c = candidate[t];
    const BoundsMatrix& x = exact[t];
    const Eigen::MatrixXd& b = budget[t];
    if (c.rows() != b.rows() || c.cols() != b.cols() || x.lo.rows() != c.rows() || x.lo.cols() != c.cols())
      throw std::logic_error("judge_budget: the candidate, the enclosure and the budget differ in shape");
    for (Eigen::Index i = 0; i < c.rows(); ++i)
      for (Eigen::Index j = 0; j < c.cols(); ++j) {
        const double value = c(i, j), lo = x.lo(i, j), hi = x.hi(i, j), allowed = b(i, j);
        r.max_budget = std::max(r.max_budget, allowed);
        double lower, upper;
        if (!std::isfinite(value)) {
          ++r.nonfinite;
          lower = upper = inf;
        } else {
          upper = std::max(value - lo, hi - value);
          lower = std::max({0.0, -(hi - value), -(value - lo)});  // value - hi and lo - value, rounded down
        }
        const double usage_upper = std::isinf(allowed) ? (std::isinf(upper) ? inf : 0) : upper / allowed;
        const double usage_lower = std::isinf(allowed) ? 0 : -((-lower) / allowed);
        if (!(upper <= allowed)) all_within = false;
        if (lower > allowed) any_exceeded = true;
        r.usage_lower = std::max(r.usage_lower, usage_lower);
        if (usage_upper > best_upper) {
          best_upper = usage_upper;
          r.usage_upper = usage_upper;
          r.worst_matrix = t;
          r.worst_row = i;
          r.worst_column = j;
          r.budget_at_worst = allowed;
        }
      }
  }
  r.verdict = any_exceeded ? ToleranceVerdict::exceeded : all_within ? ToleranceVerdict::within : ToleranceVerdict::undecided;
  return r;
}

}  // namespace attnrank
