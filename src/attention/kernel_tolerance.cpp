// Judging a kernel check against a tolerance (attnrank/attention/kernel_tolerance.hpp).
#include <attnrank/attention/kernel_tolerance.hpp>

#include <attnrank/error.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace attnrank {
namespace {

void require_tolerance(double x, const char* what) {
  if (!(std::isfinite(x) && x >= 0))
    throw input_error(std::string(what) + " = " + std::to_string(x) + " is not a non-negative finite number");
}


ToleranceVerdict judge(double lower, double upper, double allowed_low, double allowed_high) {
  if (upper <= allowed_low) return ToleranceVerdict::within;
  if (lower > allowed_high) return ToleranceVerdict::exceeded;
  return ToleranceVerdict::undecided;
}

}  // namespace

double tolerance_bound(double a, double b, double c, bool up) {
  if (b == 0) return a;  // rtol = 0 beside an unbounded |E|: the true c is finite, so b c = 0
  double r;
  if (up) {
    UpwardRounding rounding;
    r = a + b * c;
    detail::rounding_barrier(r);
  } else {
    DownwardRounding rounding;
    r = a + b * c;
    detail::rounding_barrier(r);
  }
  return std::isnan(r) ? (up ? INFINITY : 0.0) : r;  // NaN only from a NaN c: nothing proven
}

const char* to_string(ToleranceVerdict v) {
  switch (v) {
    case ToleranceVerdict::within: return "within";
    case ToleranceVerdict::exceeded: return "exceeded";
    case ToleranceVerdict::undecided: break;
  }
  return "undecided";
}

ToleranceVerdict judge_error(const OutputError& e, const ErrorTolerance& tol) {
  require_tolerance(tol.atol, "atol");
  require_tolerance(tol.rtol, "rtol");
  if (e.infinite()) return ToleranceVerdict::exceeded;
  // rtol x max|E| with the bound on max|E| that makes each claim hardest.
  const double low = tolerance_bound(tol.atol, tol.rtol, e.max_abs_exact_lower, false);
  const double high = tolerance_bound(tol.atol, tol.rtol, e.max_abs_exact_upper, true);
  return judge(e.max_abs_error_lower, e.max_abs_error_upper, low, high);
}

ToleranceVerdict judge_ratio(const OutputError& c, const OutputError& r, double max_ratio, double ratio_atol) {
  require_tolerance(max_ratio, "max_ratio");
  require_tolerance(ratio_atol, "ratio_atol");
  // An infinite reference error first: then nothing is proven to compare with, even an
  // infinite candidate error (NaN in both: infinity <= c infinity proves nothing either way).
  if (r.infinite()) return ToleranceVerdict::undecided;
  if (c.infinite()) return ToleranceVerdict::exceeded;
  // ratio_atol = 0 is the multiplicative form: a reference with error 0 then allows only error 0.
  return judge(c.max_abs_error_lower, c.max_abs_error_upper,
               tolerance_bound(ratio_atol, max_ratio, r.max_abs_error_lower, false),
               tolerance_bound(ratio_atol, max_ratio, r.max_abs_error_upper, true));
}

ToleranceVerdict judge_ratio(const KernelCheck& check, double max_ratio, double ratio_atol) {
  if (!check.reference) throw input_error("a ratio tolerance needs a reference output");
  return judge_ratio(check.candidate, *check.reference, max_ratio, ratio_atol);
}

std::optional<ErrorTolerance> default_tolerance(const std::string& dtype) {
  if (dtype == "float16") return ErrorTolerance{1e-5, 1e-3};
  if (dtype == "bfloat16") return ErrorTolerance{1e-5, 1.6e-2};
  if (dtype == "float32") return ErrorTolerance{1e-5, 1.3e-6};
  if (dtype == "float64") return ErrorTolerance{1e-7, 1e-7};
  return std::nullopt;
}

std::string inexact_reference_note(const OutputError& reference, const std::string& dtype, const std::string& role) {
  const std::optional<ErrorTolerance> tol = default_tolerance(dtype);
  if (!tol || reference.infinite() || judge_error(reference, *tol) != ToleranceVerdict::exceeded) return "";
  std::string note("the reference ");
  note += role;
  note += "'s own error is at least ";
  note += format_lower_bound(reference.max_abs_error_lower);
  note += ", above ";
  note += dtype;
  note += "'s default tolerance (atol ";
  note += shortest_decimal(tol->atol);
  note += " + rtol ";
  note += shortest_decimal(tol->rtol);
  note += " x max |exact|): a reference that far from exact may share the kernel's bug, and a ratio against it "
          "then passes; check the reference itself with max_error";
  return note;
}

ToleranceVerdict tolerance_verdict_from_name(const std::string& name) {
  for (ToleranceVerdict v : {ToleranceVerdict::within, ToleranceVerdict::exceeded, ToleranceVerdict::undecided})
    if (name == to_string(v)) return v;
  throw input_error("verdict '" + name + "' is not within, exceeded or undecided");
}

std::optional<ToleranceVerdict> combined_verdict(const std::vector<ToleranceVerdict>& verdicts) {
  if (verdicts.empty()) return std::nullopt;
  if (std::find(verdicts.begin(), verdicts.end(), ToleranceVerdict::exceeded) != verdicts.end())
    return ToleranceVerdict::exceeded;
  if (std::find(verdicts.begin(), verdicts.end(), ToleranceVerdict::undecided) != verdicts.end())
    return ToleranceVerdict::undecided;
  return ToleranceVerdict::within;
}

}  // namespace attnrank
