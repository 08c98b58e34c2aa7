// Tests for attnrank/reach/approximate.hpp: certified bounds on E*(A, d_k), the
// best max entrywise error of a head of width d_k. Oracles: a head that generated
// the target (its certified error is an upper bound on E*, so error_lower may not
// exceed it), the tutorial target's known E* = 0.35 at d_k = 1 (below), exact
// reachability (E* = 0), and MPFR at 256 bits for the entrywise log bound.
#include "support.hpp"

#include <attnrank/attention/softmax.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/detail/lower_bound_search.hpp>
#include <attnrank/reach/detail/rectangle_above.hpp>
#include <attnrank/reach/detail/witness_search.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/masked.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <tuple>

using namespace attnrank;

namespace {

/// softmax(Q K^T / sqrt(d)) for random Q, K (entries of the given scale), plus a
/// perturbation of up to `noise` per entry, as exact rationals (rows unnormalised).
struct Generated {
  Matrix<Rational> A;
  Eigen::MatrixXd Q, K;
};
Generated generated_target(Eigen::Index n, Eigen::Index d, double scale, double noise, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, scale);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Generated out;
  out.Q = Eigen::MatrixXd::NullaryExpr(n, d, [&] { return g(rng); });
  out.K = Eigen::MatrixXd::NullaryExpr(n, d, [&] { return g(rng); });
  Eigen::MatrixXd S = out.Q * out.K.transpose() / std::sqrt(static_cast<double>(d));
  Eigen::MatrixXd P = softmax_rows(S);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) P(i, j) = std::max(P(i, j) + noise * (2 * u(rng) - 1), 1e-9);
  out.A = P.unaryExpr([](double x) { return to_rational(x); });
  return out;
}

using Eigen::Index;

/// A search's proof at eps, checked on its own: every entry of its R x J above
/// eps, and the certified sigma_(width+1) there above the certified eta norm.
void assert_proof_holds(detail::LowerBoundCache& cache, const detail::LowerSearch& s, double eps) {
  for (Index i : s.proof.rows)
    for (Index j : s.proof.cols) RC_ASSERT(cache.below()(i, j) > eps);
  const CertifiedSingularValues* values = cache.values(s.proof.rows, s.proof.cols, s.width + 1);
  RC_ASSERT(values != nullptr);
  RC_ASSERT(values->values[static_cast<std::size_t>(s.width)].lower >
            detail::eta_norm_upper(cache.below(), s.proof.rows, s.proof.cols, eps));
}

/// The reference for detail::rows_and_columns_above: the same greedy rule on the
/// dense matrix, step for step (what the library ran before the sorted version).
void dense_rows_and_columns_above(const Eigen::MatrixXd& below, double eps, std::vector<Index>& rows,
                                  std::vector<Index>& cols) {
  const Index n = below.rows(), m = below.cols();
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> bad(n, m);
  Eigen::VectorXi row_bad = Eigen::VectorXi::Zero(n), col_bad = Eigen::VectorXi::Zero(m);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < m; ++j) {
      bad(i, j) = !(below(i, j) > eps);  // kept entries have Â >= below > eps
      row_bad(i) += bad(i, j);
      col_bad(j) += bad(i, j);
    }
  std::vector<bool> row_in(static_cast<std::size_t>(n), true), col_in(static_cast<std::size_t>(m), true);
  while (true) {
    Index best_row = -1, best_col = -1;
    for (Index i = 0; i < n; ++i)
      if (row_in[static_cast<std::size_t>(i)] && (best_row < 0 || row_bad(i) > row_bad(best_row))) best_row = i;
    for (Index j = 0; j < m; ++j)
      if (col_in[static_cast<std::size_t>(j)] && (best_col < 0 || col_bad(j) > col_bad(best_col))) best_col = j;
    const int r = best_row < 0 ? 0 : row_bad(best_row), c = best_col < 0 ? 0 : col_bad(best_col);
    if (r == 0 && c == 0) break;
    const auto rows_left = std::count(row_in.begin(), row_in.end(), true);
    const auto cols_left = std::count(col_in.begin(), col_in.end(), true);
    if (c * cols_left >= r * rows_left) {  // drop the column: its share of bad entries is at least the row's
      col_in[static_cast<std::size_t>(best_col)] = false;
      for (Index i = 0; i < n; ++i)
        if (row_in[static_cast<std::size_t>(i)] && bad(i, best_col)) --row_bad(i);
      col_bad(best_col) = 0;
    } else {
      row_in[static_cast<std::size_t>(best_row)] = false;
      for (Index j = 0; j < m; ++j)
        if (col_in[static_cast<std::size_t>(j)] && bad(best_row, j)) --col_bad(j);
      row_bad(best_row) = 0;
    }
  }
  rows.clear();
  cols.clear();
  for (Index i = 0; i < n; ++i)
    if (row_in[static_cast<std::size_t>(i)]) rows.push_back(i);
  for (Index j = 0; j < m; ++j)
    if (col_in[static_cast<std::size_t>(j)]) cols.push_back(j);
}

ApproxOptions quick() {
  ApproxOptions o;
  o.max_iterations = 60;
  o.restarts = 1;
  return o;
}

}  // namespace

TEST_CASE("attnrank::approx_error_bounds on the tutorial target") {
  // diag:3:0.8 at d_k = 1: the middle key's column never wins a row (its score is
  // between the others'), so the row whose target has 0.8 there has some other
  // weight >= its own x: the error is >= max(0.8 - x, x - 0.1) >= 0.35, and 0.35 is
  // attained. So E* = 0.35.
  const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
  const ApproxBounds b = approx_error_bounds(A, 1);
  CHECK(b.error_lower > 0.05);   // the singular-value bound proves this much
  CHECK(b.error_lower <= 0.35);  // never above the true E*
  CHECK(b.error_upper >= 0.35);
  CHECK(b.error_upper < 0.3501);
  CHECK(b.start_error > 0.37);  // the log-domain witness is worse; the optimiser fixes it
  CHECK(b.witness.max_abs_error == b.error_upper);
  CHECK(b.lower_proof.rows.size() == 3);
  CHECK(b.lower_proof.sigma_lower > 2);
  CHECK(epsilon_verdict(b, 0.36) == EpsilonVerdict::within);
  CHECK(epsilon_verdict(b, 0.01) == EpsilonVerdict::not_within);
  CHECK(epsilon_verdict(b, 0.2) == EpsilonVerdict::undecided);
  SECTION("exactly reachable at d_k = 2: E* = 0, the bounds say so") {
    const ApproxBounds two = approx_error_bounds(A, 2);
    CHECK(two.error_lower == 0);
    CHECK(two.error_upper < 1e-14);
  }
}

TEST_CASE("attnrank::approx_error_bounds properties", "[property]") {
  // proofs/ApproximateRank.v, centered_block_rank_le; proofs/LogErrorBound.v, log_error_bound
#ifdef ATTNRANK_SANITIZED  // the optimiser at -O0 under ASan: a minute over these three properties up to n = 9
  constexpr Eigen::Index largest = 6;
#else
  constexpr Eigen::Index largest = 9;
#endif
  rc::prop("error_lower <= (the generating head's certified error) and error_upper is within 2x of it", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, largest + 1);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 3);
    const double scale = *rc::gen::element(0.5, 1.0);
    const double noise = *rc::gen::element(1e-4, 1e-3, 1e-2);
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    const Generated t = generated_target(n, d, scale, noise, seed);
    const double known = certified_witness_error(t.A, t.Q, t.K, 64);  // E*(d) <= known
    const ApproxBounds b = approx_error_bounds(t.A, d);
    RC_ASSERT(b.error_lower <= b.error_upper);
    RC_ASSERT(b.error_lower <= known);
    RC_ASSERT(b.error_upper <= 2 * known + 1e-12);
    RC_ASSERT(b.error_upper == b.witness.max_abs_error);
    RC_ASSERT(b.error_upper <= b.start_error);
  });
  rc::prop("saturated heads (scores in the tens): error_lower <= the generating head's error, the optimiser never worsens the start", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, largest + 1);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 3);
    const double noise = *rc::gen::element(1e-4, 1e-2);
    const Generated t = generated_target(n, d, 3.0, noise, *rc::gen::arbitrary<std::uint32_t>());
    const double known = certified_witness_error(t.A, t.Q, t.K, 64);
    const ApproxBounds b = approx_error_bounds(t.A, d, quick());
    RC_ASSERT(b.error_lower <= known);
    RC_ASSERT(b.error_upper <= b.start_error);
    RC_ASSERT(b.error_lower <= b.error_upper);
  });
  rc::prop("error_lower <= error_upper on nasty targets: zeros, tiny entries, one dominant entry per row", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, largest < 8 ? largest : 8);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        const int kind = *rc::gen::inRange(0, 4);
        A(i, j) = kind == 0 ? Rational(0) : kind == 1 ? Rational(1, Integer(10) << 200) : Rational(*rc::gen::inRange(1, 100), 7);
      }
    for (Eigen::Index i = 0; i < n; ++i) A(i, i) += 1000;  // no zero row
    const ApproxBounds b = approx_error_bounds(A, dk, quick());
    RC_ASSERT(b.error_lower >= 0);
    RC_ASSERT(b.error_lower <= b.error_upper);
    RC_ASSERT(std::isfinite(b.error_upper));
  });
}

TEST_CASE("attnrank::approx_width") {
  const Matrix<Rational> A = generated_target(8, 2, 1.0, 1e-2, 7).A;
  const WidthResult w = approx_width(A, 0.05, 5, quick());
  REQUIRE(w.profile.size() == 5);
  for (std::size_t i = 0; i + 1 < w.profile.size(); ++i) {
    CHECK(w.profile[i].error_lower >= w.profile[i + 1].error_lower);  // E* is non-increasing in d_k
    CHECK(w.profile[i].error_upper >= w.profile[i + 1].error_upper);
  }
  for (const WidthProfileEntry& e : w.profile) CHECK(e.error_lower <= e.error_upper);
  for (Eigen::Index d = 1; d < w.width_lower; ++d) CHECK(w.profile[d - 1].error_lower > 0.05);
  if (w.width_upper != 0) {
    CHECK(w.width_lower <= w.width_upper);
    CHECK(w.profile[w.width_upper - 1].error_upper <= 0.05);
  }
  SECTION("the widths fall as epsilon grows") {
    Eigen::Index last_lower = 1000, last_upper = 1000;
    for (const double eps : {1e-4, 1e-3, 1e-2, 0.1, 0.5}) {
      const WidthResult r = approx_width(A, eps, 5, quick());
      const Eigen::Index upper = r.width_upper == 0 ? 999 : r.width_upper;
      CHECK(r.width_lower <= last_lower);
      CHECK(upper <= last_upper);
      last_lower = r.width_lower;
      last_upper = upper;
    }
  }
  SECTION("every width's bound is sound though the widths search together") {
    // A head of width d generated the target: E*(d_k) <= its error for every
    // d_k >= d, so no profile entry there may claim more; each entry within its
    // own width's bounds. n = 70 also takes the two-thread paths (Â's bounds
    // beside the logs; theta = 1 and 2 side by side).
    for (const auto& [n, d, noise, seed] : {std::tuple{9, 2, 1e-3, 3u}, std::tuple{12, 1, 1e-2, 5u}, std::tuple{70, 3, 1e-3, 11u}}) {
      const Generated t = generated_target(n, d, 1.0, noise, seed);
      const double known = certified_witness_error(t.A, t.Q, t.K, 64);
      ApproxOptions no_search = quick();
      no_search.optimise = false;
      const WidthResult r = approx_width(t.A, std::min(known, 1.0), 6, no_search);
      for (const WidthProfileEntry& e : r.profile) {
        INFO("n = " << n << ", d = " << d << ", d_k = " << e.dk << ": " << e.error_lower << " <= E* <= " << e.error_upper);
        CHECK(e.error_lower <= e.error_upper);
        if (e.dk >= d) CHECK(e.error_lower <= known);
      }
      CHECK(r.width_lower <= d);  // error_lower(d) <= E*(d) <= known = epsilon
    }
  }
  SECTION("bad input") {
    CHECK_THROWS_WITH(approx_width(A, 1.5, 2), Catch::Contains("outside [0, 1]"));
    CHECK_THROWS_WITH(approx_width(A, 0.1, 9), Catch::Contains("max d_k = 9"));
    CHECK_THROWS_WITH(approx_error_bounds(A, 0), Catch::Contains("d_k = 0 is out of range"));
  }
}

TEST_CASE("attnrank::detail::eta_norm_upper and rows_and_columns_above") {
  // proofs/LogErrorBound.v, log_error_bound
  rc::prop("the entrywise bound is >= -log(1 - eps / a) (MPFR at 256 bits) and within a few ulps of it", [] {
    const double a = std::ldexp(*rc::gen::inRange(1, 1 << 20), -*rc::gen::inRange(0, 40)) / double(1 << 20);
    const double x = *rc::gen::element(1e-12, 1e-6, 0.01, 0.0625, 0.0626, 0.5, 0.999999);
    const double eps = a * x;
    RC_PRE(eps > 0 && eps < a);
    const Eigen::MatrixXd below = Eigen::MatrixXd::Constant(1, 1, a);
    const double bound = detail::eta_norm_upper(below, {0}, {0}, eps);
    Real exact;
    mpfr_set_prec(exact.backend().data(), 256);
    mpfr_set_d(exact.backend().data(), eps, MPFR_RNDN);
    mpfr_div_d(exact.backend().data(), exact.backend().data(), a, MPFR_RNDN);
    mpfr_neg(exact.backend().data(), exact.backend().data(), MPFR_RNDN);
    mpfr_log1p(exact.backend().data(), exact.backend().data(), MPFR_RNDN);
    mpfr_neg(exact.backend().data(), exact.backend().data(), MPFR_RNDN);
    const double e = mpfr_get_d(exact.backend().data(), MPFR_RNDN);
    RC_ASSERT(mpfr_cmp_d(exact.backend().data(), bound) <= 0);
    // x = eps / a is rounded up once: near x = 1 that moves -log(1 - x) by about
    // u / (1 - x) relative, so the tolerance follows the conditioning.
    RC_ASSERT(bound <= e * (1 + 1e-13 + 8e-16 / (1 - x)));
  });
  SECTION("an entry at or below eps makes the bound infinite, never a number") {
    const Eigen::MatrixXd below = Eigen::MatrixXd::Constant(1, 2, 0.25);
    CHECK(std::isinf(detail::eta_norm_upper(below, {0}, {0, 1}, 0.25)));
    CHECK(std::isinf(detail::eta_norm_upper(Eigen::MatrixXd::Zero(1, 1), {0}, {0}, 0.0)));
  }
  rc::prop("every kept entry exceeds the threshold; nothing is dropped when nothing is at or below it", [] {
    // Up to 11 lines, and past 64 and 128 (more than one word of the buckets' bitsets).
    const bool wide = *rc::gen::inRange(0, 4) == 0;
    const auto n = *rc::gen::inRange<Eigen::Index>(1, wide ? 150 : 12), m = *rc::gen::inRange<Eigen::Index>(1, wide ? 150 : 12);
    Eigen::MatrixXd below(n, m);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < m; ++j) below(i, j) = *rc::gen::inRange(0, 100) / 100.0;
    // A causal target's lower bounds: zeros above the diagonal, at every threshold.
    if (*rc::gen::inRange(0, 3) == 0) below.triangularView<Eigen::StrictlyUpper>().setZero();
    const double t = *rc::gen::inRange(0, 100) / 100.0;
    std::vector<Eigen::Index> rows, cols;
    detail::rows_and_columns_above(detail::entry_order(below), t, rows, cols);
    for (const Eigen::Index i : rows)
      for (const Eigen::Index j : cols) RC_ASSERT(below(i, j) > t);
    if ((below.array() > t).all()) RC_ASSERT(rows.size() == std::size_t(n) && cols.size() == std::size_t(m));
    // The same choice as the dense reference, for this and other thresholds;
    // those at the 90th and 97th percentile leave fewer than a seventh of the
    // entries good, where the greedy counts good entries instead of bad ones.
    const detail::EntryOrder order = detail::entry_order(below);
    std::vector<double> sorted(below.data(), below.data() + below.size());
    std::sort(sorted.begin(), sorted.end());
    const auto percentile = [&](double p) { return sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))]; };
    for (const double u : {t, t / 2, (t + 1) / 2, 0.0, 1.0, percentile(0.9), percentile(0.97)}) {
      std::vector<Eigen::Index> r1, c1, r2, c2;
      dense_rows_and_columns_above(below, u, r1, c1);
      detail::rows_and_columns_above(order, u, r2, c2);
      RC_ASSERT(r1 == r2);
      RC_ASSERT(c1 == c2);
      RC_ASSERT(detail::entries_at_most(order, u) == (below.array() <= u).count());
    }
  });
}

TEST_CASE("attnrank::detail::search_lower_bounds") {
  rc::prop("a ceiling that moves within its power of 2 moves no proof: the search tries the same points", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(6, 24);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 4);
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    const Generated g = generated_target(n, d, *rc::gen::element(0.7, 2.0), *rc::gen::element(0.0, 1e-3), seed);
    const Eigen::MatrixXd below = normalized_target_bounds(g.A).lo;
    const double ceiling = std::ldexp(1.0, -*rc::gen::inRange(1, 12)) * (1 + *rc::gen::inRange(1, 1000) / 1001.0);
    std::vector<double> found;
    const std::vector<double> ceilings{ceiling, ceiling * (1 - 1e-12)};
    for (const double c : ceilings) {
      detail::LowerBoundCache cache(g.A, below, d + 1);
      std::vector<detail::LowerSearch> searches(1);
      searches[0].width = d - 1 > 0 ? d - 1 : 1;
      searches[0].ceiling = c;
      detail::search_lower_bounds(searches, 12, 8, cache);
      found.push_back(searches[0].best);
    }
    RC_LOG() << "ceiling " << ceiling << ": " << found[0] << " and " << found[1] << "\n";
    // Below min Â the whole target is proven up to its own ceiling (the edge just
    // under it), which moves with the ceiling; everywhere else nothing moves.
    const bool at_edges = found[0] >= ceilings[0] * (1 - 1e-9) && found[1] >= ceilings[1] * (1 - 1e-9);
    RC_CLASSIFY(at_edges, "proven up to the ceiling");
    RC_ASSERT(found[0] == found[1] || at_edges);
  });
}

TEST_CASE("attnrank::detail::search_lower_bounds on one width (three grids)", "[property]") {
  rc::prop("a single width's bound (the best of its shifted grids) stays below a generating head's error and its proof checks anew", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(6, 40);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 4);
    const Generated g = generated_target(n, d, *rc::gen::element(0.7, 2.0, 5.0), *rc::gen::element(0.0, 1e-3, 1e-2),
                                         *rc::gen::arbitrary<std::uint64_t>());
    const double known = certified_witness_error(g.A, g.Q, g.K, 64);  // E*(w) <= known for every w >= d
    const Eigen::MatrixXd below = normalized_target_bounds(g.A).lo;
    detail::LowerBoundCache cache(g.A, below, d + 2);
    std::vector<detail::LowerSearch> searches(1);
    searches[0].width = *rc::gen::inRange<Eigen::Index>(1, d + 2);
    // The ceiling a witness would give: at or above E*, here anywhere up to 1.
    searches[0].ceiling = std::min(1.0, known * *rc::gen::element(1.0, 3.0, 50.0, 1e4));
    detail::search_lower_bounds(searches, 12, 8, cache);
    const detail::LowerSearch& s = searches[0];
    RC_CLASSIFY(s.best > 0, "proven");
    if (searches[0].width >= d) RC_ASSERT(s.best < known);
    RC_ASSERT(s.best < searches[0].ceiling);
    if (!(s.best > 0)) return;
    assert_proof_holds(cache, s, s.best);
  });
}

TEST_CASE("attnrank::detail::refine_rectangle") {
  rc::prop("only drops lines, never lowers the ratio in doubles, and says above 1 only when it is", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(6, 28);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 5);
    const Generated g = generated_target(n, d, *rc::gen::element(0.7, 2.0, 4.0), *rc::gen::element(0.0, 1e-3),
                                         *rc::gen::arbitrary<std::uint64_t>());
    const Eigen::MatrixXd below = normalized_target_bounds(g.A).lo;
    detail::LowerBoundCache cache(g.A, below, d + 1);
    const Eigen::Index width = *rc::gen::inRange<Eigen::Index>(1, d + 1);
    const double eps = below.maxCoeff() * std::ldexp(1.0, -*rc::gen::inRange(1, 14));
    std::vector<Eigen::Index> rows, cols;
    cache.rows_and_columns(eps * *rc::gen::element(1.0, 2.0, 4.0, 8.0), rows, cols);
    const double before = detail::approx_ratio(cache, rows, cols, width, eps);
    std::vector<Eigen::Index> r2 = rows, c2 = cols;
    const bool above = detail::refine_rectangle(cache, r2, c2, width, eps);
    const double after = detail::approx_ratio(cache, r2, c2, width, eps);
    RC_CLASSIFY(after > before, "raised");
    RC_CLASSIFY(above, "above 1");
    for (auto* v : {&rows, &cols, &r2, &c2}) std::sort(v->begin(), v->end());
    RC_ASSERT(std::includes(rows.begin(), rows.end(), r2.begin(), r2.end()));
    RC_ASSERT(std::includes(cols.begin(), cols.end(), c2.begin(), c2.end()));
    RC_ASSERT(after >= before);
    RC_ASSERT(above == (after > 1));
  });
}

TEST_CASE("attnrank::detail::prove_lower_bound_at") {
  rc::prop("never proves an eps a generating head comes within; every proof it gives checks anew", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(6, 28);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 4);
    const Generated g = generated_target(n, d, *rc::gen::element(0.7, 2.0, 5.0), *rc::gen::element(0.0, 1e-3, 1e-2),
                                         *rc::gen::arbitrary<std::uint64_t>());
    const double known = certified_witness_error(g.A, g.Q, g.K, 64);  // E*(w) <= known for every w >= d
    const Eigen::MatrixXd below = normalized_target_bounds(g.A).lo;
    detail::LowerBoundCache cache(g.A, below, d + 3);
    detail::LowerSearch s;
    s.width = d + *rc::gen::inRange<Eigen::Index>(0, 2);
    s.ceiling = 2;
    const double at_or_above = known * *rc::gen::element(1.0, 1.01, 2.0);
    if (at_or_above < s.ceiling) RC_ASSERT(!detail::prove_lower_bound_at(s, at_or_above, cache));
    // Below it, any width: a proof must hold on its own (certified sigma against
    // the certified eta norm on its R x J, every entry there above eps).
    detail::LowerSearch t;
    t.width = *rc::gen::inRange<Eigen::Index>(1, d + 2);
    t.ceiling = 2;
    const double eps = known * std::ldexp(1.0, -*rc::gen::inRange(1, 12));
    const bool proven = detail::prove_lower_bound_at(t, eps, cache, *rc::gen::arbitrary<bool>());
    RC_CLASSIFY(proven, "proven");
    if (!proven) return;
    RC_ASSERT(t.best == eps);
    assert_proof_holds(cache, t, eps);
  });
}

TEST_CASE("attnrank::detail::close_bracket_from_below") {
  WidthResult w;
  w.epsilon = 0.01;
  w.max_dk = 5;
  w.profile = {{1, 0.2, 1}, {2, 0.004, 0.5}, {3, 0.002, 0.3}, {4, 0, 0.005}, {5, 0, 0.001}};
  detail::settle_width(w);
  REQUIRE(w.width_lower == 2);
  REQUIRE(w.width_upper == 4);
  std::vector<std::pair<Eigen::Index, double>> asked;
  Eigen::Index tried = 0;
  // A proven lower bound at or above eps (yes), or a smaller one (no: 0.003).
  const auto answer = [&](bool yes) {
    return [&asked, yes](Eigen::Index dk, double eps) {
      asked.emplace_back(dk, eps);
      return yes ? eps : 0.003;
    };
  };
  SECTION("asks width_upper - 1 at the double above epsilon; on yes every narrower width misses") {
    detail::close_bracket_from_below(w, tried, answer(true));
    REQUIRE(asked.size() == 1);
    CHECK(asked[0].first == 3);
    CHECK(asked[0].second == std::nextafter(0.01, 1.0));
    CHECK(tried == 3);
    CHECK(w.width_lower == 4);
    CHECK(w.width_upper == 4);
    CHECK(w.profile[2].error_lower == std::nextafter(0.01, 1.0));
    CHECK(w.profile[1].error_lower == std::nextafter(0.01, 1.0));  // carried to the narrower width
    CHECK(w.profile[0].error_lower == 0.2);
  }
  SECTION("on no the bracket stays open, the better bound joins the profile, and the same width is not asked twice") {
    detail::close_bracket_from_below(w, tried, answer(false));
    detail::close_bracket_from_below(w, tried, answer(true));
    CHECK(asked.size() == 1);
    CHECK(w.width_lower == 2);
    CHECK(w.width_upper == 4);
    CHECK(w.profile[2].error_lower == 0.003);
    CHECK(w.profile[1].error_lower == 0.004);  // carried: max(its own 0.004, 0.003)
  }
  SECTION("nothing to ask: no witness within epsilon, or no eps above epsilon below the width's upper bound") {
    WidthResult none = w;
    for (WidthProfileEntry& e : none.profile) e.error_upper = 0.5;
    detail::settle_width(none);
    REQUIRE(none.width_upper == 0);
    detail::close_bracket_from_below(none, tried, answer(true));
    WidthResult tight = w;
    tight.profile[2].error_upper = std::nextafter(0.01, 1.0);  // above epsilon, yet nothing between
    detail::settle_width(tight);
    REQUIRE(tight.width_upper == 4);
    detail::close_bracket_from_below(tight, tried, answer(true));
    CHECK(asked.empty());
    CHECK(tight.width_lower == 2);
  }
}

TEST_CASE("attnrank::approx_width: closing the bracket from below is sound", "[property]") {
  rc::prop("no width a generating head comes within epsilon at is proven to miss (free and causal, noise, saturated)", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(4, 21);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, 4);
    const bool causal = *rc::gen::arbitrary<bool>();
    const std::optional<Mask> mask = causal ? std::optional<Mask>(Mask::causal(n)) : std::nullopt;
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    std::normal_distribution<double> gauss(0.0, *rc::gen::element(0.7, 2.0, 5.0));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const double noise = *rc::gen::element(0.0, 1e-3, 1e-2);
    const Eigen::MatrixXd Q = Eigen::MatrixXd::NullaryExpr(n, r, [&] { return gauss(rng); });
    const Eigen::MatrixXd K = Eigen::MatrixXd::NullaryExpr(n, r, [&] { return gauss(rng); });
    const Eigen::MatrixXd S = Q * K.transpose() / std::sqrt(static_cast<double>(r));
    const Eigen::MatrixXd P = mask ? softmax_rows(S, *mask) : softmax_rows(S);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j)
        A(i, j) = mask && !mask->allows(i, j) ? Rational(0) : to_rational(std::max(P(i, j) + noise * u(rng), 1e-9));
    const double known = mask ? certified_masked_witness_error(A, *mask, Q, K) : certified_witness_error(A, Q, K, 64);
    const double epsilon = std::min(1.0, known * *rc::gen::element(1.0, 1.25, 3.0));
    ApproxOptions o = quick();
    o.optimise = *rc::gen::arbitrary<bool>();
    const Eigen::Index max_dk = std::min<Eigen::Index>(n, r + 2);
    const WidthResult w = mask ? approx_width(A, epsilon, max_dk, *mask, o) : approx_width(A, epsilon, max_dk, o);
    RC_LOG() << (causal ? "causal" : "free") << " n " << n << " r " << r << " known " << known << " width "
             << w.width_lower << ".." << w.width_upper << "\n";
    RC_CLASSIFY(w.width_upper != 0 && w.width_lower == w.width_upper, "closed");
    RC_ASSERT(w.width_lower <= r);  // E*(r) <= known <= epsilon: r does not miss
    RC_ASSERT(w.profile[static_cast<std::size_t>(r - 1)].error_lower <= known);
    for (const WidthProfileEntry& e : w.profile) RC_ASSERT(e.error_lower <= e.error_upper);
  });
}

TEST_CASE("attnrank::approx_error_bounds with fixed embeddings") {
  const Matrix<Rational> A = generated_target(6, 2, 1.0, 1e-2, 11).A;
  SECTION("X = I: the free question; the lower bound is the free one, the upper bound as good within 2x") {
    const ApproxBounds free = approx_error_bounds(A, 2, quick());
    const ApproxBounds on_x = approx_error_bounds(A, Matrix<Rational>(Matrix<Rational>::Identity(6, 6)), 2, quick());
    // The same search at the same width; its top is the power of 2 above each
    // error_upper, so the two agree when both upper bounds share it.
    if (std::ilogb(on_x.error_upper) == std::ilogb(free.error_upper)) CHECK(on_x.error_lower == free.error_lower);
    CHECK(on_x.error_lower > 0);
    CHECK(on_x.lower_proof.vectors.cols() == 3);
    CHECK(on_x.error_upper <= 2 * free.error_upper);
    CHECK(on_x.error_lower <= on_x.error_upper);
    CHECK(on_x.WQ.rows() == 6);
    CHECK(on_x.WQ.cols() == 2);
    CHECK(std::isinf(on_x.witness.max_abs_error));  // the weights are the witness, not a free Q, K
    CHECK(detail::certified_embedding_error(A, Matrix<Rational>(Matrix<Rational>::Identity(6, 6)), on_x.WQ, on_x.WK, 256) <=
          on_x.error_upper);
  }
  SECTION("rank X bounds the head's rank: X of rank 1 at d_k = 3 has the free width-1 lower bound") {
    Matrix<Rational> X(6, 3);
    for (Eigen::Index i = 0; i < 6; ++i) X.row(i) << i + 1, 2 * (i + 1), -(i + 1);
    const ApproxBounds b = approx_error_bounds(A, X, 3, quick());
    const ApproxBounds width_one = approx_error_bounds(A, 1, quick());
    // The free width-1 search (under its own ceiling, so the proofs agree only
    // when both upper bounds share their power of 2): a lower bound of E*(A, 1).
    CHECK(b.error_lower > 0);
    CHECK(b.error_lower <= width_one.error_upper);
    if (std::ilogb(b.error_upper) == std::ilogb(width_one.error_upper)) CHECK(b.error_lower == width_one.error_lower);
    // sigma_2 (width min(3, rank X) = 1, plus one), or at width 1 the order bound.
    if (b.lower_proof.orders) CHECK((b.lower_proof.rows.size() == 2 && b.lower_proof.cols.size() == 4));
    else CHECK(b.lower_proof.vectors.cols() == 2);
    CHECK(b.lower_reason.find("rank X = 1") != std::string::npos);
  }
  SECTION("bad input") {
    CHECK_THROWS_WITH(approx_error_bounds(A, Matrix<Rational>(Matrix<Rational>::Identity(5, 5)), 1),
                      Catch::Contains("the embeddings X have 5 rows"));
    CHECK_THROWS_WITH(approx_error_bounds(A, Matrix<Rational>(Matrix<Rational>::Identity(6, 2)), 3),
                      Catch::Contains("d_k = 3 is out of range"));
  }
  rc::prop("a head on X that generated a perturbed target: error_lower <= its certified error; the search never worsens the start", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 8);
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 6);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, m + 1);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint32_t>());
    std::normal_distribution<double> g(0.0, 1.0);
    const Eigen::MatrixXd Xd = Eigen::MatrixXd::NullaryExpr(n, m, [&] { return std::round(4 * g(rng)) / 4; });
    const Eigen::MatrixXd WQ = Eigen::MatrixXd::NullaryExpr(m, dk, [&] { return g(rng); });
    const Eigen::MatrixXd WK = Eigen::MatrixXd::NullaryExpr(m, dk, [&] { return g(rng); });
    Eigen::MatrixXd P = softmax_rows(Eigen::MatrixXd((Xd * WQ) * (Xd * WK).transpose() / std::sqrt(double(dk))));
    std::uniform_real_distribution<double> u(-1e-3, 1e-3);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) P(i, j) = std::max(P(i, j) + u(rng), 1e-9);
    const Matrix<Rational> T = P.unaryExpr([](double x) { return to_rational(x); });
    const Matrix<Rational> X = Xd.unaryExpr([](double x) { return to_rational(x); });
    const double known = detail::certified_embedding_error(T, X, WQ, WK, 64);  // E*_X <= known
    const ApproxBounds b = approx_error_bounds(T, X, dk, quick());
    RC_ASSERT(b.error_lower <= known);
    RC_ASSERT(b.error_lower <= b.error_upper);
    RC_ASSERT(b.error_upper <= b.start_error);
  });
}

TEST_CASE("attnrank::detail::surrogate_value") {
  rc::prop("the gradient matches central differences (free, through X, and under a causal mask)", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 6), dk = *rc::gen::inRange<Eigen::Index>(1, 3);
    const bool embeddings = *rc::gen::arbitrary<bool>();
    const Eigen::Index m = embeddings ? *rc::gen::inRange<Eigen::Index>(1, 5) : n;
    const std::optional<Mask> mask = *rc::gen::arbitrary<bool>() ? std::optional<Mask>(Mask::causal(n)) : std::nullopt;
    const Mask* masked = mask ? &*mask : nullptr;
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint32_t>());
    std::normal_distribution<double> g(0.0, 1.0);
    const Eigen::MatrixXd X = Eigen::MatrixXd::NullaryExpr(n, m, [&] { return g(rng); });
    const Eigen::MatrixXd S0 = Eigen::MatrixXd::NullaryExpr(n, n, [&] { return g(rng); });
    const Eigen::MatrixXd T = mask ? softmax_rows(S0, *mask) : softmax_rows(S0);
    const Eigen::VectorXd x = Eigen::VectorXd::NullaryExpr(2 * m * dk, [&] { return 0.5 * g(rng); });
    const double tau = *rc::gen::element(0.0, 0.01, 0.1);
    Eigen::VectorXd grad, scratch;
    double worst = 0;
    detail::surrogate_value(T, dk, embeddings ? &X : nullptr, tau, x, grad, worst, masked);
    RC_ASSERT(worst >= 0);
    RC_ASSERT(grad.allFinite());
    for (Eigen::Index t = 0; t < x.size(); ++t) {
      const double h = 1e-6;
      Eigen::VectorXd up = x, down = x;
      up(t) += h;
      down(t) -= h;
      const double f_up = detail::surrogate_value(T, dk, embeddings ? &X : nullptr, tau, up, scratch, worst, masked);
      const double f_down = detail::surrogate_value(T, dk, embeddings ? &X : nullptr, tau, down, scratch, worst, masked);
      // Central differences err by O(h^2 f''') plus rounding O(u f / h): 1e-5 relative to the scale.
      RC_ASSERT(std::abs((f_up - f_down) / (2 * h) - grad(t)) <= 1e-5 * (1 + grad.cwiseAbs().maxCoeff()));
    }
  });
}
