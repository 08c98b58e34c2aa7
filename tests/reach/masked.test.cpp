// attnrank/reach/masked.hpp: reachability under a mask. Oracles: targets 2^M
// built from an integer M of known rank through the mask (their floor is at
// most rank(M), and a head of that width makes them), generic causal targets
// (floor exactly floor(n / 2)), the unmasked decision for the full mask, the
// rectangle bound (each fully allowed rectangle is a lower bound on its own),
// and MPFR for the witness error.
#include "mask_support.hpp"
#include "rank_support.hpp"

#include <attnrank/io/double_tensor.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/tutorial/single_key_head.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// The masked softmax of Q K^T / sqrt(r) for Gaussian Q, K (n x r, deviation
/// sigma, from `seed`), as exact rationals: 0 where masked, entries floored at 1e-300.
Matrix<Rational> planted_masked_target(Eigen::Index n, Eigen::Index r, const Mask& mask, double sigma, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0, sigma);
  Eigen::MatrixXd Q(n, r), K(n, r);
  for (auto& x : Q.reshaped()) x = gauss(rng);
  for (auto& x : K.reshaped()) x = gauss(rng);
  const Eigen::MatrixXd P = softmax_rows(Eigen::MatrixXd(Q * K.transpose() / std::sqrt(static_cast<double>(r))), mask);
  Matrix<Rational> A(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) A(i, j) = mask.allows(i, j) ? Rational(std::max(P(i, j), 1e-300)) : Rational(0);
  return A;
}

}  // namespace

TEST_CASE("attnrank::validate_masked_target on doubles", "[property]") {
  // The scan validates the doubles it reads without making rationals: the same
  // checks, in the same words, as on the rationals the doubles denote.
  rc::prop("validate_target and validate_masked_target word doubles as their rationals", [] {
    const Eigen::Index n = *rc::gen::inRange<Eigen::Index>(1, 6);
    const Eigen::Index m = *rc::gen::weightedOneOf<Eigen::Index>(
        {{6, rc::gen::just(n)}, {1, rc::gen::inRange<Eigen::Index>(1, 6)}});
    const auto entry = rc::gen::weightedOneOf<double>(
        {{8, rc::gen::map(rc::gen::inRange(1, 1000), [](int k) { return k / 997.0; })},
         {2, rc::gen::just(0.0)},
         {1, rc::gen::element(-0.0, -0.25, -5e-324, 5e-324, 1e300)},
         {1, rc::gen::element(std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity())}});
    Eigen::MatrixXd P(n, m);
    for (Eigen::Index k = 0; k < P.size(); ++k) P(k) = *entry;
    const auto words = [](const std::function<void()>& f) { return input_error_message(f); };
    const std::string of_doubles = words([&] { validate_target(P, "P"); });
    const std::string of_rationals = words([&] { validate_target(exact_of_doubles(P, "P"), "P"); });
    RC_ASSERT(of_doubles == of_rationals);
    if (n == m && of_doubles.empty()) {
      const Mask mask = *rc::gen::element(Mask::causal(n), Mask::full(n));
      RC_ASSERT(words([&] { validate_masked_target(P, mask, "P"); }) ==
                words([&] { validate_masked_target(exact_of_doubles(P, "P"), mask, "P"); }));
    }
  });
}

TEST_CASE("attnrank::staircase_of") {
  rc::prop("nested masks (causal, prefix-LM, permuted) have a staircase: each row allows exactly a prefix", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 12);
    const Mask mask = gen_any_mask(n);
    const std::optional<Staircase> st = staircase_of(mask);
    // nested iff the rows' allowed sets form a chain
    bool chain = true;
    for (Eigen::Index a = 0; a < n; ++a)
      for (Eigen::Index b = 0; b < n; ++b) {
        bool a_in_b = true, b_in_a = true;
        for (Eigen::Index j = 0; j < n; ++j) {
          a_in_b = a_in_b && (!mask.allows(a, j) || mask.allows(b, j));
          b_in_a = b_in_a && (!mask.allows(b, j) || mask.allows(a, j));
        }
        chain = chain && (a_in_b || b_in_a);
      }
    RC_ASSERT(st.has_value() == chain);
    if (!st) return;
    for (std::size_t i = 0; i < st->rows.size(); ++i) {
      if (i > 0) RC_ASSERT(st->width[i - 1] <= st->width[i]);
      for (std::size_t j = 0; j < st->cols.size(); ++j)
        RC_ASSERT(mask.allows(st->rows[i], st->cols[j]) == (static_cast<Eigen::Index>(j) < st->width[i]));
    }
  });
  SECTION("a sliding window of width 2 on 4 tokens is not nested") {
    Matrix<Rational> M(4, 4);
    M << 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1;
    CHECK(!staircase_of(Mask::from_matrix(M, "window")));
  }
}

TEST_CASE("attnrank::reach with a mask") {
  // proofs/MaskedFloor.v, masked_floor_le and masked_floor_attained (the reduction; the staircase formula is cited)
  SECTION("generic causal targets have floor exactly floor(n / 2), n = 2 .. 40") {
    std::mt19937_64 rng(1903);
    INFO("seed 1903");
#ifdef ATTNRANK_SANITIZED  // -O0 under ASan: the normal build runs up to 40
    constexpr Eigen::Index largest = 12;
#else
    constexpr Eigen::Index largest = 40;
#endif
    for (Eigen::Index n = 2; n <= largest; n += (n < 12 ? 1 : 7)) {
      INFO("n = " << n);
      const Matrix<Rational> A = generic_causal_target(n, rng);
      const MaskedFloorBounds f = masked_floor_bounds(A, Mask::causal(n));
      CHECK(f.nested);
      CHECK(f.lower == n / 2);
      CHECK(f.upper == n / 2);
      if (n / 2 > 1) CHECK(reach(A, n / 2 - 1, Mask::causal(n)).verdict == Verdict::unreachable);
      const MaskedReachResult at = reach(A, n / 2, Mask::causal(n));
      CHECK(at.verdict == Verdict::reachable);
      REQUIRE(at.witness);
      CHECK(at.witness->max_abs_error < 1e-12);  // the staircase completion is exact, up to rounding
    }
  }
  // proofs/MaskedFloor.v, masked_floor_attained
  rc::prop("a target a width-r head makes through a causal or prefix-LM mask: floor <= r, reachable at r, witness within 1e-12", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 16);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    RC_PRE(staircase_of(mask).has_value());
    const Matrix<Rational> A = masked_power_target(gen_low_rank_exponents(n, r), mask);
    const MaskedReachResult res = reach(A, r, mask);
    RC_ASSERT(res.floor.lower <= r);
    RC_ASSERT(res.floor.lower <= res.floor.upper);
    RC_ASSERT(res.verdict == Verdict::reachable);  // exact kernels prove every block's upper bound
    RC_ASSERT(res.witness->max_abs_error < 1e-12);
  });
  rc::prop("never unreachable at the width that made the target, whatever the mask (nested or not)", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 12);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const Mask mask = gen_any_mask(n);
    const Matrix<Rational> A = masked_power_target(gen_low_rank_exponents(n, r), mask);
    const MaskedReachResult res = reach(A, r, mask);
    RC_LOG() << "mask " << mask.name() << ", floor " << res.floor.lower << ".." << res.floor.upper << "\n";
    RC_ASSERT(res.verdict != Verdict::unreachable);
    RC_ASSERT(res.floor.lower <= r);
    RC_ASSERT(res.floor.lower <= res.floor.upper);
    RC_ASSERT(res.floor.upper <= std::max<Eigen::Index>(n - 1, 0));
  });
  // proofs/MaskedFloor.v, rank_ones_appended (with the full mask, mr([L; 1^T]) - 1 = rank(L C))
  rc::prop("the full mask answers as no mask: the same floor bounds and verdict", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 9);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const Matrix<Rational> A = masked_power_target(gen_low_rank_exponents(n, r), Mask::full(n));
    const MaskedReachResult masked = reach(A, dk, Mask::full(n));
    const ReachResult free = reach(A, dk);
    RC_ASSERT(masked.floor.lower == free.floor.lower);
    RC_ASSERT(masked.floor.upper == free.floor.upper);
    RC_ASSERT(masked.verdict == free.verdict);
    RC_ASSERT(masked.mask == "none");
  });
  SECTION("generic causal: the rectangles alone (rows k.. by columns ..k, each checked on its own) also prove floor(n / 2)") {
    // An independent lower bound: a completion restricts to every fully allowed
    // rectangle, so max_k rank(log(A)_{k.., ..k} C) <= floor; at k = n / 2 its
    // generic value is floor(n / 2), what the staircase formula gives.
    std::mt19937_64 rng(2718);
    for (Eigen::Index n : {4, 7, 10, 15}) {
      const Matrix<Rational> A = generic_causal_target(n, rng);
      Eigen::Index best = 0;
      for (Eigen::Index k = 1; k <= n; ++k) {
        const Matrix<Rational> block = A.block(k - 1, 0, n - k + 1, k);
        best = std::max(best, certified_rank(certified_centered_log_ball(block)).lower);
      }
      INFO("n = " << n);
      CHECK(best == n / 2);
      CHECK(masked_floor_bounds(A, Mask::causal(n)).lower == best);
    }
  }
  SECTION("witnesses: the certified error bounds the true masked softmax distance (MPFR at 200 bits)") {
    std::mt19937_64 rng(77);
    for (Eigen::Index n : {3, 6, 11}) {
      const Matrix<Rational> A = generic_causal_target(n, rng);
      for (Eigen::Index dk = 1; dk <= n; dk += 2) {
        const MaskedReachResult res = reach(A, dk, Mask::causal(n));
        REQUIRE(res.witness);
        PrecisionScope scope(200);
        const Matrix<Real> Q = res.witness->Q.unaryExpr([](double x) { return Real(x); });
        const Matrix<Real> K = res.witness->K.unaryExpr([](double x) { return Real(x); });
        Matrix<Real> S = Q * K.transpose();
        S /= sqrt(Real(static_cast<long>(dk)));
        const Matrix<Real> P = softmax_rows(S, Mask::causal(n));
        Real worst = 0;
        for (Eigen::Index i = 0; i < n; ++i) {
          Rational sum = 0;
          for (Eigen::Index j = 0; j < n; ++j) sum += A(i, j);
          for (Eigen::Index j = 0; j < n; ++j) worst = max(worst, Real(abs(P(i, j) - Real(Rational(A(i, j) / sum)))));
        }
        INFO("n = " << n << ", d_k = " << dk);
        CHECK(worst <= Real(res.witness->max_abs_error));
        CHECK(res.witness->max_abs_error <= static_cast<double>(worst) * (1 + 1e-10) + 1e-14);  // and is tight
      }
    }
  }
  SECTION("zeros and masks: a zero at an allowed position is unreachable, a nonzero at a masked one an input error") {
    Matrix<Rational> A(3, 3);
    A << 1, 0, 0, Rational(1, 2), Rational(1, 2), 0, Rational(1, 3), 0, Rational(2, 3);
    const MaskedReachResult r = reach(A, 2, Mask::causal(3));
    CHECK(r.verdict == Verdict::unreachable);
    CHECK(r.has_zero_entry);
    CHECK(r.zeros.front() == std::pair<Eigen::Index, Eigen::Index>(2, 1));
    A(0, 2) = Rational(1, 5);
    CHECK(input_error_message([&] { reach(A, 2, Mask::causal(3)); }).find("[0, 2] (0-based) is 0.2 at a masked position") !=
          std::string::npos);
    CHECK(input_error_message([&] { reach(A, 2, Mask::causal(4)); }).find("the mask is 4 x 4") != std::string::npos);
    CHECK(input_error_message([&] { reach(A, 4, Mask::full(3)); }).find("d_k = 4 is out of range") != std::string::npos);
  }
  SECTION("zeros_are_causal recognises exactly the strictly upper zeros") {
    Matrix<Rational> A(3, 3);
    A << 1, 0, 0, 1, 1, 0, 1, 1, 1;
    CHECK(zeros_are_causal(A));
    A(2, 1) = 0;
    CHECK(!zeros_are_causal(A));
    CHECK(!zeros_are_causal(Matrix<Rational>::Ones(3, 3)));
  }
  SECTION("a prefix-LM mask: two bidirectional tokens, then causal; the staircase formula against its blocks") {
    const Eigen::Index n = 8;
    Matrix<Rational> M(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) M(i, j) = j <= std::max<Eigen::Index>(i, 1) ? 1 : 0;
    const Mask mask = Mask::from_matrix(M, "prefix");
    std::mt19937_64 rng(5);
    Matrix<Rational> A = generic_causal_target(n, rng);
    A(0, 1) = Rational(1, 7);
    const MaskedFloorBounds f = masked_floor_bounds(A, mask);
    REQUIRE(f.nested);
    // Widths 2, 2, 3, ..., 8: levels 2..8, so 7 blocks and 6 overlaps; generic
    // blocks have floor min(rows, cols - 1).
    CHECK(f.blocks.size() == 7);
    CHECK(f.overlaps.size() == 6);
    Eigen::Index expected = 0;
    for (const MaskedBlock& b : f.blocks)
      expected += std::min<Eigen::Index>(static_cast<Eigen::Index>(b.rows.size()), static_cast<Eigen::Index>(b.cols.size()) - 1);
    for (const MaskedBlock& o : f.overlaps)
      expected -= std::min<Eigen::Index>(static_cast<Eigen::Index>(o.rows.size()), static_cast<Eigen::Index>(o.cols.size()) - 1);
    CHECK(f.lower == expected);
    CHECK(f.upper == expected);
  }
}

TEST_CASE("attnrank::causal_possible_winners") {
  rc::prop("the running records are exactly the tokens that top some causal row for some q (brute force over positions)", [] {
    const auto n = *rc::gen::inRange<std::size_t>(1, 9);
    std::vector<Rational> keys;
    for (std::size_t j = 0; j < n; ++j) keys.emplace_back(*rc::gen::inRange(-2, 3));  // small range: many ties
    std::vector<Eigen::Index> brute;
    for (std::size_t p = 1; p <= n; ++p) {
      const std::vector<Rational> prefix(keys.begin(), keys.begin() + static_cast<long>(p));
      // softmax is monotone, so q = 1 and q = -1 stand for every q > 0 and q < 0 (proofs/Winners.v, top_is_extreme)
      for (const Rational& q : {Rational(1), Rational(-1)})
        for (Eigen::Index t : top_tokens(prefix, q)) brute.push_back(t);
    }
    std::sort(brute.begin(), brute.end());
    brute.erase(std::unique(brute.begin(), brute.end()), brute.end());
    RC_ASSERT(causal_possible_winners(keys) == brute);
  });
  SECTION("the tutorial's keys (2, 0, 1): LLMs never tops a row under the causal mask either") {
    CHECK(causal_possible_winners({Rational(2), Rational(0), Rational(1)}) == std::vector<Eigen::Index>{0, 1});
    CHECK(causal_possible_winners({Rational(1), Rational(1)}).empty());
    CHECK(causal_possible_winners({Rational(1), Rational(1), Rational(0)}) == std::vector<Eigen::Index>{0, 1, 2});
  }
  SECTION("the causal sweep: keys after the position get exactly 0, the rest the softmax of the prefix") {
    const std::vector<Rational> keys{Rational(2), Rational(0), Rational(1)};
    PrecisionScope scope(100);
    const Matrix<Interval> W = certified_single_key_sweep(keys, {Rational(1)}, 2);
    CHECK(W(0, 2) == 0);
    const Matrix<Interval> prefix = certified_single_key_sweep({Rational(2), Rational(0)}, {Rational(1)});
    CHECK(W(0, 0) == prefix(0, 0));
    CHECK_THROWS_AS(certified_single_key_sweep(keys, {Rational(1)}, 4), input_error);
  }
}

TEST_CASE("attnrank::approx_error_bounds with a mask", "[property]") {
  rc::prop("error_lower <= the generating masked head's certified error, and <= error_upper", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 11);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, 4);
    const auto dk = *rc::gen::arbitrary<bool>() ? r : *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    const double noise = *rc::gen::element(0.0, 1e-3, 3e-2, 0.1, 0.3);
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    std::normal_distribution<double> gauss(0, 0.7);
    Eigen::MatrixXd Q(n, r), K(n, r);
    for (auto& x : Q.reshaped()) x = gauss(rng);
    for (auto& x : K.reshaped()) x = gauss(rng);
    const Eigen::MatrixXd P = softmax_rows(Eigen::MatrixXd(Q * K.transpose() / std::sqrt(static_cast<double>(r))), mask);
    Matrix<Rational> A(n, n);
    std::uniform_real_distribution<double> wiggle(1 - noise, 1 + noise);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = mask.allows(i, j) ? Rational(std::max(P(i, j), 1e-300) * wiggle(rng)) : Rational(0);
    const double generating = certified_masked_witness_error(A, mask, Q, K);
    ApproxOptions o;
    o.bisection_steps = 12;
    const ApproxBounds b = approx_error_bounds(A, dk, mask, o);
    RC_LOG() << "mask " << mask.name() << " lower " << b.error_lower << " upper " << b.error_upper << " generating " << generating << "\n";
    RC_CLASSIFY(b.error_lower > 0, "error_lower > 0");
    RC_ASSERT(b.error_lower <= b.error_upper);
    if (dk >= r) RC_ASSERT(b.error_lower <= generating);  // a width-r head is one of width dk >= r
    // The search starts from reach's own witness and keeps only improvements.
    const MaskedReachResult reached = reach(A, dk, mask);
    RC_ASSERT(reached.witness.has_value());
    RC_ASSERT(b.error_upper <= reached.witness->max_abs_error);
    RC_ASSERT(b.error_upper <= b.start_error);
  });
}

TEST_CASE("attnrank::approx_width with a mask", "[property]") {
  rc::prop("every width's band in the profile meets the width's own band (no witness credited to a narrower width)", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 10);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, n);
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    const double sigma = *rc::gen::element(0.3, 0.7);
    const Matrix<Rational> A = planted_masked_target(n, r, mask, sigma, *rc::gen::arbitrary<unsigned>());
    ApproxOptions o;
    o.bisection_steps = 12;
    o.optimise = false;
    const double epsilon = *rc::gen::element(1e-9, 1e-4, 1e-2);
    const WidthResult w = approx_width(A, epsilon, n, mask, o);
    RC_ASSERT(static_cast<Eigen::Index>(w.profile.size()) == n);
    for (Eigen::Index d = 1; d <= n; ++d) {
      const WidthProfileEntry& e = w.profile[static_cast<std::size_t>(d - 1)];
      const ApproxBounds b = approx_error_bounds(A, d, mask, o);
      RC_LOG() << "d " << d << ": profile [" << e.error_lower << ", " << e.error_upper << "], alone [" << b.error_lower
               << ", " << b.error_upper << "]\n";
      RC_ASSERT(e.error_lower <= e.error_upper);
      RC_ASSERT(e.error_lower <= b.error_upper);
      RC_ASSERT(b.error_lower <= e.error_upper);
    }
    if (w.width_upper) RC_ASSERT(w.profile[static_cast<std::size_t>(w.width_upper - 1)].error_upper <= epsilon);
    RC_ASSERT(w.width_lower <= (w.width_upper ? w.width_upper : n + 1));
  });
}

TEST_CASE("attnrank::approx_width with a mask: the first fit", "[property]") {
  rc::prop("whichever width is fitted first, the two profiles are proven bands of the same E*: they meet everywhere, "
           "and neither proves a width misses that the other shows within epsilon",
           [] {
             const auto n = *rc::gen::inRange<Eigen::Index>(3, 14);
             const auto r = *rc::gen::inRange<Eigen::Index>(1, std::min<Eigen::Index>(n, 5));
             const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
             const double sigma = *rc::gen::element(0.5, 1.5);
             const Matrix<Rational> A = planted_masked_target(n, r, mask, sigma, *rc::gen::arbitrary<unsigned>());
             ApproxOptions o;
             o.bisection_steps = 12;
             o.optimise = false;
             const Eigen::Index max_dk = std::min<Eigen::Index>(n, r + 3);
             const double epsilon = *rc::gen::element(1e-6, 1e-3, 3e-2);
             const WidthResult a = approx_width(A, epsilon, max_dk, mask, o);
             o.first_fit = *rc::gen::inRange<Eigen::Index>(1, max_dk + 1);
             const WidthResult b = approx_width(A, epsilon, max_dk, mask, o);
             RC_LOG() << "first fit " << o.first_fit << ": widths " << a.width_lower << ".." << a.width_upper << " and "
                      << b.width_lower << ".." << b.width_upper << "\n";
             for (std::size_t k = 0; k < a.profile.size(); ++k) {
               RC_ASSERT(a.profile[k].error_lower <= b.profile[k].error_upper);
               RC_ASSERT(b.profile[k].error_lower <= a.profile[k].error_upper);
             }
             if (a.width_upper) RC_ASSERT(b.width_lower <= a.width_upper);
             if (b.width_upper) RC_ASSERT(a.width_lower <= b.width_upper);
             // A fit at the first width is taken wherever it is within epsilon.
             if (b.width_upper) RC_ASSERT(b.profile[static_cast<std::size_t>(b.width_upper - 1)].error_upper <= epsilon);
           });
}
