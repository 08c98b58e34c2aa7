// Tests for the variants' score modifiers: numbers/certified_tanh.hpp (tanh bounds against
// MPFR), attention/score_modifiers.hpp through one head's forward and backward enclosures
// (softcap, ALiBi in both alignments, sinks, additive biases, dropout; attention/certified_gradients.hpp and its MPFI
// twin) and through the kernel checks. The oracles are written here from the definitions,
// in MPFR at 320 bits, sharing no code with the library's modifier stage: the scores
// s q.k, capped to c tanh(x / c), minus slope |i + off - j|, over a denominator with
// exp(sink); the MPFI gradients are checked against central differences of that forward.
#include "head_support.hpp"

#include <attnrank/attention/detail/a_priori_head.hpp>

#include <attnrank/attention/gradient_check.hpp>
#include <attnrank/attention/score_modifiers.hpp>
#include <attnrank/numbers/certified_tanh.hpp>

#include <cfloat>
#include <cmath>
#include <limits>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// Doubles from subnormal to DBL_MAX and infinity, both signs, and ordinary ones.
double gen_tanh_argument() {
  const double special = *rc::gen::element(0.0, 0x1p-1074, 1e-300, 1e-150, 1e-10, 1.5e-5, 1e-3, 0.25, 0.5, 1.0, 2.0,
                                           18.0, 19.5, 40.0, 400.0, 1e300, DBL_MAX, INFINITY);
  const double ordinary = *rc::gen::inRange(-400000, 400001) / 1000.0;
  const double x = *rc::gen::arbitrary<bool>() ? special : ordinary;
  return *rc::gen::arbitrary<bool>() ? -x : x;
}

/// FlashAttention's softcap values and others; ALiBi slopes 2^-k (FlashAttention's
/// get_alibi_slopes for up to 256 heads) and others; sink logits.
ScoreModifiers gen_modifiers() {
  ScoreModifiers m;
  if (*rc::gen::arbitrary<bool>()) m.softcap = *rc::gen::element(1.0, 15.0, 30.0, 50.0, 0.1, 0.7, 1e-3);
  if (*rc::gen::arbitrary<bool>())
    m.alibi_slope = *rc::gen::element(1.0, 0.5, 0x1p-8, 0.3535533905932738, 0.0, -0.25, 3.0);
  if (*rc::gen::arbitrary<bool>()) m.sink = *rc::gen::element(-5.0, 0.0, 0.7, 3.0, 20.0, -200.0);
  m.alignment = *rc::gen::element(MaskAlignment::bottom_right, MaskAlignment::top_left);
  return m;
}

/// Sometimes an additive bias of the head's shape (entries up to 3 in size), kept in `storage`.
void maybe_bias(const Head& h, ScoreModifiers& m, Eigen::MatrixXd& storage) {
  if (!*rc::gen::arbitrary<bool>()) return;
  storage = gen_entries(h.Q.rows(), h.K.rows(), 3.0);
  m.bias = &storage;
}

/// Sometimes dropout: a random keep-mask of the head's shape and p, kept in `storage`.
void maybe_dropout(const Head& h, ScoreModifiers& m, Eigen::MatrixXd& storage) {
  if (!*rc::gen::arbitrary<bool>()) return;
  storage.resize(h.Q.rows(), h.K.rows());
  for (auto& z : storage.reshaped()) z = *rc::gen::element(0.0, 1.0, 1.0);
  m.keep = &storage;
  m.dropout_p = *rc::gen::element(0.0, 0.1, 0.5, 0.875);
}

/// The variant's modified scores from the definition, at the precision in force.
Matrix<Real> variant_scores(const Matrix<Real>& Q, const Matrix<Real>& K, const Real& s, const ScoreModifiers& m) {
  Matrix<Real> X(Q.rows(), K.rows());
  const long offset = m.alignment == MaskAlignment::bottom_right ? static_cast<long>(K.rows() - Q.rows()) : 0;
  for (Eigen::Index i = 0; i < Q.rows(); ++i)
    for (Eigen::Index j = 0; j < K.rows(); ++j) {
      Real x = 0;
      for (Eigen::Index l = 0; l < Q.cols(); ++l) x += Q(i, l) * K(j, l);
      x *= s;
      if (m.softcap > 0) x = Real(m.softcap) * tanh(x / Real(m.softcap));
      if (m.alibi_slope) x -= Real(*m.alibi_slope) * std::abs(static_cast<long>(i) + offset - static_cast<long>(j));
      if (m.bias) x += Real((*m.bias)(i, j));
      X(i, j) = x;
    }
  return X;
}

/// Each row's denominator exp(sink + sink_shift) + sum over allowed keys of exp(x_ij).
Real denominator(const Matrix<Real>& X, Eigen::Index i, const Mask* mask, const ScoreModifiers& m,
                 const Real& sink_shift = 0) {
  Real sum = m.sink ? Real(exp(Real(*m.sink) + sink_shift)) : Real(0);
  for (Eigen::Index j = 0; j < X.cols(); ++j)
    if (!mask || mask->allows(i, j)) sum += exp(X(i, j));
  return sum;
}

Matrix<Real> variant_output(const Matrix<Real>& Q, const Matrix<Real>& K, const Matrix<Real>& V, const Real& s,
                            const Mask* mask, const ScoreModifiers& m, const Real& sink_shift = 0) {
  const Matrix<Real> X = variant_scores(Q, K, s, m);
  Matrix<Real> O = Matrix<Real>::Zero(Q.rows(), V.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const Real den = denominator(X, i, mask, m, sink_shift);
    for (Eigen::Index j = 0; j < X.cols(); ++j)
      if ((!mask || mask->allows(i, j)) && (!m.keep || (*m.keep)(i, j) != 0)) {
        Real p = exp(X(i, j)) / den;
        if (m.keep) p /= 1 - Real(m.dropout_p);
        for (Eigen::Index l = 0; l < V.cols(); ++l) O(i, l) += p * V(j, l);
      }
  }
  return O;
}

Real scale_of(const Head& h) {
  return h.scale ? Real(*h.scale) : Real(1 / sqrt(Real(static_cast<int>(h.Q.cols()))));
}

}  // namespace

TEST_CASE("attnrank::tanh_bounds") {
  rc::prop("the bounds contain tanh over the interval (MPFR at 256 bits), within [-1, 1], a few u apart", [] {
    double a = gen_tanh_argument(), b = *rc::gen::arbitrary<bool>() ? a : gen_tanh_argument();
    if (b < a) std::swap(a, b);
    // Narrow intervals (scores' bounds, one exp per entry): a few ulps up to 2^-20 wide.
    if (*rc::gen::arbitrary<bool>() && std::isfinite(a))
      b = a + *rc::gen::element(0x1p-1074, 0x1p-60, 0x1p-40, 0x1p-21, 0x1p-20) * std::max(1.0, std::fabs(a));
    double lo = 0, hi = 0;
    tanh_bounds(&a, &b, &lo, &hi, 1);
    RC_ASSERT(-1 <= lo);
    RC_ASSERT(lo <= hi);
    RC_ASSERT(hi <= 1);
    const PrecisionScope scope(256);
    const Real ta = tanh(Real(a)), tb = tanh(Real(b));
    RC_ASSERT(Real(lo) <= ta);
    RC_ASSERT(tb <= Real(hi));
    if (a == b) {
      // Absolute width a few u; relative too for tiny arguments (the series b - b^3/3 <= tanh b <= b).
      RC_ASSERT(hi - lo <= 64 * u);
      if (std::fabs(a) <= 0x1p-30) RC_ASSERT(hi - lo <= 4 * u * std::fabs(a) + 0x1p-1074);
    }
  });
  SECTION("odd, and exact where the answer is a double") {
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0.3};
    double lo[6], hi[6];
    tanh_bounds(x, x, lo, hi, 6);
    CHECK(lo[0] == 0);
    CHECK(hi[0] == 0);
    CHECK(hi[2] == 1);
    CHECK(lo[3] == -1);
    CHECK(lo[4] == -1);
    CHECK(hi[4] == 1);
    const double minus = -0.3;
    double mlo = 0, mhi = 0;
    tanh_bounds(&minus, &minus, &mlo, &mhi, 1);
    CHECK(mlo == -hi[5]);
    CHECK(mhi == -lo[5]);
  }
}

TEST_CASE("attnrank::certified_attention_gradients with score modifiers") {
  rc::prop("MPFI's output and lse contain the definition's (320 bits): softcap, ALiBi, sink", [] {
    const Head h = gen_head(*rc::gen::element(1.0, 4.0, 40.0), 1.0, 1.0);
    ScoreModifiers m = gen_modifiers();
    Eigen::MatrixXd bias, keep;
    maybe_bias(h, m, bias);
    maybe_dropout(h, m, keep);
    const PrecisionScope scope(256);
    const Matrix<Interval> O = detail::interval_attention(h.Q, h.K, h.V, h.scale, h.mask_ptr(), m);
    const detail::IntervalGradients G = detail::interval_attention_gradients(
        h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), {false, false, false, true}, m);
    const PrecisionScope fine(320);
    const Matrix<Real> Q = reals(h.Q), K = reals(h.K), V = reals(h.V);
    const Matrix<Real> E = variant_output(Q, K, V, scale_of(h), h.mask_ptr(), m);
    const Matrix<Real> X = variant_scores(Q, K, scale_of(h), m);
    const Real slack = Real(1e-60);
    for (Eigen::Index i = 0; i < E.rows(); ++i) {
      for (Eigen::Index l = 0; l < E.cols(); ++l) {
        RC_ASSERT(Real(lower_bound(O(i, l))) - slack <= E(i, l));
        RC_ASSERT(E(i, l) <= Real(upper_bound(O(i, l))) + slack);
      }
      const Real lse = log(denominator(X, i, h.mask_ptr(), m));
      RC_ASSERT(Real(lower_bound(G.lse(i, 0))) - slack <= lse);
      RC_ASSERT(lse <= Real(upper_bound(G.lse(i, 0))) + slack);
    }
  });
  rc::prop("MPFI's gradients (the sink's too) are the derivatives of the variant's <dO, O>: central differences at 320 bits", [] {
    const Head h = gen_head(*rc::gen::element(1.0, 4.0), 1.0, 1.0);
    ScoreModifiers m = gen_modifiers();
    Eigen::MatrixXd bias, keep;
    maybe_bias(h, m, bias);
    maybe_dropout(h, m, keep);
    const PrecisionScope scope(320);
    GradientsWanted wanted;
    wanted.dsink = true;
    const detail::IntervalGradients G =
        detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), wanted, m);
    RC_ASSERT(G.dsink.rows() == 1);
    if (!m.sink) RC_ASSERT(G.dsink(0, 0) == 0);  // nothing depends on a sink there is not
    const Matrix<Real> Q = reals(h.Q), K = reals(h.K), V = reals(h.V), dO = reals(h.dO);
    const Real step = Real(1) / Real(Integer(1) << 90);
    const Matrix<Real> EQ = gen_direction(Q), EK = gen_direction(K), EV = gen_direction(V);
    const Real ez = Real(*rc::gen::inRange(-8, 9)) / 8;
    const auto f = [&](int sign) {
      const Real t = step * sign;
      const Matrix<Real> O =
          variant_output(Q + EQ * t, K + EK * t, V + EV * t, scale_of(h), h.mask_ptr(), m, ez * t);
      Real sum = 0;
      for (Eigen::Index i = 0; i < O.rows(); ++i)
        for (Eigen::Index l = 0; l < O.cols(); ++l) sum += O(i, l) * dO(i, l);
      return sum;
    };
    const Real numeric = (f(1) - f(-1)) / (2 * step);
    const Real analytic =
        pairing(EQ, G.dq) + pairing(EK, G.dk) + pairing(EV, G.dv) + (m.sink ? ez * midpoint(G.dsink(0, 0)) : Real(0));
    RC_ASSERT(abs(numeric - analytic) <= Real(1e-40) * (1 + abs(analytic)));
    if (m.sink) RC_ASSERT(Real(upper_bound(G.dsink(0, 0))) - Real(lower_bound(G.dsink(0, 0))) <= Real(1e-60));
  });
  rc::prop("the double bounds are bands and contain MPFI's output, gradients and lse, V and dO to DBL_MAX/2", [] {
    const Head h = gen_head(*rc::gen::element(1e-3, 1.0, 4.0, 40.0), gen_magnitude(), gen_magnitude());
    ScoreModifiers m = gen_modifiers();
    Eigen::MatrixXd bias, keep;
    maybe_bias(h, m, bias);
    maybe_dropout(h, m, keep);
    const AttentionProducts products = *rc::gen::element(AttentionProducts::directed, AttentionProducts::a_priori);
    const ScaleBounds s = h.scale ? ScaleBounds::exactly(*h.scale) : ScaleBounds::inverse_sqrt(h.Q.cols());
    GradientsWanted all;
    all.output = true;
    all.dsink = true;
    const GradientBounds B = certified_attention_gradients(h.Q, h.K, h.V, h.dO, s, h.mask_ptr(), products, all, m);
    for (const BoundsMatrix* b : {&B.output, &B.dq, &B.dk, &B.dv, &B.lse, &B.dsink}) RC_ASSERT(all_bands(*b));
    const PrecisionScope scope(256);
    const detail::IntervalGradients E =
        detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), all, m);
    RC_ASSERT(contains_all(B.dsink, E.dsink));
    const Matrix<Interval> O = detail::interval_attention(h.Q, h.K, h.V, h.scale, h.mask_ptr(), m);
    RC_ASSERT(contains_all(B.output, O));
    if (!m.keep) {  // the fused forward pass with the variant on its tiles
      const BoundsMatrix F = detail::a_priori_attention(h.Q, h.K, h.V, s, h.mask_ptr(), m);
      RC_ASSERT(all_bands(F));
      RC_ASSERT(contains_all(F, O));
    }
    RC_ASSERT(contains_all(B.dq, E.dq));
    RC_ASSERT(contains_all(B.dk, E.dk));
    RC_ASSERT(contains_all(B.dv, E.dv));
    RC_ASSERT(contains_all(B.lse, E.lse));
  });
  rc::prop("well-scaled inputs: a variant's bounds (directed, and the fused pass's) are about as narrow as the plain head's", [] {
    const Head h = gen_head(1.0, 1.0, 1.0);
    ScoreModifiers m = gen_modifiers();
    Eigen::MatrixXd bias;
    maybe_bias(h, m, bias);
    const ScaleBounds s = h.scale ? ScaleBounds::exactly(*h.scale) : ScaleBounds::inverse_sqrt(h.Q.cols());
    GradientsWanted all;
    all.output = true;
    const GradientBounds plain =
        certified_attention_gradients(h.Q, h.K, h.V, h.dO, s, h.mask_ptr(), AttentionProducts::directed, all);
    const GradientBounds variant =
        certified_attention_gradients(h.Q, h.K, h.V, h.dO, s, h.mask_ptr(), AttentionProducts::directed, all, m);
    const auto widest = [](const BoundsMatrix& b) { return (b.hi - b.lo).maxCoeff(); };
    // Softcap's tanh is a few u wide absolutely, so c times that on each score; ALiBi and the
    // bias (|b| <= 3) add one rounding each, the sink one term. |V|, |dO| <= 1, N <= 8.
    const double score_width = 64 * u * std::max(1.0, m.softcap);
    RC_ASSERT(widest(variant.output) <= 4 * widest(plain.output) + 4 * score_width);
    RC_ASSERT(widest(variant.dq) <= 4 * widest(plain.dq) + 256 * score_width);
    const BoundsMatrix fused_plain = detail::a_priori_attention(h.Q, h.K, h.V, s, h.mask_ptr(), {});
    const BoundsMatrix fused = detail::a_priori_attention(h.Q, h.K, h.V, s, h.mask_ptr(), m);
    RC_ASSERT(widest(fused) <= 4 * widest(fused_plain) + 4 * score_width);
  });
  SECTION("bad modifiers are refused by name") {
    const Eigen::MatrixXd Q = Eigen::MatrixXd::Ones(3, 2), V = Eigen::MatrixXd::Ones(3, 2);
    ScoreModifiers m;
    m.softcap = -1;
    CHECK_THROWS_WITH(certified_attention_gradients(Q, Q, V, V, ScaleBounds::exactly(1), nullptr,
                                                    AttentionProducts::directed, {}, m),
                      Catch::Contains("softcap -1"));
    m.softcap = NAN;
    CHECK_THROWS_AS(validate(m), input_error);
    m = {};
    m.alibi_slope = INFINITY;
    CHECK_THROWS_WITH(validate(m), Catch::Contains("ALiBi slope inf"));
    m = {};
    m.sink = NAN;
    CHECK_THROWS_WITH(validate(m), Catch::Contains("sink logit nan"));
    m = {};
    Eigen::MatrixXd b = Eigen::MatrixXd::Zero(2, 3);
    b(1, 2) = -INFINITY;
    m.bias = &b;
    CHECK_THROWS_WITH(validate(m), Catch::Contains("bias entry [1, 2] (0-based) is -inf"));
  }
}

TEST_CASE("attnrank::check_kernel with score modifiers") {
  rc::prop("planted errors in the output and gradients of a variant: the bands contain the true errors", [] {
    const Head h = gen_head(1.0, 1.0, 1.0);
    ScoreModifiers m = gen_modifiers();
    KernelCheckOptions options;
    options.scale = h.scale;
    options.mask = h.mask;
    options.softcap = m.softcap;
    options.alignment = m.alignment;
    if (m.alibi_slope) options.alibi_slopes = {*m.alibi_slope};
    if (m.sink) options.sinks = {*m.sink};
    Eigen::MatrixXd bias, keep;
    maybe_bias(h, m, bias);
    if (m.bias) options.biases = {bias};
    maybe_dropout(h, m, keep);
    if (m.keep) options.dropout_keep = {keep}, options.dropout_p = m.dropout_p;
    options.fallback = *rc::gen::element(FallbackPolicy::automatic, FallbackPolicy::never, FallbackPolicy::always);
    Matrix<Interval> exact_o;
    detail::IntervalGradients exact;
    {
      const PrecisionScope scope(256);
      exact_o = detail::interval_attention(h.Q, h.K, h.V, h.scale, h.mask_ptr(), m);
      exact = detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), {}, m);
    }
    const double planted = *rc::gen::element(0.0, 1e-9, 1e-4, 0.5);
    const auto plant = [&](const Matrix<Interval>& E) {
      Eigen::MatrixXd M = nearest(E);
      M(M.rows() - 1, 0) += planted;
      return M;
    };
    const KernelCheck c = check_kernel({h.Q}, {h.K}, {h.V}, {plant(exact_o)}, nullptr, options);
    KernelGradients g;
    g.dq = {plant(exact.dq)};
    g.dk = {plant(exact.dk)};
    const GradientCheck gc = check_kernel_gradients({h.Q}, {h.K}, {h.V}, {h.dO}, g, nullptr, options);
    for (const OutputError* e : {&c.candidate, &gc.dq->candidate, &gc.dk->candidate}) {
      RC_ASSERT(e->max_abs_error_lower <= planted * (1 + 1e-9) + 1e-15);
      RC_ASSERT(e->max_abs_error_upper >= planted - 1e-15);  // the planted sum rounds to the output's ulp
    }
  });
  SECTION("one slope and one sink per query head") {
    const Eigen::MatrixXd M = Eigen::MatrixXd::Ones(3, 2);
    KernelCheckOptions options;
    options.sinks = {0.5, 1.0};
    CHECK_THROWS_WITH(check_kernel({M}, {M}, {M}, {M}, nullptr, options), Catch::Contains("2 sinks for 1 query heads"));
    options.sinks = {};
    options.alibi_slopes = {NAN};
    CHECK_THROWS_WITH(check_kernel({M}, {M}, {M}, {M}, nullptr, options), Catch::Contains("ALiBi slope"));
    // The fused pass with a variant checks its inputs as the plain one does.
    options.alibi_slopes = {};
    options.softcap = 50;
    Eigen::MatrixXd bad = M;
    bad(1, 0) = NAN;
    CHECK_THROWS_AS(check_kernel({bad}, {M}, {M}, {M}, nullptr, options), input_error);
    ScoreModifiers m;
    m.softcap = 50;
    CHECK_THROWS_AS(detail::a_priori_attention(bad, M, M, ScaleBounds::exactly(1), nullptr, m), input_error);
    m.keep = &M;  // dropout is not fused
    CHECK_THROWS_AS(detail::a_priori_attention(M, M, M, ScaleBounds::exactly(1), nullptr, m), input_error);
  }
}

TEST_CASE("attnrank::check_kernel_gradients dsinks") {
  rc::prop("a sink shared by the batches: the check's bands contain the planted error of the summed gradient", [] {
    const std::size_t batches = *rc::gen::inRange<std::size_t>(1, 4), heads = *rc::gen::inRange<std::size_t>(1, 3);
    const Head h0 = gen_head(1.0, 1.0, 1.0);
    std::vector<Eigen::MatrixXd> q, k, v, dout;
    KernelCheckOptions options;
    options.scale = h0.scale;
    options.mask = h0.mask;
    std::vector<double> sink(heads);
    for (double& z : sink) z = *rc::gen::element(-5.0, 0.0, 0.7, 3.0, 20.0, -200.0);
    for (std::size_t t = 0; t < batches * heads; ++t) {
      // Every head its own data, of h0's shape (one mask for all).
      q.push_back(gen_entries(h0.Q.rows(), h0.Q.cols(), 1.0));
      k.push_back(gen_entries(h0.K.rows(), h0.K.cols(), 1.0));
      v.push_back(gen_entries(h0.V.rows(), h0.V.cols(), 1.0));
      dout.push_back(gen_entries(h0.dO.rows(), h0.dO.cols(), 1.0));
      options.sinks.push_back(sink[t % heads]);
      options.sink_params.push_back(t % heads);
    }
    std::vector<Interval> exact(heads, Interval(0));
    {
      const PrecisionScope scope(256);
      GradientsWanted only;
      only.dq = only.dk = only.dv = only.lse = false;
      only.dsink = true;
      for (std::size_t t = 0; t < q.size(); ++t) {
        ScoreModifiers m;
        m.sink = options.sinks[t];
        exact[t % heads] +=
            detail::interval_attention_gradients(q[t], k[t], v[t], dout[t], h0.scale, h0.mask_ptr(), only, m).dsink(0, 0);
      }
    }
    const double planted = *rc::gen::element(0.0, 1e-9, 1e-4, 0.5);
    Eigen::MatrixXd d(static_cast<Eigen::Index>(heads), 1);
    for (std::size_t g = 0; g < heads; ++g) d(static_cast<Eigen::Index>(g), 0) = mpfi_get_d(exact[g].backend().data());
    const Eigen::Index at = *rc::gen::inRange<Eigen::Index>(0, static_cast<Eigen::Index>(heads));
    d(at, 0) += planted;
    options.fallback = *rc::gen::element(FallbackPolicy::automatic, FallbackPolicy::never, FallbackPolicy::always);
    KernelGradients g;
    g.dsinks = {d};
    const GradientCheck c = check_kernel_gradients(q, k, v, dout, g, nullptr, options);
    RC_ASSERT(c.dsinks.has_value());
    RC_ASSERT(!c.dq && !c.dk && !c.dv && !c.lse);
    RC_ASSERT(c.dsinks->candidate.max_abs_error_lower <= planted * (1 + 1e-9) + 1e-15);
    RC_ASSERT(c.dsinks->candidate.max_abs_error_upper >= planted - 1e-15);
    if (planted >= 1e-4) RC_ASSERT(c.dsinks->candidate.worst_row == at);
  });
  SECTION("refused by name: no sinks, the wrong count, heads sharing a parameter with different sinks") {
    const Eigen::MatrixXd M = Eigen::MatrixXd::Ones(3, 2);
    KernelCheckOptions options;
    KernelGradients g;
    g.dsinks = {Eigen::MatrixXd::Zero(1, 1)};
    CHECK_THROWS_WITH(check_kernel_gradients({M}, {M}, {M}, {M}, g, nullptr, options),
                      Catch::Contains("the attention has no sinks"));
    options.sinks = {0.5, 0.5};
    options.sink_params = {0, 0};
    g.dsinks = {Eigen::MatrixXd::Zero(2, 1)};
    CHECK_THROWS_WITH(check_kernel_gradients({M, M}, {M, M}, {M, M}, {M, M}, g, nullptr, options),
                      Catch::Contains("the candidate dsinks has 2 entries (2 x 1) for 1 sink parameters"));
    options.sinks = {0.5, 0.25};
    g.dsinks = {Eigen::MatrixXd::Zero(1, 1)};
    CHECK_THROWS_WITH(check_kernel_gradients({M, M}, {M, M}, {M, M}, {M, M}, g, nullptr, options),
                      Catch::Contains("share sink parameter 0 but have sinks 0.5 and 0.25"));
    options.sinks = {0.5, 0.5};
    options.sink_params = {1, 1};
    CHECK_THROWS_WITH(check_kernel_gradients({M, M}, {M, M}, {M, M}, {M, M}, g, nullptr, options),
                      Catch::Contains("sink parameter 0 belongs to no query head"));
  }
}

namespace {

/// An N_q x N_k mask that may leave query rows without a key (EmptyRows::zero): a window in
/// either alignment (causal with N_q > N_k among them) or a random pattern with empty rows.
Mask gen_mask_with_empty_rows(Eigen::Index nq, Eigen::Index nk) {
  if (*rc::gen::arbitrary<bool>()) {
    const long left = *rc::gen::inRange(-1, 3), right = *rc::gen::inRange(-1, 2);
    const MaskAlignment a = *rc::gen::element(MaskAlignment::bottom_right, MaskAlignment::top_left);
    return Mask::window(nq, nk, left, right, a, EmptyRows::zero);
  }
  std::vector<int> bits(static_cast<std::size_t>(nq * nk));
  for (int& b : bits) b = *rc::gen::element(0, 1, 1);
  const Eigen::Index empty = *rc::gen::inRange<Eigen::Index>(0, nq);  // at least one row without a key
  for (Eigen::Index j = 0; j < nk; ++j) bits[static_cast<std::size_t>(empty * nk + j)] = 0;
  return Mask::from_pattern(
      nq, nk, [&](Eigen::Index i, Eigen::Index j) { return bits[static_cast<std::size_t>(i * nk + j)] != 0; }, nullptr,
      "the generated pattern", EmptyRows::zero);
}

}  // namespace

TEST_CASE("attnrank::check_kernel with rows without a key (EmptyRows::zero)") {
  rc::prop("the enclosures hold FlashAttention's convention: output 0, lse +inf (the sink with one), gradients 0 there", [] {
    const auto nq = *rc::gen::inRange<Eigen::Index>(1, 9), nk = *rc::gen::inRange<Eigen::Index>(1, 9);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 5), dv = *rc::gen::inRange<Eigen::Index>(1, 5);
    Head h{gen_entries(nq, d, 1.0), gen_entries(nk, d, 1.0), gen_entries(nk, dv, gen_magnitude()),
           gen_entries(nq, dv, 1.0), gen_mask_with_empty_rows(nq, nk), std::nullopt};
    ScoreModifiers m = gen_modifiers();
    Eigen::MatrixXd bias, keep;
    maybe_bias(h, m, bias);
    maybe_dropout(h, m, keep);
    const Mask& mask = *h.mask;
    // The definition at 320 bits: rows over the allowed keys, and FlashAttention's convention in empty ones.
    Matrix<Interval> mpfi_o;
    detail::IntervalGradients mpfi;
    GradientsWanted all;
    all.output = true;
    all.dsink = true;
    {
      const PrecisionScope scope(256);
      mpfi_o = detail::interval_attention(h.Q, h.K, h.V, h.scale, &mask, m);
      mpfi = detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, &mask, all, m);
    }
    {
      const PrecisionScope fine(320);
      const Matrix<Real> Q = reals(h.Q), K = reals(h.K), V = reals(h.V);
      const Matrix<Real> E = variant_output(Q, K, V, scale_of(h), &mask, m);
      const Matrix<Real> X = variant_scores(Q, K, scale_of(h), m);
      const Real slack = Real(1e-60) * (1 + Real(h.V.cwiseAbs().maxCoeff()));
      for (Eigen::Index i = 0; i < nq; ++i) {
        for (Eigen::Index l = 0; l < dv; ++l) {
          RC_ASSERT(Real(lower_bound(mpfi_o(i, l))) - slack <= E(i, l));
          RC_ASSERT(E(i, l) <= Real(upper_bound(mpfi_o(i, l))) + slack);
        }
        const Real den = denominator(X, i, &mask, m);
        if (den == 0) {  // no key and no sink: FlashAttention's +inf
          RC_ASSERT(std::isinf(lower_bound(mpfi.lse(i, 0)).convert_to<double>()));
        } else {
          const Real lse = log(den);
          RC_ASSERT(Real(lower_bound(mpfi.lse(i, 0))) - Real(1e-60) <= lse);
          RC_ASSERT(lse <= Real(upper_bound(mpfi.lse(i, 0))) + Real(1e-60));
        }
      }
    }
    const ScaleBounds s = h.scale ? ScaleBounds::exactly(*h.scale) : ScaleBounds::inverse_sqrt(d);
    const AttentionProducts products = *rc::gen::element(AttentionProducts::directed, AttentionProducts::a_priori);
    const GradientBounds B = certified_attention_gradients(h.Q, h.K, h.V, h.dO, s, &mask, products, all, m);
    for (const BoundsMatrix* b : {&B.output, &B.dq, &B.dk, &B.dv, &B.dsink}) RC_ASSERT(all_bands(*b));
    for (Eigen::Index i = 0; i < nq; ++i)  // [+inf, +inf]: FlashAttention's value, proven
      RC_ASSERT(is_band(B.lse.lo(i, 0), B.lse.hi(i, 0), mask.allowed_in_row(i) == 0));
    {
      const PrecisionScope scope(256);
      RC_ASSERT(contains_all(B.output, mpfi_o));
      RC_ASSERT(contains_all(B.dq, mpfi.dq));
      RC_ASSERT(contains_all(B.dk, mpfi.dk));
      RC_ASSERT(contains_all(B.dv, mpfi.dv));
      RC_ASSERT(contains_all(B.dsink, mpfi.dsink));
    }
    for (Eigen::Index i = 0; i < nq; ++i) {
      if (mask.allowed_in_row(i) > 0) continue;
      RC_ASSERT((B.output.lo.row(i).array() == 0).all() && (B.output.hi.row(i).array() == 0).all());
      RC_ASSERT((B.dq.lo.row(i).array() == 0).all() && (B.dq.hi.row(i).array() == 0).all());
      const double want = m.sink ? *m.sink : INFINITY;
      RC_ASSERT(B.lse.lo(i, 0) == want);
      RC_ASSERT(B.lse.hi(i, 0) == want);
    }
    // The forward passes of the check: the fused one (with the variant on its tiles, but for
    // dropout) and the plain check's directed one; their empty rows exactly 0.
    if (!m.keep) {
      const BoundsMatrix fused = m.any() ? detail::a_priori_attention(h.Q, h.K, h.V, s, &mask, m)
                                         : certified_attention(h.Q, h.K, h.V, s, &mask, products);
      const PrecisionScope scope(256);
      RC_ASSERT(all_bands(fused));
      RC_ASSERT(contains_all(fused, mpfi_o));
      for (Eigen::Index i = 0; i < nq; ++i)
        if (mask.allowed_in_row(i) == 0) RC_ASSERT((fused.lo.row(i).array() == 0).all() && (fused.hi.row(i).array() == 0).all());
    }
  });
  rc::prop("check_kernel: a kernel's zero rows and +inf lse pass, a planted error there is found; refused by default",
           [] {
    const auto nq = *rc::gen::inRange<Eigen::Index>(1, 9), nk = *rc::gen::inRange<Eigen::Index>(1, 9);
    const Head h{gen_entries(nq, 3, 1.0), gen_entries(nk, 3, 1.0), gen_entries(nk, 2, 1.0), gen_entries(nq, 2, 1.0),
                 gen_mask_with_empty_rows(nq, nk), std::nullopt};
    const Eigen::Index empty = h.mask->first_empty_row();
    KernelCheckOptions options;
    options.mask = h.mask;
    options.fallback = *rc::gen::element(FallbackPolicy::automatic, FallbackPolicy::never, FallbackPolicy::always);
    Matrix<Interval> exact_o;
    detail::IntervalGradients exact;
    {
      const PrecisionScope scope(256);
      exact_o = detail::interval_attention(h.Q, h.K, h.V, h.scale, h.mask_ptr());
      exact = detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), {});
    }
    Eigen::MatrixXd o = nearest(exact_o), lse(nq, 1);
    for (Eigen::Index i = 0; i < nq; ++i)
      lse(i, 0) = h.mask->allowed_in_row(i) == 0 ? INFINITY : midpoint(exact.lse(i, 0)).convert_to<double>();
    KernelGradients g;
    g.lse = {lse};
    g.dq = {nearest(exact.dq)};
    if (empty < 0) {  // a window may leave every row a key
      RC_ASSERT(check_kernel({h.Q}, {h.K}, {h.V}, {o}, nullptr, options).candidate.max_abs_error_upper < 1e-13);
      return;
    }
    RC_ASSERT_THROWS_AS(check_kernel({h.Q}, {h.K}, {h.V}, {o}, nullptr, options), input_error);
    options.empty_rows = EmptyRows::zero;
    const KernelCheck ok = check_kernel({h.Q}, {h.K}, {h.V}, {o}, nullptr, options);
    RC_ASSERT(ok.candidate.max_abs_error_upper < 1e-13);
    const GradientCheck gok = check_kernel_gradients({h.Q}, {h.K}, {h.V}, {h.dO}, g, nullptr, options);
    RC_ASSERT(gok.lse->candidate.max_abs_error_upper < 1e-13);
    RC_ASSERT(gok.lse->candidate.infinity_missed == 0);
    RC_ASSERT(gok.dq->candidate.max_abs_error_upper < 1e-13);
    // A kernel that leaves the row's garbage (or writes a finite lse there) is proven wrong at that row.
    const double planted = *rc::gen::element(1e-9, 0.5);
    o(empty, 0) += planted;
    const KernelCheck bad = check_kernel({h.Q}, {h.K}, {h.V}, {o}, nullptr, options);
    RC_ASSERT(bad.candidate.max_abs_error_lower >= planted * (1 - 1e-9));
    RC_ASSERT(bad.candidate.max_abs_error_upper <= planted * (1 + 1e-9) + 1e-13);
    g.lse[0](empty, 0) = 0;
    const GradientCheck gbad = check_kernel_gradients({h.Q}, {h.K}, {h.V}, {h.dO}, g, nullptr, options);
    RC_ASSERT(gbad.lse->candidate.infinity_missed == 1);
    RC_ASSERT(gbad.lse->candidate.max_abs_error_lower == INFINITY);
    RC_ASSERT(gbad.lse->candidate.worst_row == empty);
  });
}
