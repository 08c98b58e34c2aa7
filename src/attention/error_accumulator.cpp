// Bounds on a kernel tensor's error (attnrank/attention/detail/error_accumulator.hpp).
#include <attnrank/attention/detail/error_accumulator.hpp>

#include <attnrank/numbers/detail/infinity.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace attnrank::detail {
namespace {

using Eigen::Index;

/// x 2^e in the rounding mode in force, for e <= 0 of any size: steps of 2^-1000
/// (each exact or rounded in that mode), so a sum scaled for its own matrix can
/// join one scaled for a larger one.
double times_power_of_two(double x, int e) {
  while (e < -1000 && x != 0) {
    x *= 0x1p-1000;
    rounding_barrier(x);
    e += 1000;
  }
  x *= std::ldexp(1.0, e);  // 2^e is a normal double here: exact factor
  rounding_barrier(x);
  return x;
}

}  // namespace

void ErrorAccumulator::add(std::size_t t, const BoundsMatrix& E, const Eigen::MatrixXd& O) {
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
    rounding_barrier(lower);
    rounding_barrier(mig);
  }
  {
    UpwardRounding up;
    upper = (x - lo.array()).max(hi.array() - x).matrix();
    mag = lo.array().abs().max(hi.array().abs()).matrix();
    width = (hi - lo);
    rounding_barrier(upper);
    rounding_barrier(mag);
    rounding_barrier(width);
  }
  for (Index j = 0; j < O.cols(); ++j)
    for (Index i = 0; i < O.rows(); ++i) {
      if (lo(i, j) == inf && hi(i, j) == inf && std::isfinite(O(i, j))) {  // exactly +inf, missed
        lower(i, j) = upper(i, j) = inf;
        infinite_error(t, i, j, result_.infinity_missed);
        continue;
      }
      if (lo(i, j) == inf && hi(i, j) == inf && O(i, j) == inf) {  // exactly +inf, matched: error 0
        lower(i, j) = upper(i, j) = 0;
        record(t, i, j, 0, 0, 0, 0);
        continue;
      }
      if (!std::isfinite(O(i, j))) {
        nonfinite(t, i, j);
        continue;
      }
      width_ = std::max(width_, width(i, j));
      record(t, i, j, lower(i, j), upper(i, j), mig(i, j), mag(i, j));
    }
  add_sums(lower, upper, O);
}

void ErrorAccumulator::add(std::size_t t, const Matrix<Interval>& E, const Eigen::MatrixXd& O) {
  // Room for x - l exactly: every end has E's precision, x is a double.
  const mpfr_prec_t p = E.size() ? mpfi_get_prec(E(0, 0).backend().data()) + 64 : 128;
  mpfr_t l, r, a, b;
  mpfr_inits2(p, l, r, a, b, static_cast<mpfr_ptr>(nullptr));
  Eigen::MatrixXd lowers = Eigen::MatrixXd::Zero(O.rows(), O.cols()), uppers = lowers;
  for (Index j = 0; j < O.cols(); ++j)
    for (Index i = 0; i < O.rows(); ++i) {
      const double x = O(i, j);
      mpfi_srcptr e = E(i, j).backend().data();
      mpfi_get_left(l, e);
      mpfi_get_right(r, e);
      if (mpfr_inf_p(l) && mpfr_sgn(l) > 0 && (std::isfinite(x) || x == inf)) {  // exactly +inf
        if (x == inf) {
          record(t, i, j, 0, 0, 0, 0);  // matched: error 0
        } else {
          lowers(i, j) = uppers(i, j) = inf;
          infinite_error(t, i, j, result_.infinity_missed);
        }
        continue;
      }
      if (!std::isfinite(x)) {
        nonfinite(t, i, j);
        continue;
      }
      // The error bounds from the exact ends: |x - E| is within [max(x - r, l - x, 0), max(x - l, r - x)].
      if (mpfr_nan_p(l) || mpfr_nan_p(r)) {  // NaN encloses nothing
        width_ = inf;
        uppers(i, j) = inf;
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
        lowers(i, j) = lower;
        uppers(i, j) = upper;
        record(t, i, j, lower, upper, mig, mag);
      }
    }
  mpfr_clears(l, r, a, b, static_cast<mpfr_ptr>(nullptr));
  add_sums(lowers, uppers, O);
}

void ErrorAccumulator::add_sums(const Eigen::MatrixXd& lower, const Eigen::MatrixXd& upper, const Eigen::MatrixXd& O) {
  const auto finite = O.array().isFinite();
  const Eigen::ArrayXXd lo = finite.select(lower.array(), 0.0);
  Eigen::ArrayXXd hi = finite.select(upper.array(), 0.0);
  entries_ += static_cast<double>(O.size());
  if (hi.size() == 0) return;
  if (!hi.isFinite().all()) {  // an unbounded entry: the upper sums are +inf, the lower ones still hold
    upper_sum_infinite_ = true;
    hi = hi.isFinite().select(hi, 0.0);
  }
  const double top = std::max(hi.maxCoeff(), lo.maxCoeff());
  Sums s;
  // 2^scale brings the largest upper end near 1: its square neither overflows nor underflows.
  s.scale = top > 0 ? std::clamp(-std::ilogb(top), -1000, 1000) : 0;
  const double factor = std::ldexp(1.0, s.scale);
  {
    DownwardRounding down;
    const Eigen::ArrayXXd y = lo * factor;
    s.lower = y.sum();
    s.lower2 = y.square().sum();
    rounding_barrier(s.lower);
    rounding_barrier(s.lower2);
  }
  {
    UpwardRounding up;
    const Eigen::ArrayXXd y = hi * factor;
    s.upper = y.sum();
    s.upper2 = y.square().sum();
    rounding_barrier(s.upper);
    rounding_barrier(s.upper2);
  }
  sums_.push_back(s);
}

void ErrorAccumulator::infinite_error(std::size_t t, Index i, Index j, std::size_t& counter) {
  const bool first = !result_.infinite();
  ++counter;
  if (first || std::tie(t, i, j) < std::tie(lower_at_.t, lower_at_.i, lower_at_.j)) lower_at_ = upper_at_ = {t, i, j};
  result_.max_abs_error_lower = result_.max_abs_error_upper = inf;
}

void ErrorAccumulator::record(std::size_t t, Index i, Index j, double lower, double upper, double mig, double mag) {
  result_.max_abs_exact_lower = std::max(result_.max_abs_exact_lower, mig);
  result_.max_abs_exact_upper = std::max(result_.max_abs_exact_upper, mag);
  if (ulps_) {  // ulp is a power of two: each quotient is exact unless it over- or underflows
    double below, above;
    {
      DownwardRounding down;
      below = lower / format_.ulp(mag);
      rounding_barrier(below);
    }
    {
      UpwardRounding up;
      above = upper / format_.ulp(mig);
      rounding_barrier(above);
    }
    ulps_->max_lower = std::max(ulps_->max_lower, below);
    ulps_->max_upper = std::max(ulps_->max_upper, above);
    const std::size_t bin = above <= 0.5 ? 0 : above <= 1 ? 1 : above <= 2 ? 2 : above <= 4 ? 3 : above <= 16 ? 4 : 5;
    ++ulps_->histogram[bin];
  }
  if (result_.infinite()) return;  // the error is already infinite, and its place known
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

OutputError ErrorAccumulator::finish() const {
  OutputError e = result_;
  e.ulps = ulps_;
  const bool lower_known = e.max_abs_error_lower > 0;
  e.worst_matrix = lower_known ? lower_at_.t : upper_at_.t;
  e.worst_row = lower_known ? lower_at_.i : upper_at_.i;
  e.worst_column = lower_known ? lower_at_.j : upper_at_.j;
  {
    DownwardRounding down;
    double rel = 0;
    if (e.max_abs_error_lower > 0 && std::isfinite(e.max_abs_exact_upper))
      rel = e.max_abs_exact_upper > 0 ? e.max_abs_error_lower / e.max_abs_exact_upper : inf;
    rounding_barrier(rel);
    e.max_rel_error_lower = rel;
  }
  {
    UpwardRounding up;
    double rel = e.max_abs_exact_lower > 0 ? e.max_abs_error_upper / e.max_abs_exact_lower : inf;
    rounding_barrier(rel);
    e.max_rel_error_upper = std::isnan(rel) ? inf : rel;
  }
  if (e.infinite()) {  // an infinite error at an entry: its mean and RMS are infinite too
    e.mean_abs_error_lower = e.mean_abs_error_upper = e.rms_error_lower = e.rms_error_upper = inf;
    return e;
  }
  if (entries_ == 0) return e;
  // The matrices' sums joined at the smallest scale (the largest errors), each
  // rescaled by 2^(common - own) <= 1 in the direction of its bound.
  int common = 1000;
  for (const Sums& s : sums_) common = std::min(common, s.scale);
  const double undo = std::ldexp(1.0, -common);  // |common| <= 1000: a normal double
  {
    DownwardRounding down;
    double sum = 0, sum2 = 0;
    for (const Sums& s : sums_) {
      sum += times_power_of_two(s.lower, common - s.scale);
      sum2 += times_power_of_two(s.lower2, 2 * (common - s.scale));
    }
    double mean = sum / entries_ * undo, rms = std::sqrt(sum2 / entries_) * undo;
    rounding_barrier(mean);
    rounding_barrier(rms);
    e.mean_abs_error_lower = mean;
    e.rms_error_lower = rms;
  }
  if (upper_sum_infinite_) {
    e.mean_abs_error_upper = e.rms_error_upper = inf;
  } else {
    UpwardRounding up;
    double sum = 0, sum2 = 0;
    for (const Sums& s : sums_) {
      sum += times_power_of_two(s.upper, common - s.scale);
      sum2 += times_power_of_two(s.upper2, 2 * (common - s.scale));
    }
    double mean = sum / entries_ * undo, rms = std::sqrt(sum2 / entries_) * undo;
    rounding_barrier(mean);
    rounding_barrier(rms);
    e.mean_abs_error_upper = mean;
    e.rms_error_upper = rms;
  }
  // The mean and RMS never exceed the max, and the max's upper bound is sharper in single entries.
  e.mean_abs_error_upper = std::min(e.mean_abs_error_upper, e.max_abs_error_upper);
  e.rms_error_upper = std::min(e.rms_error_upper, e.max_abs_error_upper);
  return e;
}

void ratio_bounds(const OutputError& c, const OutputError& r, double& lo_out, double& hi_out) {
  if (r.infinite()) {
    // An infinite reference error: the ratio is 0 for a finite candidate error and undefined
    // otherwise; nothing a ratio rule could use is proven, and the band says so.
    lo_out = 0;
    hi_out = inf;
    return;
  }
  {
    DownwardRounding down;
    double lo = 0;
    if (c.max_abs_error_lower > 0) lo = r.max_abs_error_upper > 0 ? c.max_abs_error_lower / r.max_abs_error_upper : inf;
    if (std::isnan(lo)) lo = 0;  // inf / inf: nothing proven
    rounding_barrier(lo);
    lo_out = lo;
  }
  {
    UpwardRounding up;
    double hi = r.max_abs_error_lower > 0 ? c.max_abs_error_upper / r.max_abs_error_lower : inf;
    if (std::isnan(hi)) hi = inf;
    rounding_barrier(hi);
    hi_out = hi;
  }
}

}  // namespace attnrank::detail
