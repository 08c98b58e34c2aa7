// The last check before a certified result leaves the library (attnrank/analysis/result_guard.hpp).
#include <attnrank/analysis/result_guard.hpp>

#include <attnrank/error.hpp>
#include <attnrank/numbers/bands.hpp>
#include <attnrank/numbers/scalar_traits.hpp>

#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>

namespace attnrank {
namespace {

/// A double as its 17 significant digits (what it is, not what it rounds to).
std::string num(double x) {
  std::ostringstream s;
  s << std::setprecision(17) << x;
  return s.str();
}

/// Collects nothing: the first violation throws, naming `result_` and the band.
class ResultGuard {
 public:
  explicit ResultGuard(std::string result) : result_(std::move(result)) {}

  void band(const std::string& name, double lo, double hi, bool infinite_allowed = false) const {
    const std::string why = band_violation(lo, hi, infinite_allowed);
    if (!why.empty()) fail(std::string("the band ") + name + " [" + num(lo) + ", " + num(hi) + "] is " + why);
  }
  /// A band of a value that is >= 0 (an error, a singular value).
  void nonnegative_band(const std::string& name, double lo, double hi, bool infinite_allowed = false) const {
    band(name, lo, hi, infinite_allowed);
    if (!(lo >= 0))
      fail(std::string("the band ") + name + " [" + num(lo) + ", " + num(hi) + "] has a negative lower end");
  }
  void counts(const std::string& name, Eigen::Index lo, Eigen::Index hi) const {
    if (!(lo <= hi))
      fail(std::string("the bounds ") + name + " [" + std::to_string(lo) + ", " + std::to_string(hi) +
           "] are inverted");
  }
  void require(bool ok, const std::string& what) const {
    if (!ok) fail(what);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw internal_error(
        result_ + ": " + what +
        " -- attnrank refuses to report it; this is a bug in attnrank, please report it with the input");
  }
  std::string result_;
};

void guard_output_error(const ResultGuard& g, const std::string& who, const OutputError& e) {
  const bool infinite = e.infinite();  // a non-finite output entry (or a missed +inf) is a proven infinite error
  g.nonnegative_band(who + " max_abs_error", e.max_abs_error_lower, e.max_abs_error_upper, infinite);
  g.nonnegative_band(who + " max_rel_error", e.max_rel_error_lower, e.max_rel_error_upper, true);  // inf where E = 0
  g.nonnegative_band(who + " max_abs_exact", e.max_abs_exact_lower, e.max_abs_exact_upper);
  g.nonnegative_band(who + " mean_abs_error", e.mean_abs_error_lower, e.mean_abs_error_upper, infinite);
  g.nonnegative_band(who + " rms_error", e.rms_error_lower, e.rms_error_upper, infinite);
  g.require(e.mean_abs_error_lower <= e.max_abs_error_upper && e.rms_error_lower <= e.max_abs_error_upper,
            who + " a mean or RMS error's lower bound is above the max error's upper bound");
}

/// error_lower <= E* <= error_upper, and the epsilon verdict those bounds give.
void guard_error_band(const ResultGuard& g, double lower, double upper, const std::optional<double>& epsilon,
                      const std::optional<std::string>& verdict) {
  g.nonnegative_band("E* (error_lower, error_upper)", lower, upper);
  if (!epsilon || !verdict) return;
  if (*verdict == "within")
    g.require(upper <= *epsilon,
              std::string("epsilon_verdict is within but error_upper ") + num(upper) + " > epsilon " + num(*epsilon));
  if (*verdict == "not_within")
    g.require(lower > *epsilon, std::string("epsilon_verdict is not_within but error_lower ") + num(lower) +
                                    " <= epsilon " + num(*epsilon));
}

void guard_floor(const ResultGuard& g, Eigen::Index dk, Eigen::Index lower, Eigen::Index upper, Verdict v,
                 bool zero_entry, bool on_embeddings) {
  g.counts("floor (floor_lower, floor_upper)", lower, upper);
  if (v == Verdict::reachable)
    g.require(!zero_entry && upper <= dk, std::string("the verdict is reachable but floor_upper ") +
                                              std::to_string(upper) + " > d_k " + std::to_string(dk) +
                                              " (or the target has a zero)");
  // With embeddings a violated linear constraint proves unreachable at any floor.
  if (v == Verdict::unreachable)
    g.require(zero_entry || on_embeddings || lower > dk, std::string("the verdict is unreachable but floor_lower ") +
                                                             std::to_string(lower) + " <= d_k " + std::to_string(dk));
}

void guard_width(const ResultGuard& g, Eigen::Index lower, const std::optional<Eigen::Index>& upper) {
  g.require(lower >= 1, std::string("width_lower ") + std::to_string(lower) + " is below 1");
  if (upper) g.counts("width (width_lower, width_upper)", lower, *upper);
}

}  // namespace

namespace {

/// One checked tensor: its bands, and each verdict against the bounds it rests on. The
/// verdict's tolerance was rounded against its claim (attention/kernel_tolerance.hpp); here
/// each side is rounded the other way, so a sound verdict always passes.
void guard_tensor(const ResultGuard& g, const std::string& who, const KernelAnalysis& k, const OutputError& cand,
                  const std::optional<OutputError>& reference, double ratio_lower, double ratio_upper,
                  const std::optional<ToleranceVerdict>& error_verdict,
                  const std::optional<ToleranceVerdict>& ratio_verdict) {
  guard_output_error(g, who + "candidate", cand);
  if (reference) {
    guard_output_error(g, who + "reference", *reference);
    g.nonnegative_band(who + "error ratio", ratio_lower, ratio_upper, true);  // inf when the reference is proven exact
  }
  if (error_verdict && k.max_error) {
    const double rtol = k.rtol.value_or(0.0);
    if (*error_verdict == ToleranceVerdict::within &&
        !(cand.max_abs_error_upper <= tolerance_bound(*k.max_error, rtol, cand.max_abs_exact_upper, true)))
      g.require(false, who + "the error is called within the tolerance but its upper bound " +
                           num(cand.max_abs_error_upper) + " is above it");
    if (*error_verdict == ToleranceVerdict::exceeded &&
        !(cand.max_abs_error_lower > tolerance_bound(*k.max_error, rtol, cand.max_abs_exact_lower, false)))
      g.require(false, who + "the error is called above the tolerance but its lower bound " +
                           num(cand.max_abs_error_lower) + " is not");
  }
  if (ratio_verdict && k.max_ratio && reference) {
    const double atol = k.ratio_atol.value_or(0.0);
    if (*ratio_verdict == ToleranceVerdict::within &&
        !(cand.max_abs_error_upper <= tolerance_bound(atol, *k.max_ratio, reference->max_abs_error_lower, true)))
      g.require(false, who + "the ratio is called within max_ratio but the candidate's upper bound is above it");
    if (*ratio_verdict == ToleranceVerdict::exceeded &&
        !(cand.max_abs_error_lower > tolerance_bound(atol, *k.max_ratio, reference->max_abs_error_upper, false)))
      g.require(false, who + "the ratio is called above max_ratio but the candidate's lower bound is not");
  }
}

}  // namespace

void guard_result(const KernelAnalysis& k) {
  const ResultGuard g("check-kernel");
  if (k.result) {
    const KernelCheck& c = *k.result;
    guard_tensor(g, "", k, c.candidate, c.reference, c.ratio_lower, c.ratio_upper, k.error_verdict, k.ratio_verdict);
  }
  if (k.backward) g.nonnegative_band("backward enclosure_width", 0, k.backward->enclosure_width, true);
  for (const GradientReport& r : k.gradients)
    guard_tensor(g, r.role + " ", k, r.check.candidate, r.check.reference, r.check.ratio_lower, r.check.ratio_upper,
                 r.error_verdict, r.ratio_verdict);
}

void guard_result(const ReachAnalysis& r) {
  const ResultGuard g("reach");
  guard_floor(g, r.dk, r.floor_lower(), r.floor_upper(), r.verdict(), r.has_zero_entry(), r.on_embeddings());
  if (r.approx) {
    std::optional<std::string> verdict;
    if (r.epsilon) verdict = to_string(epsilon_verdict(*r.approx, *r.epsilon));
    guard_error_band(g, r.approx->error_lower, r.approx->error_upper, r.epsilon, verdict);
    // An exactly reachable target has E* = 0 at that width: no head misses it.
    if (r.verdict() == Verdict::reachable && !r.on_embeddings())
      g.require(r.approx->error_lower == 0,
                std::string("the verdict is reachable but error_lower is ") + num(r.approx->error_lower) + " > 0");
  }
  for (const auto& [name, value] : {std::pair{"witness error", r.witness_error}, std::pair{"best error", r.best_error}})
    if (value) g.require(*value >= 0, std::string("the ") + name + " " + num(*value) + " is negative or NaN");
}

void guard_result(const WidthAnalysis& w) {
  const ResultGuard g("width");
  const WidthResult& res = w.result;
  for (const WidthProfileEntry& e : res.profile) {
    if (!is_band(e.error_lower, e.error_upper) || !(e.error_lower >= 0))
      g.nonnegative_band(std::string("E* at d_k = ") + std::to_string(e.dk), e.error_lower, e.error_upper);
    if (e.dk < res.width_lower)
      g.require(e.error_lower > res.epsilon, std::string("width_lower is ") + std::to_string(res.width_lower) +
                                                 " but at d_k = " + std::to_string(e.dk) + " error_lower " +
                                                 num(e.error_lower) + " <= epsilon");
    if (e.dk == res.width_upper)
      g.require(e.error_upper <= res.epsilon, std::string("width_upper is ") + std::to_string(e.dk) +
                                                  " but there error_upper " + num(e.error_upper) + " > epsilon");
  }
  guard_width(g, res.width_lower, res.width_upper > 0 ? std::optional<Eigen::Index>(res.width_upper) : std::nullopt);
}

void guard_result(const SvdAnalysis& s) {
  const ResultGuard g("svd");
  for (std::size_t i = 0; i < s.values.values.size(); ++i) {
    const SingularValueBounds& b = s.values.values[i];
    if (!is_band(b.lower, b.upper) || !(b.lower >= 0))  // the name is built only for the message
      g.nonnegative_band(std::string("sigma_") + std::to_string(i + 1), b.lower, b.upper);
  }
  // A gap's lower bound may be <= 0 (not separated: it proves nothing) but never NaN.
  for (std::size_t i = 0; i < s.gap_lower.size(); ++i)
    if (std::isnan(s.gap_lower[i])) g.require(false, "the gap lower bound " + std::to_string(i + 1) + " is NaN");
}

void guard_result(const RankAnalysis& r) {
  const ResultGuard g("rank");
  if (r.certified) g.counts("rank (rank_lower, rank_upper)", r.certified->lower, r.certified->upper);
  if (r.numeric_top) g.counts("numeric rank (rank_lower, rank_upper)", r.numeric_top->lower, r.numeric_top->upper);
}

void guard_result(const DetAnalysis& d) {
  const ResultGuard g("det");
  if (!d.certified) return;
  const Interval& det = d.certified->det;
  g.require(!mpfi_nan_p(det.backend().data()) && !mpfi_is_empty(det.backend().data()),
            "the determinant's enclosure is NaN or inverted");
}

void guard_result(const HeadScan& h) {
  std::ostringstream name;
  name << "scan head [";
  for (std::size_t i = 0; i < h.index.size(); ++i) name << (i ? "," : "") << h.index[i];
  name << "]";
  const ResultGuard g(name.str());
  g.counts("floor (floor_lower, floor_upper)", h.floor_lower, h.floor_upper);
  if (h.error_lower && h.error_upper) guard_error_band(g, *h.error_lower, *h.error_upper, std::nullopt, std::nullopt);
  if (h.width_lower) guard_width(g, *h.width_lower, h.width_upper);
}

}  // namespace attnrank
