// Tests for attention/precision_profile.hpp and attention/error_budget.hpp: profiles read
// back what they write and refuse what cannot describe arithmetic; a correct fp32 kernel
// (computed here in float, two-pass, one block) never exceeds its profile's budget, at the
// extremes too (values near FLT_MIN and FLT_MAX); the budget only grows with the profile's
// roundoffs; a kernel off by far more than the budget is proven exceeded.
#include "support.hpp"

#include <attnrank/attention/error_budget.hpp>
#include <attnrank/error.hpp>

#include <cmath>
#include <limits>
#include <random>

using namespace attnrank;

namespace {

/// softmax(s Q K^T) V and its logsumexp as a float kernel computes them: float scores, the
/// row max, float exp, float sums (in order), float division (IEEE, round to nearest).
std::pair<Eigen::MatrixXd, Eigen::MatrixXd> float_kernel(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                                         const Eigen::MatrixXd& V, bool causal) {
  const Eigen::Index n = Q.rows(), nk = K.rows(), d = Q.cols(), dv = V.cols();
  const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(d)));
  Eigen::MatrixXd out(n, dv), lse(n, 1);
  for (Eigen::Index i = 0; i < n; ++i) {
    std::vector<float> s(static_cast<std::size_t>(nk));
    float m = -std::numeric_limits<float>::infinity();
    const Eigen::Index keys = causal ? i + 1 : nk;
    for (Eigen::Index j = 0; j < keys; ++j) {
      float acc = 0;
      for (Eigen::Index t = 0; t < d; ++t) acc += static_cast<float>(Q(i, t)) * static_cast<float>(K(j, t));
      s[static_cast<std::size_t>(j)] = acc * scale;
      m = std::max(m, s[static_cast<std::size_t>(j)]);
    }
    float l = 0;
    std::vector<float> o(static_cast<std::size_t>(dv), 0.0f);
    for (Eigen::Index j = 0; j < keys; ++j) {
      const float p = std::exp(s[static_cast<std::size_t>(j)] - m);
      l += p;
      for (Eigen::Index c = 0; c < dv; ++c) o[static_cast<std::size_t>(c)] += p * static_cast<float>(V(j, c));
    }
    for (Eigen::Index c = 0; c < dv; ++c) out(i, c) = o[static_cast<std::size_t>(c)] / l;
    lse(i, 0) = m + std::log(l);
  }
  return {out, lse};
}

Eigen::MatrixXd float_matrix(std::mt19937_64& rng, Eigen::Index rows, Eigen::Index cols, double scale) {
  std::normal_distribution<double> g;
  Eigen::MatrixXd m(rows, cols);
  for (double& x : m.reshaped()) x = static_cast<float>(g(rng) * scale);
  return m;
}

}  // namespace

TEST_CASE("attnrank::PrecisionProfile", "[unit]") {
  for (const std::string& name : profile_names()) {
    const PrecisionProfile p = named_profile(name);
    CHECK(p.name == name);
    CHECK(to_json(profile_from_json(to_json(p), "test")) == to_json(p));
    CHECK(to_json(profile_from_argument(name)) == to_json(p));
  }
  CHECK(named_profile("fa2-bf16").probabilities.u == 0x1p-8);
  CHECK(named_profile("fa3-fp8").probabilities.name == "float8_e4m3fn");
  CHECK(profile_from_argument(R"({"base": "fa2-fp16", "splits": 1})").splits == 1);
  for (const auto& [text, message] :
       std::vector<std::pair<std::string, std::string>>{{R"({"splits": 0})", "splits: needs an integer >= 1"},
                                                        {R"({"divide_u": 0.3})", "divide_u: 0.3 is not a unit roundoff"},
                                                        {R"({"output": "int8"})", "output: format 'int8'"},
                                                        {R"({"colour": 1})", "'colour' is not a field"},
                                                        {R"({"scores": "fast"})", "scores: 'fast' is not"},
                                                        {"{", "not valid JSON"},
                                                        {"fa9", "neither a profile's name"}}) {
    const std::string argument = text;  // clang 14 does not capture structured bindings
    CHECK_THAT(attnrank::test::input_error_message([&] { (void)profile_from_argument(argument); }),
               Catch::Contains(message));
  }
}

TEST_CASE("attnrank::error_budget", "[property]") {
  rc::prop("a correct float kernel is never proven outside the torch-math-fp32 budget, extremes included", [] {
    const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
    std::mt19937_64 rng(seed);
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 24);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 12);
    const auto dv = *rc::gen::inRange<Eigen::Index>(1, 5);
    const double qk_scale = *rc::gen::element(1e-3, 1.0, 4.0);
    const double v_scale = *rc::gen::element(1e-39, 1e-30, 1.0, 1e30, 1e37);
    const bool causal = *rc::gen::arbitrary<bool>();
    const Eigen::MatrixXd Q = float_matrix(rng, n, d, qk_scale), K = float_matrix(rng, n, d, qk_scale),
                          V = float_matrix(rng, n, dv, v_scale);
    const auto [out, lse] = float_kernel(Q, K, V, causal);
    RC_PRE(out.allFinite() && lse.allFinite());
    KernelCheckOptions options;
    if (causal) options.mask = Mask::causal(n);
    const std::vector<HeadBudget> b = error_budget({Q}, {K}, {V}, options, named_profile("torch-math-fp32"));
    RC_ASSERT(b.size() == 1u);
    RC_ASSERT(!b[0].out.hasNaN());
    RC_ASSERT((b[0].out.array() >= 0).all());
    const BudgetVerdict o = judge_budget({out}, {b[0].exact_out}, {b[0].out});
    const BudgetVerdict l = judge_budget({lse}, {b[0].exact_lse}, {Eigen::MatrixXd(b[0].lse)});
    RC_ASSERT(o.verdict != ToleranceVerdict::exceeded);
    RC_ASSERT(l.verdict != ToleranceVerdict::exceeded);
    RC_ASSERT(o.usage_lower <= 1);
    // The budget grows with every roundoff of the profile.
    PrecisionProfile looser = named_profile("torch-math-fp32");
    looser.exp_relative *= 4;
    looser.pv.u *= 2;
    const std::vector<HeadBudget> wider = error_budget({Q}, {K}, {V}, options, looser);
    RC_ASSERT((wider[0].out.array() >= b[0].out.array()).all());
    // A kernel off by 1000 times the largest budget somewhere is proven exceeded there.
    Eigen::MatrixXd bad = out;
    const double budget = b[0].out(n - 1, 0);
    RC_PRE(std::isfinite(budget) && std::fabs(out(n - 1, 0)) + 1000 * budget < 1e300);
    bad(n - 1, 0) += 1000 * budget + 1e-300;
    const BudgetVerdict off = judge_budget({bad}, {b[0].exact_out}, {b[0].out});
    RC_ASSERT(off.verdict == ToleranceVerdict::exceeded);
    RC_ASSERT(off.worst_row == n - 1);
    RC_ASSERT(off.usage_lower > 1);
  });
}

TEST_CASE("attnrank::error_budget refusals and non-finite candidates", "[unit]") {
  const Eigen::MatrixXd Q = Eigen::MatrixXd::Constant(3, 2, 0.5), V = Eigen::MatrixXd::Identity(3, 3);
  KernelCheckOptions options;
  options.softcap = 30;
  CHECK_THAT(attnrank::test::input_error_message([&] { (void)error_budget({Q}, {Q}, {V}, options, named_profile("fp32")); }),
             Catch::Contains("does not model a softcap yet"));
  const std::vector<HeadBudget> b = error_budget({Q}, {Q}, {V}, {}, named_profile("fp32"));
  Eigen::MatrixXd nan = (b[0].exact_out.lo + b[0].exact_out.hi) / 2;
  nan(1, 1) = std::numeric_limits<double>::quiet_NaN();
  const BudgetVerdict v = judge_budget({nan}, {b[0].exact_out}, {b[0].out});
  CHECK(v.verdict == ToleranceVerdict::exceeded);
  CHECK(v.nonfinite == 1u);
}

TEST_CASE("attnrank::NumberFormat::ulp", "[property]") {
  rc::prop("an ulp is a power of two, the format's spacing at |x|, non-decreasing in |x|", [] {
    const NumberFormat f =
        number_format(*rc::gen::element<std::string>("bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"));
    const double x = std::ldexp(*rc::gen::inRange(1, 1 << 20) / double(1 << 20), *rc::gen::inRange(-160, 140));
    const double y = x * (1 + *rc::gen::inRange(0, 100) / 10.0);
    int e;
    RC_ASSERT(std::frexp(f.ulp(x), &e) == 0.5);  // a power of two
    RC_ASSERT(f.ulp(x) <= f.ulp(y));
    // At and above the smallest normal: the spacing of numbers with `digits` significant bits.
    if (x >= std::ldexp(1.0, f.min_exponent)) {
      RC_ASSERT(f.ulp(x) <= x * std::ldexp(1.0, 1 - f.digits));
      RC_ASSERT(f.ulp(x) > x * std::ldexp(1.0, -f.digits));
    } else {
      RC_ASSERT(f.ulp(x) == std::ldexp(1.0, f.min_exponent - f.digits + 1));
    }
    RC_ASSERT(f.ulp(-x) == f.ulp(x));
  });
  CHECK(number_format("float32").ulp(1.0) == 0x1p-23);
  CHECK(number_format("bfloat16").ulp(1.5) == 0x1p-7);
  CHECK(number_format("float16").ulp(0.0) == 0x1p-24);
  CHECK(number_format("float64").ulp(std::numeric_limits<double>::max()) == 0x1p971);
}
