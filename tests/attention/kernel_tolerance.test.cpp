// Tests for attention/kernel_tolerance.hpp: a verdict is never wrong for any true
// error and any true max |E| inside the certified bounds (exact rationals are the
// oracle), it is decided when the bounds are points clear of the tolerance, and
// on a real check it tells a kernel that is off by 1e-3 from one that is not.
#include "support.hpp"

#include <attnrank/attention/kernel_tolerance.hpp>
#include <attnrank/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace attnrank;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// Non-negative doubles, the nasty ones included: 0, subnormals, powers of two, huge, +inf.
rc::Gen<double> gen_magnitude() {
  return rc::gen::oneOf(rc::gen::element(0.0, 0x1p-1074, 0x1p-1022, 1e-300, 1.0, 2.0, 1e300,
                                         std::numeric_limits<double>::max(), inf),
                        rc::gen::map(rc::gen::inRange(-60, 10), [](int e) { return std::ldexp(1.0, e); }),
                        rc::gen::map(rc::gen::inRange(0, 1 << 30),
                                     [](int m) { return static_cast<double>(m) * 0x1p-30; }));
}

/// A sorted pair [a, b] of magnitudes, a point half the time.
std::pair<double, double> gen_bounds() {
  double a = *gen_magnitude(), b = *gen_magnitude();
  if (a > b) std::swap(a, b);
  if (*rc::gen::arbitrary<bool>()) b = a;
  return {a, b};
}

/// A point of [a, b] (finite ends only; an infinite end is a limit, not a value).
Rational gen_point(double a, double b) {
  const double top = std::isfinite(b) ? b : std::numeric_limits<double>::max();
  const int k = *rc::gen::inRange(0, 5);
  if (k == 0) return Rational(a);
  if (k == 1) return Rational(top);
  const Rational t(*rc::gen::inRange(0, 1000), 1000);
  return Rational(a) + t * (Rational(top) - Rational(a));
}

OutputError error_with(std::pair<double, double> error, std::pair<double, double> exact) {
  OutputError e;
  e.max_abs_error_lower = error.first;
  e.max_abs_error_upper = error.second;
  e.max_abs_exact_lower = exact.first;
  e.max_abs_exact_upper = exact.second;
  return e;
}

}  // namespace

TEST_CASE("attnrank::judge_error") {
  rc::prop("within and exceeded hold for every true error and max |exact| inside the bounds", [] {
    const auto error = gen_bounds(), exact = gen_bounds();
    RC_PRE(std::isfinite(error.first) && std::isfinite(exact.first));
    const ErrorTolerance tol{*gen_magnitude(), *gen_magnitude()};
    RC_PRE(std::isfinite(tol.atol) && std::isfinite(tol.rtol));
    const ToleranceVerdict v = judge_error(error_with(error, exact), tol);
    const Rational e = gen_point(error.first, error.second), m = gen_point(exact.first, exact.second);
    const Rational allowed = Rational(tol.atol) + Rational(tol.rtol) * m;
    if (v == ToleranceVerdict::within) RC_ASSERT(e <= allowed);
    if (v == ToleranceVerdict::exceeded) RC_ASSERT(e > allowed);
  });
  rc::prop("point bounds clear of the tolerance by a part in 2^40 are decided, the right way", [] {
    const double e = *gen_magnitude(), m = *gen_magnitude(), atol = *gen_magnitude(), rtol = *gen_magnitude();
    RC_PRE(std::isfinite(e) && std::isfinite(m) && std::isfinite(atol) && std::isfinite(rtol));
    const Rational allowed = Rational(atol) + Rational(rtol) * Rational(m);
    const Rational margin = allowed * Rational(1, 1LL << 40);
    RC_PRE(allowed < Rational(1e300) && allowed > Rational(0x1p-1000));  // no overflow, no absolute underflow error
    const ToleranceVerdict v = judge_error(error_with({e, e}, {m, m}), {atol, rtol});
    if (Rational(e) + margin < allowed) RC_ASSERT(v == ToleranceVerdict::within);
    if (Rational(e) > allowed + margin) RC_ASSERT(v == ToleranceVerdict::exceeded);
  });
  SECTION("a non-finite output entry exceeds every tolerance; bad tolerances are input errors") {
    OutputError e = error_with({inf, inf}, {1, 1});
    e.nonfinite = 1;
    CHECK(judge_error(e, {1e300, 1e300}) == ToleranceVerdict::exceeded);
    CHECK_THROWS_AS(judge_error(error_with({0, 0}, {1, 1}), {-1, 0}), input_error);
    CHECK_THROWS_AS(judge_error(error_with({0, 0}, {1, 1}), {0, std::nan("")}), input_error);
    CHECK(std::string(to_string(ToleranceVerdict::undecided)) == "undecided");
  }
  SECTION("an unbounded max |exact| with rtol > 0 proves nothing within, and nothing exceeded") {
    CHECK(judge_error(error_with({1e-3, 1e-3}, {1, inf}), {0, 1e-3}) == ToleranceVerdict::within);
    CHECK(judge_error(error_with({5, 5}, {1, inf}), {0, 1e-3}) == ToleranceVerdict::undecided);
  }
}

TEST_CASE("attnrank::judge_ratio") {
  rc::prop("within and exceeded hold for every pair of true errors inside the bounds", [] {
    const auto c = gen_bounds(), r = gen_bounds();
    RC_PRE(std::isfinite(c.first) && std::isfinite(r.first));
    const double ratio = *gen_magnitude();
    RC_PRE(std::isfinite(ratio));
    KernelCheck check;
    check.candidate = error_with(c, {1, 1});
    check.reference = error_with(r, {1, 1});
    const ToleranceVerdict v = judge_ratio(check, ratio);
    const Rational ec = gen_point(c.first, c.second), er = gen_point(r.first, r.second);
    if (v == ToleranceVerdict::within) RC_ASSERT(ec <= Rational(ratio) * er);
    if (v == ToleranceVerdict::exceeded) RC_ASSERT(ec > Rational(ratio) * er);
  });
  SECTION("the multiplicative form: an exact reference allows only an exact candidate") {
    KernelCheck check;
    check.reference = error_with({0, 0}, {1, 1});
    check.candidate = error_with({0, 0}, {1, 1});
    CHECK(judge_ratio(check, 2) == ToleranceVerdict::within);
    check.candidate = error_with({1e-300, 1e-300}, {1, 1});
    CHECK(judge_ratio(check, 1e300) == ToleranceVerdict::exceeded);
  }
  SECTION("without a reference it is an input error") {
    CHECK_THROWS_AS(judge_ratio(KernelCheck{}, 2), input_error);
  }
  SECTION("infinite errors: a NaN candidate beside a finite reference exceeds; beside a NaN reference nothing is proven") {
    const double inf = std::numeric_limits<double>::infinity();
    KernelCheck check;
    check.candidate = error_with({inf, inf}, {1, 1});
    check.candidate.nonfinite = 3;
    check.reference = error_with({1e-3, 2e-3}, {1, 1});
    CHECK(judge_ratio(check, 2) == ToleranceVerdict::exceeded);
    check.reference->max_abs_error_lower = check.reference->max_abs_error_upper = inf;
    check.reference->nonfinite = 5;  // NaN in both: infinity <= 2 infinity says nothing
    CHECK(judge_ratio(check, 2) == ToleranceVerdict::undecided);
    check.candidate = error_with({0, 1e-7}, {1, 1});
    CHECK(judge_ratio(check, 2) == ToleranceVerdict::undecided);
  }
}

TEST_CASE("attnrank::judge_error on a real check: one entry off by 1e-3") {
  std::mt19937_64 rng(20261204);
  std::normal_distribution<double> normal;
  const Eigen::Index n = 32, d = 16;
  const auto gauss = [&] {
    Eigen::MatrixXd M(n, d);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < d; ++j) M(i, j) = static_cast<float>(normal(rng));
    return M;
  };
  const std::vector<Eigen::MatrixXd> q{gauss()}, k{gauss()}, v{gauss()};
  KernelCheckOptions options;
  options.mask = Mask::causal(n);
  const BoundsMatrix E = certified_attention(q[0], k[0], v[0], ScaleBounds::inverse_sqrt(d), &*options.mask);
  Eigen::MatrixXd good = (E.lo + E.hi) / 2;
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < d; ++j) good(i, j) = static_cast<float>(good(i, j));  // a float32 kernel
  std::vector<Eigen::MatrixXd> bad{good};
  bad[0](7, 3) += 1e-3;
  const KernelCheck ok = check_kernel(q, k, v, {good}, nullptr, options);
  const KernelCheck off = check_kernel(q, k, v, bad, nullptr, options);
  CHECK(judge_error(ok.candidate, {1e-5, 1.3e-6}) == ToleranceVerdict::within);
  CHECK(judge_error(off.candidate, {1e-5, 1.3e-6}) == ToleranceVerdict::exceeded);
  CHECK(off.candidate.worst_row == 7);
  CHECK(off.candidate.worst_column == 3);
  // The candidate against the good output as its reference: a ratio near 1e-3 / 2^-25.
  const std::vector<Eigen::MatrixXd> reference{good};
  const KernelCheck pair = check_kernel(q, k, v, bad, &reference, options);
  CHECK(judge_ratio(pair, 2) == ToleranceVerdict::exceeded);
  CHECK(judge_ratio(pair, pair.ratio_upper * 1.01) == ToleranceVerdict::within);
}

TEST_CASE("attnrank::default_tolerance, inexact_reference_note, combined_verdict", "[property]") {
  SECTION("torch.testing's defaults, and none for other names") {
    CHECK(default_tolerance("float32")->rtol == 1.3e-6);
    CHECK(default_tolerance("float32")->atol == 1e-5);
    CHECK(default_tolerance("bfloat16")->rtol == 1.6e-2);
    CHECK(default_tolerance("float16")->rtol == 1e-3);
    CHECK(default_tolerance("float64")->atol == 1e-7);
    for (const char* other : {"int8", "float8_e4m3fn", "", "Float32"}) CHECK_FALSE(default_tolerance(other));
  }
  rc::prop("a reference is noted exactly when its error is proven above its dtype's default tolerance", [] {
    const std::string dtype = *rc::gen::element<std::string>("float16", "bfloat16", "float32", "float64", "uint8");
    const OutputError r = error_with(gen_bounds(), gen_bounds());
    const std::string note = inexact_reference_note(r, dtype, "dq");
    const std::optional<ErrorTolerance> tol = default_tolerance(dtype);
    const bool proven_above = tol && judge_error(r, *tol) == ToleranceVerdict::exceeded;
    RC_ASSERT(note.empty() == !proven_above);
    if (!note.empty()) {
      RC_ASSERT(note.find("the reference dq's own error is at least ") == 0);
      RC_ASSERT(note.find(dtype + "'s default tolerance") != std::string::npos);
    }
  });
  SECTION("verdicts by name") {
    for (ToleranceVerdict v : {ToleranceVerdict::within, ToleranceVerdict::exceeded, ToleranceVerdict::undecided})
      CHECK(tolerance_verdict_from_name(to_string(v)) == v);
    CHECK_THROWS_AS(tolerance_verdict_from_name("passed"), input_error);
  }
  rc::prop("combined_verdict: exceeded over undecided over within", [] {
    const auto verdicts = *rc::gen::container<std::vector<ToleranceVerdict>>(
        rc::gen::element(ToleranceVerdict::within, ToleranceVerdict::exceeded, ToleranceVerdict::undecided));
    const std::optional<ToleranceVerdict> v = combined_verdict(verdicts);
    const auto has = [&](ToleranceVerdict x) { return std::find(verdicts.begin(), verdicts.end(), x) != verdicts.end(); };
    if (verdicts.empty()) RC_ASSERT(!v);
    else if (has(ToleranceVerdict::exceeded)) RC_ASSERT(*v == ToleranceVerdict::exceeded);
    else if (has(ToleranceVerdict::undecided)) RC_ASSERT(*v == ToleranceVerdict::undecided);
    else RC_ASSERT(*v == ToleranceVerdict::within);
  });
}
