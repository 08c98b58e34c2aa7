// attnrank/reach/approx_memo.hpp: one target's shared work for the approximate question.
//  * sharing changes no result: reach's band and the width profile, free and masked,
//    are the same numbers (and the same witness) with a memo as without, in either
//    order of asking;
//  * a memo serves only its own target and mask;
//  * the entry order sorted beside the fit (prefetch_entry_order) is the same;
//  * OnceMap makes each entry once, for any number of concurrent askers, and an
//    exception reaches every asker.
#include "mask_support.hpp"

#include <attnrank/attention/softmax.hpp>
#include <attnrank/reach/approx_memo.hpp>
#include <attnrank/reach/masked.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>

using namespace attnrank;
using namespace attnrank::test;

namespace {

using Eigen::Index;

/// A planted head of rank r through the mask (or none), its entries perturbed by `noise`.
Matrix<Rational> planted_target(Index n, Index r, const Mask* mask, double noise, std::mt19937_64& rng) {
  std::normal_distribution<double> gauss(0, 0.8);
  Eigen::MatrixXd Q(n, r), K(n, r);
  for (auto& x : Q.reshaped()) x = gauss(rng);
  for (auto& x : K.reshaped()) x = gauss(rng);
  const Eigen::MatrixXd S = Q * K.transpose() / std::sqrt(static_cast<double>(r));
  const Eigen::MatrixXd P = mask ? softmax_rows(S, *mask) : softmax_rows(S);
  std::uniform_real_distribution<double> wiggle(1 - noise, 1 + noise);
  Matrix<Rational> A(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      A(i, j) = mask && !mask->allows(i, j) ? Rational(0) : Rational(std::max(P(i, j), 1e-300) * wiggle(rng));
  return A;
}

void require_same(const ApproxBounds& a, const ApproxBounds& b) {
  RC_ASSERT(a.error_lower == b.error_lower);
  RC_ASSERT(a.error_upper == b.error_upper);
  RC_ASSERT(a.start_error == b.start_error);
  RC_ASSERT(a.witness.Q == b.witness.Q);
  RC_ASSERT(a.witness.K == b.witness.K);
}

void require_same(const WidthResult& a, const WidthResult& b) {
  RC_ASSERT(a.width_lower == b.width_lower);
  RC_ASSERT(a.width_upper == b.width_upper);
  RC_ASSERT(a.profile.size() == b.profile.size());
  for (std::size_t k = 0; k < a.profile.size(); ++k) {
    RC_ASSERT(a.profile[k].error_lower == b.profile[k].error_lower);
    RC_ASSERT(a.profile[k].error_upper == b.profile[k].error_upper);
  }
}

}  // namespace

TEST_CASE("attnrank::ApproxMemo", "[property]") {
  rc::prop("reach's band and the width profile are the same with a shared memo as alone, in either order", [] {
    const auto n = *rc::gen::inRange<Index>(3, 12);
    const auto r = *rc::gen::inRange<Index>(1, n);
    const bool masked = *rc::gen::arbitrary<bool>();
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    const Matrix<Rational> A = planted_target(n, r, masked ? &mask : nullptr, *rc::gen::element(0.0, 1e-3, 0.1), rng);
    const Index dk = *rc::gen::inRange<Index>(1, n + 1);
    const Index max_dk = *rc::gen::element<Index>(0, std::min<Index>(n, shared_start_width), *rc::gen::inRange<Index>(1, n + 1));
    const double epsilon = *rc::gen::element(1e-9, 1e-3, 0.05);
    ApproxOptions o;
    o.bisection_steps = 10;
    o.optimise = *rc::gen::arbitrary<bool>();
    o.max_evaluations = 60;  // the search by its budget alone: reproducible
    const auto band = [&](const ApproxOptions& with) {
      return masked ? approx_error_bounds(A, dk, mask, with) : approx_error_bounds(A, dk, with);
    };
    const auto profile = [&](const ApproxOptions& with) {
      return masked ? approx_width(A, epsilon, max_dk, mask, with) : approx_width(A, epsilon, max_dk, with);
    };
    const ApproxBounds band_alone = band(o);
    const WidthResult profile_alone = profile(o);
    ApproxMemo memo(A, masked ? std::optional<Mask>(mask) : std::nullopt);
    ApproxOptions shared = o;
    shared.memo = &memo;
    const bool band_first = *rc::gen::arbitrary<bool>();
    RC_TAG(masked ? "masked" : "free", band_first ? "band first" : "profile first");
    if (band_first) {
      require_same(band(shared), band_alone);
      require_same(profile(shared), profile_alone);
    } else {
      require_same(profile(shared), profile_alone);
      require_same(band(shared), band_alone);
    }
    require_same(band(shared), band_alone);  // asked again: from the memo
  });

  SECTION("a memo answers only for its own target and mask") {
    const Mask causal = Mask::causal(4);
    Matrix<Rational> A(4, 4);
    for (Index i = 0; i < 4; ++i)
      for (Index j = 0; j < 4; ++j) A(i, j) = j <= i ? Rational(i + j + 1) : Rational(0);
    const Matrix<Rational> copy = A;  // equal entries, another object
    ApproxMemo memo(A, causal);
    ApproxOptions o;
    o.memo = &memo;
    CHECK_NOTHROW(approx_error_bounds(A, 2, causal, o));
    CHECK_THROWS_AS(approx_error_bounds(copy, 2, causal, o), std::logic_error);
    CHECK_THROWS_AS(approx_error_bounds(A, 2, Mask::full(4), o), std::logic_error);
    CHECK_THROWS_AS(memo.require_target(A, nullptr), std::logic_error);
    ApproxMemo free_memo(copy, std::nullopt);
    CHECK_THROWS_AS(free_memo.masked_starts(2), std::logic_error);
  }

  SECTION("an entry order sorted beside the fit is the order sorted on demand; a memo left mid-sort joins it") {
    std::mt19937_64 rng(7);
    const Index n = 256;  // prefetch_order_entries: the smallest target it sorts beside
    REQUIRE(n * n >= prefetch_order_entries);
    const Mask causal = Mask::causal(n);
    const Matrix<Rational> A = planted_target(n, 3, &causal, 0.01, rng);
    ApproxMemo memo(A, causal);
    memo.prefetch_entry_order();
    memo.prefetch_entry_order();  // once
    const detail::EntryOrder& order = memo.entry_order();
    const detail::EntryOrder fresh = detail::entry_order(normalized_target_bounds(A).lo);
    CHECK(order.row_value == fresh.row_value);
    CHECK(order.row_col == fresh.row_col);
    CHECK(order.col_value == fresh.col_value);
    CHECK(order.col_row == fresh.col_row);
    CHECK(&memo.entry_order() == &order);
    {
      ApproxMemo left(A, causal);
      left.prefetch_entry_order();
    }  // destroyed while the sort may still run: it waits for it
    ApproxOptions alone;
    alone.optimise = false;  // the starts' bounds: the lower search is what reads the order
    ApproxOptions shared = alone;
    shared.memo = &memo;
    CHECK(approx_error_bounds(A, 2, causal, shared).error_lower == approx_error_bounds(A, 2, causal, alone).error_lower);
  }
}

TEST_CASE("attnrank::detail::OnceMap") {
  SECTION("concurrent askers of one key get one object, made once") {
    detail::OnceMap<int, std::vector<int>> map;
    std::atomic<int> made{0};
    std::vector<const std::vector<int>*> seen(8);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < seen.size(); ++t)
      threads.emplace_back([&, t] {
        seen[t] = &map.get(7, [&] {
          ++made;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return std::vector<int>{1, 2, 3};
        });
      });
    for (std::thread& th : threads) th.join();
    CHECK(made == 1);
    for (const auto* p : seen) CHECK(p == seen.front());
    CHECK(*seen.front() == std::vector<int>{1, 2, 3});
    CHECK(&map.get(8, [] { return std::vector<int>{4}; }) != seen.front());
  }
  SECTION("an exception while making an entry reaches every asker of it") {
    detail::OnceMap<int, int> map;
    CHECK_THROWS_AS(map.get(1, []() -> int { throw std::runtime_error("no"); }), std::runtime_error);
    CHECK_THROWS_AS(map.get(1, [] { return 5; }), std::runtime_error);
    CHECK(map.get(2, [] { return 5; }) == 5);
  }
}
