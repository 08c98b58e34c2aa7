// attnrank/analysis/: the policy the analyses decide once (which bounds run, which
// witness the verdict quotes, the certificate) and the one vocabulary of their
// JSON writers, for free and masked heads alike; and no global state: analyses in
// two threads answer as they do one after the other.
#include "mask_support.hpp"
#include "support.hpp"

#include <attnrank/analysis.hpp>

#include <cmath>
#include <set>
#include <thread>

using namespace attnrank;
using attnrank::test::gen_low_rank_exponents;
using attnrank::test::masked_power_target;
using attnrank::test::input_error_message;

namespace {

/// A target 2^M with M of rank r (entries 2^-4 .. 2^4): a head of width r makes it.
Matrix<Rational> gen_target(Eigen::Index n, Eigen::Index r) {
  return masked_power_target(gen_low_rank_exponents(n, r), Mask::full(n));
}

std::set<std::string> keys(const nlohmann::json& j) {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) out.insert(k);
  return out;
}

}  // namespace

TEST_CASE("attnrank::analyze_reach", "[property]") {
  rc::prop("the verdict line quotes the best certified witness the pipeline holds", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 7);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const bool masked = *rc::gen::arbitrary<bool>();
    ReachQuestion q;
    q.dk = dk;
    q.refine.policy = RefinePolicy::never;  // the starts only: the law is about the choice, not the search
    if (masked) q.mask = Mask::causal(n);
    Matrix<Rational> A = gen_target(n, *rc::gen::inRange<Eigen::Index>(1, n + 1));
    if (masked) A = masked_power_target(gen_low_rank_exponents(n, 2), *q.mask);
    const ReachAnalysis r = analyze_reach(A, q);
    RC_ASSERT(r.approx.has_value());  // n <= 512: the policy runs the error bounds
    std::optional<double> best;
    for (double e : {r.witness_error.value_or(INFINITY), r.approx->error_upper})
      if (std::isfinite(e) && (!best || e < *best)) best = e;
    RC_ASSERT(r.best_error == best);
    if (r.witness_error && std::isfinite(*r.witness_error)) RC_ASSERT(*r.best_error <= *r.witness_error);
  });

  rc::prop("without the certificate (the scan's question) every other number is the same", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 7);
    ReachQuestion q;
    q.dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    q.refine.policy = RefinePolicy::never;
    if (*rc::gen::arbitrary<bool>()) q.mask = Mask::causal(n);
    const Matrix<Rational> A = q.mask ? masked_power_target(gen_low_rank_exponents(n, 2), *q.mask)
                                      : gen_target(n, *rc::gen::inRange<Eigen::Index>(1, n + 1));
    nlohmann::json with = to_json(analyze_reach(A, q));
    q.certificate = false;
    nlohmann::json without = to_json(analyze_reach(A, q));
    RC_ASSERT(!with["certificate"].is_null());
    RC_ASSERT(without["certificate"].is_null());
    with.erase("certificate");
    without.erase("certificate");
    RC_ASSERT(with == without);
  });

  rc::prop("a mask that allows every key asks the free question: the same verdict and floor", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 7);
    const Matrix<Rational> A = gen_target(n, *rc::gen::inRange<Eigen::Index>(1, n + 1));
    ReachQuestion q;
    q.dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    q.error_bounds = ErrorBoundsPolicy::never;
    const ReachAnalysis free = analyze_reach(A, q);
    q.mask = Mask::full(n);
    const ReachAnalysis masked = analyze_reach(A, q);
    RC_ASSERT(masked.verdict() == free.verdict());
    RC_ASSERT(masked.floor_lower() <= free.floor_upper());
    RC_ASSERT(free.floor_lower() <= masked.floor_upper());
  });

  rc::prop("free and masked reports share one key vocabulary", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 6);
    ReachQuestion q;
    q.dk = 1;
    q.refine.policy = RefinePolicy::never;
    const nlohmann::json free = to_json(analyze_reach(gen_target(n, 1), q));
    q.mask = Mask::causal(n);
    const nlohmann::json masked = to_json(analyze_reach(masked_power_target(gen_low_rank_exponents(n, 1), *q.mask), q));
    for (const char* k : {"n", "d_k", "question", "mask", "verdict", "reason", "rows_sum_to_one", "max_abs_error",
                          "certificate", "floor_lower", "floor_upper", "bits", "floor_lower_reason",
                          "floor_upper_reason", "error_lower", "error_upper", "error_lower_reason", "seed",
                          "witness_Q", "witness_K", "schema"}) {
      RC_ASSERT(free.contains(k));
      RC_ASSERT(masked.contains(k));
    }
    for (const std::string& k : keys(free)) RC_ASSERT(k != "dk");
    RC_ASSERT(masked["mask"] == "causal");
    RC_ASSERT(free["mask"] == "none");
  });

  rc::prop("the certificate the analysis assembles is accepted by the independent checker", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 6);
    ReachQuestion q;
    q.dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    q.refine.policy = RefinePolicy::never;
    if (*rc::gen::arbitrary<bool>()) q.mask = Mask::causal(n);
    const Matrix<Rational> A = q.mask ? masked_power_target(gen_low_rank_exponents(n, 2), *q.mask) : gen_target(n, 2);
    const ReachAnalysis r = analyze_reach(A, q);
    const CertificateAnalysis c = analyze_certificate(A, r.certificate, q.mask, std::nullopt, "cert", "A");
    RC_ASSERT(c.valid);
  });

  SECTION("the error-bounds policy: automatic up to the size limit or with epsilon, never, always") {
    Matrix<Rational> A(5, 5);
    for (Eigen::Index i = 0; i < 5; ++i)
      for (Eigen::Index j = 0; j < 5; ++j) A(i, j) = i == j ? Rational(3, 5) : Rational(1, 10);
    ReachQuestion q;
    q.dk = 1;
    q.refine.policy = RefinePolicy::never;
    q.error_bounds_size_limit = 4;
    CHECK_FALSE(analyze_reach(A, q).approx);
    CHECK(to_json(analyze_reach(A, q)).contains("error_upper") == false);
    CHECK(to_text(analyze_reach(A, q)).find("not computed for n > 4") != std::string::npos);
    q.epsilon = 0.5;
    const ReachAnalysis with_epsilon = analyze_reach(A, q);
    REQUIRE(with_epsilon.approx);
    CHECK(to_json(with_epsilon).contains("epsilon_verdict"));
    q.error_bounds = ErrorBoundsPolicy::never;
    CHECK_FALSE(analyze_reach(A, q).approx);
    q.epsilon.reset();
    q.error_bounds = ErrorBoundsPolicy::always;
    CHECK(analyze_reach(A, q).approx);
  }

  SECTION("bad questions are input errors naming the target") {
    ReachQuestion q;
    q.dk = 1;
    q.target_name = "mine.csv";
    Matrix<Rational> A(2, 2);
    A << Rational(1, 2), Rational(1, 2), Rational(-1, 2), Rational(3, 2);
    CHECK_THAT(input_error_message([&] { analyze_reach(A, q); }), Catch::Contains("mine.csv"));
    q.epsilon = 2;
    CHECK_THAT(input_error_message([&] { analyze_reach(Matrix<Rational>::Constant(2, 2, Rational(1, 2)), q); }),
               Catch::Contains("outside [0, 1]"));
  }
}

TEST_CASE("attnrank::analyses in two threads", "[unit][threads]") {
  // No global state: each analysis keeps its options and notes to itself.
  const Matrix<Rational> A = Matrix<Rational>::Constant(4, 4, Rational(1, 4));
  Matrix<Rational> B(4, 4);
  for (Eigen::Index i = 0; i < 4; ++i)
    for (Eigen::Index j = 0; j < 4; ++j) B(i, j) = i == j ? Rational(7, 10) : Rational(1, 10);
  ReachQuestion qa, qb;
  qa.dk = 1;
  qb.dk = 2;
  qb.mask = Mask::causal(4);
  Matrix<Rational> Bc = B;
  for (Eigen::Index i = 0; i < 4; ++i)
    for (Eigen::Index j = i + 1; j < 4; ++j) Bc(i, j) = 0;
  const std::string alone_a = to_json(analyze_reach(A, qa)).dump(), alone_b = to_json(analyze_reach(Bc, qb)).dump();
  const std::string alone_rank = to_json(analyze_rank(B, {RankMode::certified, 53, std::nullopt, 0, "B"})).dump();
  std::string together_a, together_b, together_rank;
  std::thread ta([&] { together_a = to_json(analyze_reach(A, qa)).dump(); });
  std::thread tb([&] { together_b = to_json(analyze_reach(Bc, qb)).dump(); });
  std::thread tr([&] { together_rank = to_json(analyze_rank(B, {RankMode::certified, 53, std::nullopt, 0, "B"})).dump(); });
  ta.join();
  tb.join();
  tr.join();
  CHECK(together_a == alone_a);
  CHECK(together_b == alone_b);
  CHECK(together_rank == alone_rank);
}

TEST_CASE("attnrank::analyze_width, analyze_rank, analyze_svd: their writers", "[unit]") {
  SECTION("width_upper is null exactly when no width has a certified witness within epsilon") {
    Matrix<Rational> A(4, 4);
    for (Eigen::Index i = 0; i < 4; ++i)
      for (Eigen::Index j = 0; j < 4; ++j) A(i, j) = i == j ? Rational(7, 10) : Rational(1, 10);
    WidthQuestion q;
    q.epsilon = 0;
    q.max_dk = 2;
    q.refine.policy = RefinePolicy::never;
    const WidthAnalysis none = analyze_width(A, q);
    CHECK(none.result.width_upper == 0);
    CHECK(to_json(none)["width_upper"].is_null());
    q.epsilon = 0.9;
    const WidthAnalysis some = analyze_width(A, q);
    CHECK(to_json(some)["width_upper"] == some.result.width_upper);
  }
  SECTION("numeric rank is not named as a proven bound") {
    const Matrix<Rational> I = Matrix<Rational>::Identity(3, 3);
    const nlohmann::json j = to_json(analyze_rank(I, {RankMode::numeric, 53, std::nullopt, 0, "I"}));
    CHECK(j["approx_rank_lower"] == 3);
    CHECK_FALSE(j.contains("rank_lower"));
    const nlohmann::json e = to_json(analyze_rank(I, {RankMode::exact, 53, std::nullopt, 0, "I"}));
    CHECK(e["rank_lower"] == 3);
    CHECK_FALSE(e.contains("approx_rank_lower"));
  }
  SECTION("svd without top gives every singular value, each enclosed") {
    Matrix<Rational> D = Matrix<Rational>::Zero(3, 3);
    D(0, 0) = 3;
    D(1, 1) = 2;
    D(2, 2) = 1;
    const SvdAnalysis s = analyze_svd(D, {std::nullopt, true, "D"});
    REQUIRE(s.values.values.size() == 3);
    for (int i = 0; i < 3; ++i) {
      CHECK(s.values.values[static_cast<std::size_t>(i)].lower <= 3 - i);
      CHECK(s.values.values[static_cast<std::size_t>(i)].upper >= 3 - i);
    }
    CHECK(to_json(s)["gaps"].size() == 2);
    CHECK_THROWS_AS(analyze_svd(D, {0, false, "D"}), input_error);
  }
}

TEST_CASE("attnrank::guard_result") {
  // The last line: an injected band that is not one, or a verdict its bands do not support,
  // is an internal_error naming it; a sound result passes untouched.
  SECTION("check-kernel: an inverted error band (the overflow audit's [inf, 5e307])") {
    KernelAnalysis k;
    k.result.emplace();
    k.result->candidate.max_abs_error_lower = 1e-3;
    k.result->candidate.max_abs_error_upper = 2e-3;
    CHECK_NOTHROW(guard_result(k));
    k.result->candidate.max_abs_error_lower = INFINITY;
    k.result->candidate.max_abs_error_upper = 5e307;
    CHECK_THROWS_AS(guard_result(k), internal_error);
    CHECK_THROWS_WITH(guard_result(k), Catch::Contains("candidate max_abs_error") && Catch::Contains("inverted"));
    k.result->candidate.nonfinite = 1;  // an infinite error at a NaN entry is proven: [inf, inf] is a band there
    k.result->candidate.max_abs_error_upper = INFINITY;
    CHECK_NOTHROW(guard_result(k));
  }
  SECTION("check-kernel: a gradient's mean error band that is not one, and its ratio verdict") {
    KernelAnalysis k;
    GradientReport g;
    g.role = "dq";
    g.check.candidate.max_abs_error_lower = 1e-3;
    g.check.candidate.max_abs_error_upper = 2e-3;
    g.check.candidate.mean_abs_error_lower = 1e-4;
    g.check.candidate.mean_abs_error_upper = 5e-5;
    k.gradients.push_back(g);
    CHECK_THROWS_WITH(guard_result(k), Catch::Contains("dq candidate mean_abs_error") && Catch::Contains("inverted"));
    k.gradients[0].check.candidate.mean_abs_error_upper = 2e-4;
    CHECK_NOTHROW(guard_result(k));
    // FlashAttention's rule with its floor: 2e-3 <= 2 x 0 + 1e-3 is false, so "within" is refused.
    k.gradients[0].check.reference.emplace();
    k.max_ratio = 2;
    k.ratio_atol = 1e-3;
    k.gradients[0].ratio_verdict = ToleranceVerdict::within;
    CHECK_THROWS_WITH(guard_result(k), Catch::Contains("dq the ratio is called within"));
    k.ratio_atol = 2e-3;
    CHECK_NOTHROW(guard_result(k));
  }
  SECTION("check-kernel: NaN, and a verdict its bounds do not support") {
    KernelAnalysis k;
    k.result.emplace();
    k.result->candidate.max_abs_error_upper = std::nan("");
    CHECK_THROWS_WITH(guard_result(k), Catch::Contains("NaN"));
    k.result->candidate.max_abs_error_upper = 0.5;
    k.max_error = 0.1;
    k.error_verdict = ToleranceVerdict::within;
    CHECK_THROWS_WITH(guard_result(k), Catch::Contains("within the tolerance"));
    k.error_verdict = ToleranceVerdict::exceeded;  // lower bound 0: not proven larger either
    CHECK_THROWS_AS(guard_result(k), internal_error);
    k.error_verdict = ToleranceVerdict::undecided;
    CHECK_NOTHROW(guard_result(k));
    // A sound "within" passes however its tolerance was rounded: rtol = 0 beside an unbounded
    // max |E| (an MPFI end past DBL_MAX) is max_error itself, not 0 x inf = NaN.
    k.result->candidate.max_abs_error_upper = 0.05;
    k.result->candidate.max_abs_exact_lower = 1;
    k.result->candidate.max_abs_exact_upper = INFINITY;
    k.error_verdict = ToleranceVerdict::within;
    CHECK_NOTHROW(guard_result(k));
    k.rtol = 0.5;
    CHECK_NOTHROW(guard_result(k));
  }
  SECTION("svd, width, rank and a scan's head") {
    SvdAnalysis s;
    s.values.values = {{2.0, 2.5}, {1.0, 0.5}};
    CHECK_THROWS_WITH(guard_result(s), Catch::Contains("sigma_2"));
    WidthAnalysis w;
    w.result.epsilon = 0.1;
    w.result.width_lower = 2;
    w.result.width_upper = 2;
    w.result.profile = {{1, 0.05, 0.3}, {2, 0.0, 0.05}};  // d_k = 1 below width_lower, yet not proven to miss
    CHECK_THROWS_WITH(guard_result(w), Catch::Contains("width_lower is 2"));
    w.result.profile[0].error_lower = 0.2;
    CHECK_NOTHROW(guard_result(w));
    RankAnalysis r;
    r.certified = CertifiedRank{};
    r.certified->lower = 3;
    r.certified->upper = 2;
    CHECK_THROWS_AS(guard_result(r), internal_error);
    HeadScan h;
    h.index = {1, 2};
    h.floor_lower = 1;
    h.floor_upper = 2;
    h.error_lower = 0.3;
    h.error_upper = 0.2;
    CHECK_THROWS_WITH(guard_result(h), Catch::Contains("scan head [1,2]"));
  }
  SECTION("the analyses at the end of the double range never reach it") {
    // V near DBL_MAX and subnormal: what check_kernel gives passes the guard analyze_kernel runs.
    const Eigen::MatrixXd Q{{0.5, -1.0}, {1.0, 0.25}, {-0.75, 2.0}, {0.0, 1.0}};
    const Eigen::MatrixXd K{{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}, {-1.0, 0.5}};
    for (const double size : {1e308, std::numeric_limits<double>::max(), 0x1p-1074}) {
      const Eigen::MatrixXd V{{size}, {-size}, {size}, {size / 3}};
      KernelAnalysis k;
      const std::vector<Eigen::MatrixXd> reference{V};
      k.result = check_kernel({Q}, {K}, {V}, {V * 0.5}, &reference);
      CHECK_NOTHROW(guard_result(k));
    }
  }
}
