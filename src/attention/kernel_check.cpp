// The certified error of an attention kernel's output (attnrank/attention/kernel_check.hpp).
#include <attnrank/attention/kernel_check.hpp>

#include <attnrank/attention/softmax.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/detail/infinity.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

namespace attnrank {
namespace {

using Eigen::Index;
using detail::inf;

/// Running bounds over the entries of one output, matrix by matrix.
class ErrorAccumulator {
 public:
  /// Adds matrix t: enclosure [lo, hi] of the exact output, O the kernel's.
  void add(std::size_t t, const BoundsMatrix& E, const Eigen::MatrixXd& O) {
    Eigen::MatrixXd lo = E.lo, hi = E.hi;
    for (Index j = 0; j < O.cols(); ++j)
      for (Index i = 0; i < O.rows(); ++i)
        if (std::isnan(lo(i, j)) || std::isnan(hi(i, j))) lo(i, j) = -inf, hi(i, j) = inf;  // NaN encloses nothing
    const auto x = O.array();
    Eigen::MatrixXd lower, upper, mig, mag, width;
    {
      DownwardRounding down;
      lower = (x - hi.array()).max(lo.array() - x).max(0.0).matrix();
      mig = (lo.array() > 0).select(lo.array(), (hi.array() < 0).select(-hi.array(), 0.0)).matrix();
      detail::rounding_barrier(lower);
      detail::rounding_barrier(mig);
    }
    {
      UpwardRounding up;
      upper = (x - lo.array()).max(hi.array() - x).matrix();
      mag = lo.array().abs().max(hi.array().abs()).matrix();
      width = (hi - lo);
      detail::rounding_barrier(upper);
      detail::rounding_barrier(mag);
      detail::rounding_barrier(width);
    }
    for (Index j = 0; j < O.cols(); ++j)
      for (Index i = 0; i < O.rows(); ++i) {
        if (!std::isfinite(O(i, j))) {
          nonfinite(t, i, j);
          continue;
        }
        width_ = std::max(width_, width(i, j));
        record(t, i, j, lower(i, j), upper(i, j), mig(i, j), mag(i, j));
      }
  }

  /// Adds matrix t from MPFI enclosures: each bound is rounded outward to double
  /// first (so the same code proves the bounds), which costs one ulp of the error.
  void add(std::size_t t, const Matrix<Interval>& E, const Eigen::MatrixXd& O) {
    // Room for x - l exactly: every end has E's precision, x is a double.
    const mpfr_prec_t p = E.size() ? mpfi_get_prec(E(0, 0).backend().data()) + 64 : 128;
    mpfr_t l, r, a, b;
    mpfr_inits2(p, l, r, a, b, static_cast<mpfr_ptr>(nullptr));
    for (Index j = 0; j < O.cols(); ++j)
      for (Index i = 0; i < O.rows(); ++i) {
        const double x = O(i, j);
        if (!std::isfinite(x)) {
          nonfinite(t, i, j);
          continue;
        }
        // The error bounds from the exact ends: |x - E| is within [max(x - r, l - x, 0), max(x - l, r - x)].
        mpfi_srcptr e = E(i, j).backend().data();
        mpfi_get_left(l, e);
        mpfi_get_right(r, e);
        if (mpfr_nan_p(l) || mpfr_nan_p(r)) {  // NaN encloses nothing
          width_ = inf;
          record(t, i, j, 0, inf, 0, inf);
        } else {
          mpfr_d_sub(a, x, r, MPFR_RNDD);
          mpfr_sub_d(b, l, x, MPFR_RNDD);
          const double lower = std::max({0.0, mpfr_get_d(a, MPFR_RNDD), mpfr_get_d(b, MPFR_RNDD)});
          mpfr_d_sub(a, x, l, MPFR_RNDU);
          mpfr_sub_d(b, r, x, MPFR_RNDU);
          const double upper = std::max(mpfr_get_d(a, MPFR_RNDU), mpfr_get_d(b, MPFR_RNDU));
          mpfr_abs(a, l, MPFR_RNDU);
          mpfr_abs(b, r, MPFR_RNDU);
          const double mag = std::max(mpfr_get_d(a, MPFR_RNDU), mpfr_get_d(b, MPFR_RNDU));
          double mig = 0;
          if (mpfr_sgn(l) > 0) mig = mpfr_get_d(l, MPFR_RNDD);
          else if (mpfr_sgn(r) < 0) mig = -mpfr_get_d(r, MPFR_RNDU);
          mpfr_sub(a, r, l, MPFR_RNDU);
          width_ = std::max(width_, mpfr_get_d(a, MPFR_RNDU));
          record(t, i, j, lower, upper, mig, mag);
        }
      }
    mpfr_clears(l, r, a, b, static_cast<mpfr_ptr>(nullptr));
  }

  OutputError finish() const {
    OutputError e = result_;
    const bool lower_known = e.max_abs_error_lower > 0;
    e.worst_matrix = lower_known ? lower_at_.t : upper_at_.t;
    e.worst_row = lower_known ? lower_at_.i : upper_at_.i;
    e.worst_column = lower_known ? lower_at_.j : upper_at_.j;
    {
      DownwardRounding down;
      double rel = 0;
      if (e.max_abs_error_lower > 0 && std::isfinite(e.max_abs_exact_upper))
        rel = e.max_abs_exact_upper > 0 ? e.max_abs_error_lower / e.max_abs_exact_upper : inf;
      detail::rounding_barrier(rel);
      e.max_rel_error_lower = rel;
    }
    {
      UpwardRounding up;
      double rel = e.max_abs_exact_lower > 0 ? e.max_abs_error_upper / e.max_abs_exact_lower : inf;
      detail::rounding_barrier(rel);
      e.max_rel_error_upper = std::isnan(rel) ? inf : rel;
    }
    return e;
  }

  /// Largest hi - lo seen, rounded up.
  double width() const { return width_; }

 private:
  struct Place {
    std::size_t t = 0;
    Index i = 0, j = 0;
  };

  /// An entry of O that is NaN or infinite: the error there is infinite. The
  /// place reported is the first such entry in C order (what np.argwhere lists
  /// first), whatever order the entries are visited in.
  void nonfinite(std::size_t t, Index i, Index j) {
    if (result_.nonfinite++ == 0 || std::tie(t, i, j) < std::tie(lower_at_.t, lower_at_.i, lower_at_.j))
      lower_at_ = upper_at_ = {t, i, j};
    result_.max_abs_error_lower = result_.max_abs_error_upper = inf;
  }

  void record(std::size_t t, Index i, Index j, double lower, double upper, double mig, double mag) {
    result_.max_abs_exact_lower = std::max(result_.max_abs_exact_lower, mig);
    result_.max_abs_exact_upper = std::max(result_.max_abs_exact_upper, mag);
    if (result_.nonfinite > 0) return;  // the error is already infinite, and its place known
    if (lower > result_.max_abs_error_lower) {
      lower_at_ = {t, i, j};
      result_.max_abs_error_lower = lower;
    }
    if (!seen_ || upper > result_.max_abs_error_upper) {
      upper_at_ = {t, i, j};
      result_.max_abs_error_upper = upper;
    }
    seen_ = true;
  }

  OutputError result_;
  Place lower_at_, upper_at_;
  double width_ = 0;
  bool seen_ = false;
};

Matrix<Interval> to_intervals(const Eigen::MatrixXd& M) {
  Matrix<Interval> out(M.rows(), M.cols());
  for (Index j = 0; j < M.cols(); ++j)
    for (Index i = 0; i < M.rows(); ++i) mpfi_set_d(out(i, j).backend().data(), M(i, j));  // exact: bits >= 53
  return out;
}

/// MPFI enclosure of one head's exact output, at the precision in force.
Matrix<Interval> interval_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                    const std::optional<double>& scale, const Mask* mask) {
  Matrix<Interval> S = multiply_transposed(to_intervals(Q), to_intervals(K));
  Interval s;
  if (scale) mpfi_set_d(s.backend().data(), *scale);
  else {
    Interval d;
    mpfi_set_si(d.backend().data(), static_cast<long>(Q.cols()));
    s = 1 / sqrt(d);
  }
  for (Index j = 0; j < S.cols(); ++j)
    for (Index i = 0; i < S.rows(); ++i) S(i, j) *= s;
  const Matrix<Interval> A = mask ? softmax_rows(S, *mask) : softmax_rows(S);
  return multiply(A, to_intervals(V));
}

std::string shape_of(const Eigen::MatrixXd& M) { return std::to_string(M.rows()) + " x " + std::to_string(M.cols()); }

/// Each output matrix has its head's output shape (K and V are checked with the head).
void check_shapes(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& v,
                  const std::vector<Eigen::MatrixXd>& out, const char* name) {
  if (out.size() != q.size())
    throw input_error(std::string(name) + " has " + std::to_string(out.size()) + " matrices for " +
                      std::to_string(q.size()) + " heads");
  for (std::size_t t = 0; t < q.size(); ++t)
    if (out[t].rows() != q[t].rows() || out[t].cols() != v[t].cols())
      throw input_error(std::string(name) + " head " + std::to_string(t) + " is " + shape_of(out[t]) +
                            " but the attention output is " + std::to_string(q[t].rows()) + " x " +
                            std::to_string(v[t].cols()) + " (rows of Q x columns of V)",
                        name);
}

}  // namespace

bool OutputError::tight() const {
  if (!(max_abs_error_upper < inf)) return nonfinite > 0;  // an infinite error is known exactly
  return max_abs_error_upper - max_abs_error_lower <= max_abs_error_upper / 100;
}

KernelCheck check_kernel(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                         const std::vector<Eigen::MatrixXd>& v, const std::vector<Eigen::MatrixXd>& candidate,
                         const std::vector<Eigen::MatrixXd>* reference, const KernelCheckOptions& options) {
  if (q.empty()) throw input_error("check_kernel: no heads");
  if (k.size() != q.size() || v.size() != q.size())
    throw input_error("check_kernel: " + std::to_string(q.size()) + " Q matrices, " + std::to_string(k.size()) +
                      " K and " + std::to_string(v.size()) + " V (one of each per head)");
  check_shapes(q, v, candidate, "the candidate");
  if (reference) check_shapes(q, v, *reference, "the reference");
  if (options.scale) (void)ScaleBounds::exactly(*options.scale);
  if (options.fallback_bits < 53 || options.fallback_bits > max_precision_bits)
    throw input_error("check_kernel: fallback precision " + std::to_string(options.fallback_bits) +
                      " bits is outside [53, " + std::to_string(max_precision_bits) + "]");
  const Mask* mask = options.mask ? &*options.mask : nullptr;

  KernelCheck out;
  const auto run = [&](bool intervals, AttentionProducts products) {
    ErrorAccumulator c, r;
    for (std::size_t t = 0; t < q.size(); ++t) {
      if (intervals) {
        const Matrix<Interval> E = interval_attention(q[t], k[t], v[t], options.scale, mask);
        c.add(t, E, candidate[t]);
        if (reference) r.add(t, E, (*reference)[t]);
      } else {
        const ScaleBounds s = options.scale ? ScaleBounds::exactly(*options.scale) : ScaleBounds::inverse_sqrt(q[t].cols());
        const BoundsMatrix E = certified_attention(q[t], k[t], v[t], s, mask, products);
        c.add(t, E, candidate[t]);
        if (reference) r.add(t, E, (*reference)[t]);
      }
    }
    out.candidate = c.finish();
    if (reference) out.reference = r.finish();
    out.enclosure_width = c.width();
  };
  // The cheap enclosure first; the directed one (about 10x narrower, 2.5x the
  // GEMMs) only when an output is not pinned yet but would be at a tenth of the spread.
  run(false, AttentionProducts::a_priori);
  out.method = "double";
  out.products = "a_priori";
  out.bits = 53;
  const auto within_reach = [](const OutputError& e) {
    return e.tight() || e.max_abs_error_upper - e.max_abs_error_lower <= e.max_abs_error_upper / 8;
  };
  const auto all_tight = [&] { return out.candidate.tight() && (!out.reference || out.reference->tight()); };
  if (!all_tight() && within_reach(out.candidate) && (!out.reference || within_reach(*out.reference))) {
    run(false, AttentionProducts::directed);
    out.products = "directed";
  }

  const bool tight = all_tight();
  double work = 0;
  for (std::size_t t = 0; t < q.size(); ++t)
    work += static_cast<double>(q[t].rows()) * static_cast<double>(k[t].rows()) *
            static_cast<double>(q[t].cols() + v[t].cols());
  const bool wanted = options.fallback == FallbackPolicy::always || (!tight && options.fallback != FallbackPolicy::never);
  if (wanted && options.fallback == FallbackPolicy::automatic && work > options.fallback_budget) {
    out.fallback_skipped = "the certified double enclosures (width up to " + format_upper_bound(out.enclosure_width) +
                           ") do not pin every error to 1%; recomputing them with MPFI at " +
                           std::to_string(options.fallback_bits) + " bits takes " + format_upper_bound(work, 2) +
                           " interval multiply-adds, over the automatic budget of " +
                           format_upper_bound(options.fallback_budget, 2) + " (ask for it: fallback always)";
  } else if (wanted) {
    const PrecisionScope scope(options.fallback_bits);
    run(true, AttentionProducts::directed);
    out.method = "mpfi";
    out.products = "";
    out.bits = PrecisionScope::bits();
  }

  if (out.reference && out.reference->nonfinite > 0) {
    // An infinite reference error: the ratio is 0 for a finite candidate error and undefined
    // otherwise; nothing a ratio rule could use is proven, and the band says so.
    out.ratio_lower = 0;
    out.ratio_upper = inf;
  } else if (out.reference) {
    const OutputError& c = out.candidate;
    const OutputError& r = *out.reference;
    {
      DownwardRounding down;
      double lo = 0;
      if (c.max_abs_error_lower > 0) lo = r.max_abs_error_upper > 0 ? c.max_abs_error_lower / r.max_abs_error_upper : inf;
      if (std::isnan(lo)) lo = 0;  // inf / inf: nothing proven
      detail::rounding_barrier(lo);
      out.ratio_lower = lo;
    }
    {
      UpwardRounding up;
      double hi = r.max_abs_error_lower > 0 ? c.max_abs_error_upper / r.max_abs_error_lower : inf;
      if (std::isnan(hi)) hi = inf;
      detail::rounding_barrier(hi);
      out.ratio_upper = hi;
    }
  }
  return out;
}

}  // namespace attnrank
