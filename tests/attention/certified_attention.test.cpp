// Tests for the certified double tier: attention/certified_attention.hpp (one
// head from double Q, K, V), attention/certified_double_forward.hpp (the layer)
// and attention/kernel_check.hpp (a kernel's error). The oracle throughout is
// MPFI at 256 bits on the same exact inputs: every double bound must contain it.
#include "mask_support.hpp"
#include "reference_values.hpp"
#include "support.hpp"

#include <attnrank/attention/certified_double_forward.hpp>
#include <attnrank/attention/kernel_check.hpp>
#include <attnrank/numbers/bands.hpp>
#include <attnrank/tutorial/worked_example.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace attnrank;

namespace {

constexpr double u = 0x1p-53;

Matrix<Interval> intervals(const Eigen::MatrixXd& M) {
  Matrix<Interval> out(M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) mpfi_set_d(out(i, j).backend().data(), M(i, j));
  return out;
}

/// softmax(s Q K^T) V in MPFI at the precision in force (s exact, or 1/sqrt(d)).
Matrix<Interval> mpfi_attention(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                std::optional<double> scale, const Mask* mask) {
  Matrix<Interval> S = multiply_transposed(intervals(Q), intervals(K));
  Interval s;
  if (scale) mpfi_set_d(s.backend().data(), *scale);
  else s = 1 / sqrt(Interval(static_cast<int>(Q.cols())));
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < S.cols(); ++j) S(i, j) *= s;
  return multiply(mask ? softmax_rows(S, *mask) : softmax_rows(S), intervals(V));
}

/// The narrow interval x lies within [lo, hi]: its midpoint does, to within its width.
bool inside(const Interval& x, double lo, double hi) {
  const double l = lower_bound(x).convert_to<double>(), h = upper_bound(x).convert_to<double>();
  // l and h are x's ends rounded to nearest; the exact value is in [l - ulp, h + ulp].
  return std::nextafter(lo, -INFINITY) <= h && l <= std::nextafter(hi, INFINITY);
}

bool contains_all(const BoundsMatrix& B, const Matrix<Interval>& E) {
  for (Eigen::Index i = 0; i < E.rows(); ++i)
    for (Eigen::Index j = 0; j < E.cols(); ++j)
      if (!inside(E(i, j), B.lo(i, j), B.hi(i, j))) return false;
  return true;
}

/// Q, K, V of n x d with entries c * (integer in [-1000, 1000]) / 1000.
Eigen::MatrixXd gen_doubles(Eigen::Index rows, Eigen::Index cols, double scale) {
  Eigen::MatrixXd M(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) M(i, j) = scale * *rc::gen::inRange(-1000, 1001) / 1000.0;
  return M;
}

}  // namespace

TEST_CASE("attnrank::certified_product_bounds of two balls") {
  rc::prop("contains X Y, exactly, for X and Y anywhere in the balls (corners and midpoints)", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 5), k = *rc::gen::inRange<Eigen::Index>(1, 5),
               n = *rc::gen::inRange<Eigen::Index>(1, 5);
    const double radius = *rc::gen::element(0.0, 1e-12, 0.5, 3.0);
    BallMatrix A{gen_doubles(m, k, 2.0), gen_doubles(m, k, radius).cwiseAbs()};
    BallMatrix B{gen_doubles(k, n, 2.0), gen_doubles(k, n, radius).cwiseAbs()};
    const BoundsMatrix P = certified_product_bounds(A, B);
    // A point of each ball: each entry at its lower end, midpoint or upper end.
    Matrix<Rational> X(m, k), Y(k, n);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < k; ++j)
        X(i, j) = to_rational(A.mid(i, j)) + *rc::gen::inRange(-1, 2) * to_rational(A.rad(i, j));
    for (Eigen::Index i = 0; i < k; ++i)
      for (Eigen::Index j = 0; j < n; ++j)
        Y(i, j) = to_rational(B.mid(i, j)) + *rc::gen::inRange(-1, 2) * to_rational(B.rad(i, j));
    const Matrix<Rational> XY = X * Y;
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        RC_ASSERT(to_rational(P.lo(i, j)) <= XY(i, j));
        RC_ASSERT(XY(i, j) <= to_rational(P.hi(i, j)));
      }
  });
}

TEST_CASE("attnrank::certified_attention") {
  rc::prop("contains MPFI's softmax(s Q K^T) V: moderate, huge, tiny scores, masks, rows with one key", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 9), d = *rc::gen::inRange<Eigen::Index>(1, 6),
               dv = *rc::gen::inRange<Eigen::Index>(1, 4);
    const double size = *rc::gen::element(1e-150, 1e-3, 1.0, 10.0, 1e3, 1e150);
    const Eigen::MatrixXd Q = gen_doubles(n, d, size), K = gen_doubles(n, d, *rc::gen::element(1.0, 1e-150, 1e150)),
                          V = gen_doubles(n, dv, *rc::gen::element(1.0, 1e-300, 1e300));
    const bool masked = *rc::gen::arbitrary<bool>();
    const std::optional<Mask> mask = masked ? std::optional<Mask>(test::gen_any_mask(n)) : std::nullopt;
    const std::optional<double> scale = *rc::gen::arbitrary<bool>() ? std::optional<double>(0.125) : std::nullopt;
    const ScaleBounds s = scale ? ScaleBounds::exactly(*scale) : ScaleBounds::inverse_sqrt(d);
    const AttentionProducts products = *rc::gen::element(AttentionProducts::directed, AttentionProducts::a_priori);
    const BoundsMatrix B = certified_attention(Q, K, V, s, mask ? &*mask : nullptr, products);
    RC_ASSERT(!B.lo.hasNaN());
    RC_ASSERT(!B.hi.hasNaN());
    RC_ASSERT((B.lo.array() <= B.hi.array()).all());
    const PrecisionScope scope(256);
    RC_ASSERT(contains_all(B, mpfi_attention(Q, K, V, scale, mask ? &*mask : nullptr)));
  });
  rc::prop("well-scaled inputs: every bound within (4 N + 60) u max|V| of MPFI's value", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 40), d = *rc::gen::inRange<Eigen::Index>(1, 9);
    const Eigen::MatrixXd Q = gen_doubles(n, d, 1.0), K = gen_doubles(n, d, 1.0), V = gen_doubles(n, 3, 1.0);
    const BoundsMatrix B = certified_attention(Q, K, V, ScaleBounds::inverse_sqrt(d));
    const double allowed = (4.0 * static_cast<double>(n) + 60) * u * std::max(V.cwiseAbs().maxCoeff(), 1e-300);
    RC_ASSERT(((B.hi - B.lo).array() <= allowed).all());
  });
  rc::prop("a priori products, well-scaled inputs: within (8 N + 4 d^2 + 100) u max|V| of MPFI's value", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 300), d = *rc::gen::inRange<Eigen::Index>(1, 17);
    const Eigen::MatrixXd Q = gen_doubles(n, d, 1.0), K = gen_doubles(n, d, 1.0), V = gen_doubles(n, 3, 1.0);
    const bool masked = *rc::gen::arbitrary<bool>();
    const Mask causal = Mask::causal(n);
    const BoundsMatrix B =
        certified_attention(Q, K, V, ScaleBounds::inverse_sqrt(d), masked ? &causal : nullptr, AttentionProducts::a_priori);
    const double N = static_cast<double>(n), D = static_cast<double>(d);
    const double allowed = (8 * N + 4 * D * D + 100) * u * std::max(V.cwiseAbs().maxCoeff(), 1e-300);
    RC_ASSERT(((B.hi - B.lo).array() <= allowed).all());
    if (n <= 40) {
      const PrecisionScope scope(256);
      RC_ASSERT(contains_all(B, mpfi_attention(Q, K, V, std::nullopt, masked ? &causal : nullptr)));
    }
  });
}

TEST_CASE("attnrank::certified_attention with a priori products (the fused head)") {
  rc::prop("a scale known to an interval: the bounds hold softmax(s Q K^T) V at both ends of it, any mask", [] {
    // Wide scale intervals make the shifted scores wide: the tile takes the two-exp path.
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 24), d = *rc::gen::inRange<Eigen::Index>(1, 5),
               dv = *rc::gen::inRange<Eigen::Index>(1, 4);
    const Eigen::MatrixXd Q = gen_doubles(n, d, *rc::gen::element(1.0, 10.0, 1e-150)),
                          K = gen_doubles(n, d, 1.0), V = gen_doubles(n, dv, *rc::gen::element(1.0, 1e-300, 1e300));
    const double s_lo = *rc::gen::element(0.125, 0.5, 1.0), s_hi = s_lo * *rc::gen::element(1.0, 1.0 + 0x1p-30, 2.0);
    const std::optional<Mask> mask =
        *rc::gen::arbitrary<bool>() ? std::optional<Mask>(test::gen_any_mask(n)) : std::nullopt;
    const Mask* m = mask ? &*mask : nullptr;
    const BoundsMatrix B = certified_attention(Q, K, V, ScaleBounds{s_lo, s_hi}, m, AttentionProducts::a_priori);
    RC_ASSERT(!B.lo.hasNaN());
    RC_ASSERT(!B.hi.hasNaN());
    RC_ASSERT((B.lo.array() <= B.hi.array()).all());
    // A convex combination of V's rows: never outside V's column ranges.
    for (Eigen::Index l = 0; l < dv; ++l) {
      RC_ASSERT((B.lo.col(l).array() >= V.col(l).minCoeff()).all());
      RC_ASSERT((B.hi.col(l).array() <= V.col(l).maxCoeff()).all());
    }
    const PrecisionScope scope(256);
    RC_ASSERT(contains_all(B, mpfi_attention(Q, K, V, s_lo, m)));
    RC_ASSERT(contains_all(B, mpfi_attention(Q, K, V, s_hi, m)));
  });
  SECTION("300 rows and keys: two row blocks of 256 and 60, tiles of 4 columns, a general mask") {
    // Rows and columns on each side of every block and tile edge against MPFI (the whole
    // output at 256 bits is 270 000 interval multiply-adds: one fixed case, not a property).
    std::mt19937_64 rng(20261204);
    std::uniform_real_distribution<double> uniform(-2.0, 2.0);
    const Eigen::Index n = 300, d = 3;
    const auto draw = [&](Eigen::Index r, Eigen::Index c) {
      Eigen::MatrixXd M(r, c);
      for (auto& x : M.reshaped()) x = uniform(rng);
      return M;
    };
    const Eigen::MatrixXd Q = draw(n, d), K = draw(n, d), V = draw(n, 2);
    Matrix<Rational> pattern(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) pattern(i, j) = (j == i || (i * 31 + j * 17) % 3 != 0) ? 1 : 0;
    const Mask mask = Mask::from_matrix(pattern, "test pattern");
    for (const Mask* m : {static_cast<const Mask*>(nullptr), &mask}) {
      INFO("masked = " << (m != nullptr));
      const BoundsMatrix B = certified_attention(Q, K, V, ScaleBounds::inverse_sqrt(d), m, AttentionProducts::a_priori);
      const PrecisionScope scope(256);
      CHECK(contains_all(B, mpfi_attention(Q, K, V, std::nullopt, m)));
      const double allowed = (8.0 * n + 4.0 * d * d + 100) * u * V.cwiseAbs().maxCoeff();
      CHECK(((B.hi - B.lo).array() <= allowed).all());
    }
  }
}

namespace {

/// rows x cols entries for the end of the double range: per column a magnitude from
/// the smallest subnormal to DBL_MAX, and values constant, of one sign, or of both
/// signs (so a column's weighted sum can pass DBL_MAX while every entry is finite).
Eigen::MatrixXd gen_extreme_values(Eigen::Index rows, Eigen::Index cols) {
  Eigen::MatrixXd M(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j) {
    const double size = *rc::gen::element(0x1p-1074, 1e-300, 1.0, 1e300, 4.4e305, 3e307, 1e308,
                                          std::numeric_limits<double>::max());
    const int kind = *rc::gen::inRange(0, 3);  // constant, in [size / 2, size], in [-size, size]
    const std::vector<int> draws = *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(rows),
                                                                        rc::gen::inRange(-1000, 1001));
    for (Eigen::Index i = 0; i < rows; ++i) {
      const int x = draws[static_cast<std::size_t>(i)];
      M(i, j) = kind == 0 ? size : kind == 1 ? size * (0.5 + std::abs(x) / 2000.0) : size * (x / 1000.0);
    }
  }
  return M;
}

/// Bounds on max |O - E| from MPFI enclosures E of the exact outputs: [lower, upper].
std::pair<Real, Real> true_error(const std::vector<Eigen::MatrixXd>& O, const std::vector<Matrix<Interval>>& E) {
  Real lower = 0, upper = 0;
  for (std::size_t t = 0; t < O.size(); ++t)
    for (Eigen::Index i = 0; i < O[t].rows(); ++i)
      for (Eigen::Index j = 0; j < O[t].cols(); ++j) {
        const Interval e = abs(Interval(O[t](i, j)) - E[t](i, j));
        lower = std::max(lower, lower_bound(e));
        upper = std::max(upper, upper_bound(e));
      }
  return {lower, upper};
}

}  // namespace

TEST_CASE("attnrank::certified_attention at the end of the double range") {
  rc::prop("every path's bounds are bands that contain MPFI's value, for V up to DBL_MAX and N up to 4096", [] {
    // Few query rows (MPFI's cost is rows x keys), many keys: a row's weighted sum of
    // V passes DBL_MAX from |v| ~ 4e305 at N = 1024 and ~3e307 at N = 16.
    const auto rows = *rc::gen::inRange<Eigen::Index>(1, 4), d = *rc::gen::inRange<Eigen::Index>(1, 4),
               dv = *rc::gen::inRange<Eigen::Index>(1, 4);
    const Eigen::Index keys = *rc::gen::element<Eigen::Index>(1, 2, 16, 300, 1024, 4096);
    // Scores from tiny to past DBL_MAX (1e154 x 1e154 x d overflows the scores GEMM).
    const Eigen::MatrixXd Q = gen_doubles(rows, d, *rc::gen::element(1.0, 1e-150, 1e3, 1e154)),
                          K = gen_doubles(keys, d, *rc::gen::element(1.0, 1e-300, 1e154)),
                          V = gen_extreme_values(keys, dv);
    const AttentionProducts products = *rc::gen::element(AttentionProducts::directed, AttentionProducts::a_priori);
    const BoundsMatrix B = certified_attention(Q, K, V, ScaleBounds::inverse_sqrt(d), nullptr, products);
    for (Eigen::Index i = 0; i < B.lo.rows(); ++i)
      for (Eigen::Index j = 0; j < B.lo.cols(); ++j) RC_ASSERT(is_band(B.lo(i, j), B.hi(i, j)));
    const PrecisionScope scope(256);
    RC_ASSERT(contains_all(B, mpfi_attention(Q, K, V, std::nullopt, nullptr)));
  });
  rc::prop("check_kernel's error bands contain the true error there, under every fallback policy", [] {
    const auto rows = *rc::gen::inRange<Eigen::Index>(1, 4), d = *rc::gen::inRange<Eigen::Index>(1, 3);
    const Eigen::Index keys = *rc::gen::element<Eigen::Index>(1, 4, 16, 300, 1024);
    const std::vector<Eigen::MatrixXd> q{gen_doubles(rows, d, *rc::gen::element(1.0, 1e154))},
        k{gen_doubles(keys, d, *rc::gen::element(1.0, 1e154))}, v{gen_extreme_values(keys, 2)};
    std::vector<Matrix<Interval>> exact;
    std::vector<Eigen::MatrixXd> candidate;
    {
      const PrecisionScope scope(256);
      exact.push_back(mpfi_attention(q[0], k[0], v[0], std::nullopt, nullptr));
      // A kernel's output: the exact value off by a factor (0.5: the audit's case), or nearly exact.
      const double factor = *rc::gen::element(0.5, 1.0, 1.0 - 0x1p-20);
      Eigen::MatrixXd o(rows, 2);
      for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < 2; ++j) {
          // The midpoint of an enclosure of DBL_MAX may round to inf: a kernel's output is finite here.
          const double m = exact[0](i, j).convert_to<double>(), big = std::numeric_limits<double>::max();
          o(i, j) = std::clamp(m, -big, big) * factor;
        }
      candidate.push_back(o);
    }
    const auto [lower, upper] = [&] {
      const PrecisionScope scope(256);
      return true_error(candidate, exact);
    }();
    KernelCheckOptions options;
    options.fallback = *rc::gen::element(FallbackPolicy::never, FallbackPolicy::automatic, FallbackPolicy::always);
    const KernelCheck c = check_kernel(q, k, v, candidate, &candidate, options);
    RC_TAG(c.method + " " + c.products);
    for (const OutputError* e : {&c.candidate, &*c.reference}) {
      RC_ASSERT(e->nonfinite == 0);
      RC_ASSERT(is_band(e->max_abs_error_lower, e->max_abs_error_upper));
      RC_ASSERT(is_band(e->max_rel_error_lower, e->max_rel_error_upper, true));  // infinite where E = 0
      RC_ASSERT(Real(e->max_abs_error_lower) <= upper);
      RC_ASSERT(Real(e->max_abs_error_upper) >= lower);
    }
    RC_ASSERT(is_band(c.ratio_lower, c.ratio_upper, true));
  });
  SECTION("the audit's case: V = 1e308 in a constant column, a candidate at half of it") {
    const Eigen::MatrixXd Q{{0.5, -1.0}, {1.0, 0.25}, {-0.75, 2.0}, {0.0, 1.0}};
    const Eigen::MatrixXd K{{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}, {-1.0, 0.5}};
    const Eigen::MatrixXd V = Eigen::MatrixXd::Constant(4, 1, 1e308);
    for (const FallbackPolicy policy : {FallbackPolicy::never, FallbackPolicy::automatic, FallbackPolicy::always}) {
      KernelCheckOptions options;
      options.fallback = policy;
      const KernelCheck c = check_kernel({Q}, {K}, {V}, {V * 0.5}, nullptr, options);
      INFO(c.method << " " << c.products);
      CHECK(c.candidate.max_abs_error_lower <= 5e307);
      CHECK(c.candidate.max_abs_error_upper >= 5e307);
      CHECK(c.candidate.max_rel_error_lower <= 0.5);
      CHECK(c.candidate.max_rel_error_upper >= 0.5);
      CHECK(c.candidate.max_rel_error_lower > 0.49);  // the exact output is exactly 1e308: pinned
    }
    // The fused pass itself: exactly 1e308 (a convex combination of equal values).
    const BoundsMatrix B = certified_attention(Q, K, V, ScaleBounds::inverse_sqrt(2), nullptr, AttentionProducts::a_priori);
    CHECK((B.lo.array() == 1e308).all());
    CHECK((B.hi.array() == 1e308).all());
  }
}

TEST_CASE("attnrank::certified_attention refuses bad shapes and values") {
  const Eigen::MatrixXd Q = Eigen::MatrixXd::Ones(3, 2), K = Eigen::MatrixXd::Ones(4, 2), V = Eigen::MatrixXd::Ones(4, 1);
  CHECK_NOTHROW(certified_attention(Q, K, V, ScaleBounds::inverse_sqrt(2)));
  CHECK_THROWS_AS(certified_attention(Q, Eigen::MatrixXd::Ones(4, 3), V, ScaleBounds::inverse_sqrt(2)), input_error);
  CHECK_THROWS_AS(certified_attention(Q, K, Eigen::MatrixXd::Ones(3, 1), ScaleBounds::inverse_sqrt(2)), input_error);
  const Mask causal = Mask::causal(3);
  CHECK_THROWS_AS(certified_attention(Q, K, V, ScaleBounds::inverse_sqrt(2), &causal), input_error);
  Eigen::MatrixXd bad = Q;
  bad(1, 1) = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(certified_attention(bad, K, V, ScaleBounds::inverse_sqrt(2)), Catch::Contains("Q[1, 1] (0-based)"));
  CHECK_THROWS_AS(ScaleBounds::exactly(0), input_error);
  CHECK_THROWS_AS(ScaleBounds::exactly(std::numeric_limits<double>::infinity()), input_error);
  SECTION("1/sqrt(d) is exact for powers of 4 and a two-ulp enclosure otherwise") {
    CHECK(ScaleBounds::inverse_sqrt(64).lo == 0.125);
    CHECK(ScaleBounds::inverse_sqrt(64).hi == 0.125);
    const ScaleBounds s = ScaleBounds::inverse_sqrt(2);
    CHECK(s.lo < s.hi);
    CHECK(s.lo * s.lo < 0.5);  // rounding to nearest of the squares: they straddle 1/2
    CHECK(s.hi * s.hi > 0.5);
  }
}

TEST_CASE("attnrank::certified_double_forward on the worked example") {
  const CertifiedDoubleTrace t = certified_double_forward(worked_example::layer<Rational>(), worked_example::X());
  REQUIRE(t.finite());
  INFO("widths " << (t.output.hi - t.output.lo));
  const PrecisionScope scope(200);
  for (std::size_t i = 0; i < test::reference::output.size(); ++i)
    for (std::size_t j = 0; j < test::reference::output[i].size(); ++j) {
      INFO("output(" << i << ", " << j << ")");
      const Rational exact_ish = parse_rational(test::reference::output[i][j]);  // 40 digits: within 1e-40
      const double lo = t.output.lo(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
      const double hi = t.output.hi(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
      CHECK(to_rational(lo) <= exact_ish + Rational(1, 1000000) * Rational(1, 1000000) * Rational(1, 1000000));
      CHECK(to_rational(hi) >= exact_ish - Rational(1, 1000000) * Rational(1, 1000000) * Rational(1, 1000000));
      CHECK(hi - lo < 4e-14);  // three keys, |V| <= 2, four terms of W^O: a few dozen ulps of 2
    }
}

TEST_CASE("attnrank::certified_double_forward encloses the exact layer") {
  rc::prop("every entry of the output, A and Z contains MPFI's exact-layer value at 256 bits, with and without masks", [] {
    const test::RandomLayer l = test::gen_layer();
    const MultiHeadAttention<Rational> layer = test::layer_in<Rational>(l);
    std::vector<Mask> masks;
    if (*rc::gen::arbitrary<bool>()) masks.push_back(test::gen_any_mask(l.X.rows()));
    const CertifiedDoubleTrace t = certified_double_forward(layer, l.X, masks);
    const PrecisionScope scope(256);
    const LayerTrace<Rational, Interval> e = layer.forward<Interval>(l.X, masks);
    const auto check = [](const BoundsMatrix& B, const Matrix<Interval>& E) {
      RC_ASSERT(!B.lo.hasNaN());
      RC_ASSERT(!B.hi.hasNaN());
      RC_ASSERT(contains_all(B, E));
    };
    check(t.output, e.output);
    for (std::size_t i = 0; i < t.heads.size(); ++i) {
      check(t.heads[i].A, e.heads[i].A);
      check(t.heads[i].Z, e.heads[i].Z);
    }
  });
  rc::prop("at the ends of the double range (X and weights from 2^-1000 to 2^500): bands, and true", [] {
    // Scores past DBL_MAX (X W^Q ~ 2^500 each side), values near it, products that underflow.
    test::RandomLayer l = test::gen_layer();
    const auto scaled = [](Matrix<Rational>& M, long e) {
      for (Eigen::Index i = 0; i < M.rows(); ++i)
        for (Eigen::Index j = 0; j < M.cols(); ++j) {
          mpq_ptr x = M(i, j).backend().data();
          if (e >= 0) mpq_mul_2exp(x, x, static_cast<mp_bitcnt_t>(e));
          else mpq_div_2exp(x, x, static_cast<mp_bitcnt_t>(-e));
        }
    };
    scaled(l.X, *rc::gen::element(-1000L, -500L, 0L, 250L, 500L));
    scaled(l.wq, *rc::gen::element(0L, 250L, 500L));
    scaled(l.wv, *rc::gen::element(-500L, 0L, 500L));
    const MultiHeadAttention<Rational> layer = test::layer_in<Rational>(l);
    const CertifiedDoubleTrace t = certified_double_forward(layer, l.X);
    const PrecisionScope scope(256);
    const LayerTrace<Rational, Interval> e = layer.forward<Interval>(l.X, {});
    const auto check = [](const BoundsMatrix& B, const Matrix<Interval>& E) {
      for (Eigen::Index i = 0; i < B.lo.rows(); ++i)
        for (Eigen::Index j = 0; j < B.lo.cols(); ++j) RC_ASSERT(is_band(B.lo(i, j), B.hi(i, j)));
      RC_ASSERT(contains_all(B, E));
    };
    check(t.output, e.output);
    for (std::size_t i = 0; i < t.heads.size(); ++i) {
      check(t.heads[i].A, e.heads[i].A);
      check(t.heads[i].Z, e.heads[i].Z);
    }
  });
  SECTION("double inputs are taken exactly: the same bounds as their exact rationals") {
    const auto layer = worked_example::layer<Rational>();
    const CertifiedDoubleTrace a = certified_double_forward(layer, worked_example::X());
    const CertifiedDoubleTrace b =
        certified_double_forward(layer_in_tier<double>(layer), to_tier<double>(worked_example::X()));
    CHECK(a.output.lo == b.output.lo);
    CHECK(a.output.hi == b.output.hi);
  }
}

TEST_CASE("attnrank::check_kernel") {
  std::mt19937_64 rng(20261202);
  std::normal_distribution<double> normal;
  const Eigen::Index n = 24, d = 8;
  const auto gauss = [&](Eigen::Index r, Eigen::Index c) {
    Eigen::MatrixXd M(r, c);
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) M(i, j) = normal(rng);
    return M;
  };
  const std::vector<Eigen::MatrixXd> q{gauss(n, d), gauss(n, d)}, k{gauss(n, d), gauss(n, d)}, v{gauss(n, d), gauss(n, d)};
  const Mask causal = Mask::causal(n);
  for (const bool masked : {false, true}) {
    INFO("masked = " << masked);
    const Mask* mask = masked ? &causal : nullptr;
    // The exact outputs at 256 bits, and float32 and float64 outputs built from them.
    std::vector<Matrix<Interval>> exact;
    std::vector<Eigen::MatrixXd> f32, f64;
    {
      const PrecisionScope scope(256);
      for (std::size_t t = 0; t < q.size(); ++t) exact.push_back(mpfi_attention(q[t], k[t], v[t], std::nullopt, mask));
    }
    for (const auto& E : exact) {
      Eigen::MatrixXd a(n, d), b(n, d);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < d; ++j) {
          const double m = E(i, j).convert_to<double>();  // within an ulp of the exact value
          b(i, j) = m;
          a(i, j) = static_cast<float>(m) * (1 + 3e-7 * static_cast<double>((i * 7 + j) % 5 - 2));  // a kernel's error
        }
      f32.push_back(a);
      f64.push_back(b);
    }
    // The true errors, from the 256-bit enclosures.
    const auto true_error = [&](const std::vector<Eigen::MatrixXd>& O) {
      const PrecisionScope scope(256);
      Real worst = 0;
      for (std::size_t t = 0; t < O.size(); ++t)
        for (Eigen::Index i = 0; i < n; ++i)
          for (Eigen::Index j = 0; j < d; ++j) {
            const Real e = abs(Real(O[t](i, j)) - approx_midpoint_real(exact[t](i, j)));
            if (e > worst) worst = e;
          }
      return worst.convert_to<double>();
    };
    KernelCheckOptions options;
    if (masked) options.mask = causal;
    options.fallback = FallbackPolicy::never;
    const KernelCheck c = check_kernel(q, k, v, f32, &f64, options);
    CHECK(c.method == "double");
    const double e32 = true_error(f32);
    CHECK(c.candidate.max_abs_error_lower <= e32 * (1 + 1e-12));
    CHECK(c.candidate.max_abs_error_upper >= e32 * (1 - 1e-12));
    CHECK(c.candidate.tight());                       // float32 errors dwarf the double widths
    CHECK_FALSE(c.reference->tight());                // but not float64's
    CHECK(c.candidate.max_rel_error_lower <= c.candidate.max_rel_error_upper);
    CHECK(c.ratio_lower <= c.ratio_upper);
    SECTION("the MPFI fallback pins the float64 reference's error and the ratio") {
      options.fallback = FallbackPolicy::automatic;
      const KernelCheck m = check_kernel(q, k, v, f32, &f64, options);
      CHECK(m.method == "mpfi");
      CHECK(m.bits >= 128);
      const double e64 = true_error(f64);
      CHECK(m.reference->max_abs_error_lower <= e64 * (1 + 1e-12));
      CHECK(m.reference->max_abs_error_upper >= e64 * (1 - 1e-12));
      CHECK(m.reference->tight());
      CHECK(m.ratio_lower <= e32 / e64 * (1 + 1e-9));
      CHECK(m.ratio_upper >= e32 / e64 * (1 - 1e-9));
      CHECK(m.ratio_upper / m.ratio_lower < 1.05);
    }
    SECTION("over the budget the fallback is skipped and the answer says why") {
      options.fallback = FallbackPolicy::automatic;
      options.fallback_budget = 10;
      const KernelCheck m = check_kernel(q, k, v, f32, &f64, options);
      CHECK(m.method == "double");
      CHECK_THAT(m.fallback_skipped, Catch::Contains("fallback always"));
    }
  }
  SECTION("a NaN in the candidate is an infinite error at its place") {
    std::vector<Eigen::MatrixXd> bad = v;  // any matrices of the right shape
    bad[1](5, 3) = std::numeric_limits<double>::quiet_NaN();
    const KernelCheck c = check_kernel(q, k, v, bad);
    CHECK(std::isinf(c.candidate.max_abs_error_lower));
    CHECK(c.candidate.nonfinite == 1);
    CHECK(c.candidate.worst_matrix == 1);
    CHECK(c.candidate.worst_row == 5);
    CHECK(c.candidate.worst_column == 3);
  }
  SECTION("shapes that do not fit are input errors") {
    std::vector<Eigen::MatrixXd> wrong = v;
    wrong[0] = Eigen::MatrixXd::Zero(n, d + 1);
    CHECK_THROWS_WITH(check_kernel(q, k, v, wrong), Catch::Contains("head 0"));
    CHECK_THROWS_AS(check_kernel(q, k, {v[0]}, v), input_error);
  }
}
