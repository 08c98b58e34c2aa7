// Tests for the backward pass: attention/certified_gradients.hpp (one head's
// gradients and logsumexp in the certified double tier), its MPFI twin
// (attention/detail/interval_attention.hpp) and attention/gradient_check.hpp (a
// kernel's gradient errors). The oracles: the MPFI gradients are checked against
// central differences of the forward pass in MPFR at 320 bits (independent of the
// backward formulas: a wrong D term or scale fails there), and every double bound
// must contain the MPFI enclosure at 256 bits.
#include "head_support.hpp"

#include <attnrank/attention/detail/interval_attention.hpp>
#include <attnrank/attention/gradient_check.hpp>
#include <attnrank/attention/kernel_tolerance.hpp>
#include <attnrank/attention/softmax.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/numbers/bands.hpp>

#include <cfloat>
#include <cmath>
#include <limits>

using namespace attnrank;

using namespace attnrank::test;

TEST_CASE("attnrank::detail::interval_attention_gradients") {
  rc::prop("each gradient is the derivative of <dO, O>: central differences at 320 bits agree", [] {
    const Head h = gen_head(1.0, 1.0, 1.0);
    const PrecisionScope scope(320);
    const detail::IntervalGradients G =
        detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), {});
    const Matrix<Real> Q = reals(h.Q), K = reals(h.K), V = reals(h.V), dO = reals(h.dO);
    const Real s = h.scale ? Real(*h.scale) : Real(1 / sqrt(Real(static_cast<int>(h.Q.cols()))));
    const Real step = Real(1) / Real(Integer(1) << 90);
    const Matrix<Real> EQ = gen_direction(Q), EK = gen_direction(K), EV = gen_direction(V);
    const auto f = [&](int sign) {
      const Real t = step * sign;
      return contracted_forward(Q + EQ * t, K + EK * t, V + EV * t, dO, s, h.mask_ptr());
    };
    const Real numeric = (f(1) - f(-1)) / (2 * step);
    const Real analytic = pairing(EQ, G.dq) + pairing(EK, G.dk) + pairing(EV, G.dv);
    // The difference quotient errs by O(step^2) ~ 2^-180 times third derivatives of size O(10^3).
    RC_ASSERT(abs(numeric - analytic) <= Real(1e-40) * (1 + abs(analytic)));
  });
  rc::prop("lse is log sum exp of the scaled scores: exp(s_ij - lse_i) sums to 1 over each row", [] {
    const Head h = gen_head(2.0, 1.0, 1.0);
    const PrecisionScope scope(256);
    const detail::IntervalGradients G =
        detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), {false, false, false, true});
    const Matrix<Real> S = multiply_transposed(reals(h.Q), reals(h.K));
    const Real s = h.scale ? Real(*h.scale) : Real(1 / sqrt(Real(static_cast<int>(h.Q.cols()))));
    for (Eigen::Index i = 0; i < S.rows(); ++i) {
      Real sum = 0;
      for (Eigen::Index j = 0; j < S.cols(); ++j)
        if (!h.mask || h.mask->allows(i, j)) sum += exp(s * S(i, j) - midpoint(G.lse(i, 0)));
      RC_ASSERT(abs(sum - 1) <= Real(1e-60));
    }
  });
}

TEST_CASE("attnrank::certified_attention_gradients") {
  rc::prop("every bound is a band and contains MPFI's gradients and lse, V and dO from 2^-1074 to DBL_MAX/2", [] {
    const Head h = gen_head(*rc::gen::element(1e-3, 1.0, 4.0), gen_magnitude(), gen_magnitude());
    const AttentionProducts products = *rc::gen::element(AttentionProducts::directed, AttentionProducts::a_priori);
    const ScaleBounds s = h.scale ? ScaleBounds::exactly(*h.scale) : ScaleBounds::inverse_sqrt(h.Q.cols());
    const GradientBounds B = certified_attention_gradients(h.Q, h.K, h.V, h.dO, s, h.mask_ptr(), products);
    for (const BoundsMatrix* m : {&B.dq, &B.dk, &B.dv, &B.lse}) RC_ASSERT(all_bands(*m));
    const PrecisionScope scope(256);
    const detail::IntervalGradients E =
        detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), {});
    RC_ASSERT(contains_all(B.dq, E.dq));
    RC_ASSERT(contains_all(B.dk, E.dk));
    RC_ASSERT(contains_all(B.dv, E.dv));
    RC_ASSERT(contains_all(B.lse, E.lse));
    // The forward pass under the same (possibly rectangular) mask.
    const BoundsMatrix O = certified_attention(h.Q, h.K, h.V, s, h.mask_ptr(), products);
    RC_ASSERT(all_bands(O));
    RC_ASSERT(contains_all(O, detail::interval_attention(h.Q, h.K, h.V, h.scale, h.mask_ptr())));
  });
  rc::prop("well-scaled inputs: directed bounds within (8 N + 100) u of the gradients' sizes", [] {
    const Head h = gen_head(1.0, 1.0, 1.0);
    const ScaleBounds s = h.scale ? ScaleBounds::exactly(*h.scale) : ScaleBounds::inverse_sqrt(h.Q.cols());
    const GradientBounds B = certified_attention_gradients(h.Q, h.K, h.V, h.dO, s, h.mask_ptr());
    const double n = static_cast<double>(std::max(h.Q.rows(), h.K.rows()));
    // |dS| <= 2 max|dO| max|V| d_v; dQ, dK add a factor s N max|K|, max|Q|; dV is at most N max|dO|.
    const double size = 1 + 4 * static_cast<double>(h.V.cols()) * n * n * 4;
    const double allowed = (8 * n + 100) * u * size * 4;
    for (const BoundsMatrix* m : {&B.dq, &B.dk, &B.dv}) RC_ASSERT(((m->hi - m->lo).array() <= allowed).all());
    RC_ASSERT(((B.lse.hi - B.lse.lo).array() <= 1e-13).all());  // 2^-47 from the certified log, and a few N u
  });
  SECTION("shapes and entries are checked") {
    const Eigen::MatrixXd Q = Eigen::MatrixXd::Ones(3, 2), K = Eigen::MatrixXd::Ones(4, 2), V = Eigen::MatrixXd::Ones(4, 3);
    CHECK_THROWS_WITH(certified_attention_gradients(Q, K, V, Eigen::MatrixXd::Ones(3, 2), ScaleBounds::exactly(1)),
                      Catch::Contains("dO is 3 x 2"));
    Eigen::MatrixXd bad = Eigen::MatrixXd::Ones(3, 3);
    bad(1, 2) = NAN;
    CHECK_THROWS_AS(certified_attention_gradients(Q, K, V, bad, ScaleBounds::exactly(1)), input_error);
    // lse alone needs no dO.
    const GradientBounds B =
        certified_attention_gradients(Q, K, V, Eigen::MatrixXd(), ScaleBounds::exactly(1), nullptr,
                                      AttentionProducts::directed, {false, false, false, true});
    CHECK(B.dq.lo.size() == 0);
    CHECK(B.lse.lo(0, 0) <= 2 + std::log(4.0));
    CHECK(B.lse.hi(0, 0) >= 2 + std::log(4.0));
  }
}

TEST_CASE("attnrank::check_kernel_gradients") {
  rc::prop("planted errors: every band contains the true max, mean and RMS error, under every fallback policy", [] {
    const Head h = gen_head(1.0, 1.0, 1.0);
    std::vector<Eigen::MatrixXd> q{h.Q}, k{h.K}, v{h.V}, dout{h.dO};
    KernelGradients candidate;
    std::vector<Matrix<Interval>> exact;
    {
      const PrecisionScope scope(256);
      const detail::IntervalGradients E =
          detail::interval_attention_gradients(h.Q, h.K, h.V, h.dO, h.scale, h.mask_ptr(), {});
      exact = {E.dq, E.dk, E.dv, E.lse};
    }
    std::vector<Eigen::MatrixXd>* lists[] = {&candidate.dq, &candidate.dk, &candidate.dv, &candidate.lse};
    const double planted = *rc::gen::element(0.0, 1e-12, 1e-6, 0.5);
    for (std::size_t r = 0; r < 4; ++r) {
      Eigen::MatrixXd M = nearest(exact[r]);
      M(0, 0) += planted;
      if (*rc::gen::arbitrary<bool>()) M = M.cast<float>().cast<double>();  // a float32 kernel's rounding
      lists[r]->push_back(M);
    }
    KernelCheckOptions options;
    options.scale = h.scale;
    options.mask = h.mask;
    options.fallback = *rc::gen::element(FallbackPolicy::automatic, FallbackPolicy::never, FallbackPolicy::always);
    const GradientCheck c = check_kernel_gradients(q, k, v, dout, candidate, &candidate, options);
    const PrecisionScope scope(256);
    const std::optional<TensorCheck>* checks[] = {&c.dq, &c.dk, &c.dv, &c.lse};
    for (std::size_t r = 0; r < 4; ++r) {
      RC_ASSERT(checks[r]->has_value());
      const OutputError& e = (*checks[r])->candidate;
      // The true errors from the 256-bit enclosure (its width is far below a double's ulp).
      Real max = 0, sum = 0, sum2 = 0;
      const Eigen::MatrixXd& O = (*lists[r])[0];
      for (Eigen::Index i = 0; i < O.rows(); ++i)
        for (Eigen::Index j = 0; j < O.cols(); ++j) {
          const Real err = abs(Real(O(i, j)) - midpoint(exact[r](i, j)));
          max = std::max(max, err);
          sum += err;
          sum2 += err * err;
        }
      const Real n = static_cast<double>(O.size());
      const Real slack = Real(1e-60);
      RC_ASSERT(Real(e.max_abs_error_lower) <= max + slack);
      RC_ASSERT(max <= Real(e.max_abs_error_upper) + slack);
      RC_ASSERT(Real(e.mean_abs_error_lower) <= sum / n + slack);
      RC_ASSERT(sum / n <= Real(e.mean_abs_error_upper) + slack);
      RC_ASSERT(Real(e.rms_error_lower) <= sqrt(sum2 / n) + slack);
      RC_ASSERT(sqrt(sum2 / n) <= Real(e.rms_error_upper) + slack);
      RC_ASSERT(e.mean_abs_error_lower <= e.max_abs_error_upper);
      if (planted >= 1e-6 && r < 3) RC_ASSERT(e.max_abs_error_upper >= planted / 2);
    }
  });

  SECTION("FlashAttention's rule with its floor, on an exact reference") {
    // dO = 0: every exact gradient is 0, so a reference of zeros has error exactly 0.
    const Eigen::MatrixXd Q = Eigen::MatrixXd::Random(6, 4), K = Eigen::MatrixXd::Random(6, 4),
                          V = Eigen::MatrixXd::Random(6, 3), dO = Eigen::MatrixXd::Zero(6, 3);
    KernelGradients reference, near, far;
    reference.dv = {Eigen::MatrixXd::Zero(6, 3)};
    near.dv = {Eigen::MatrixXd::Constant(6, 3, 1e-6)};
    far.dv = {Eigen::MatrixXd::Constant(6, 3, 1e-3)};
    const GradientCheck a = check_kernel_gradients({Q}, {K}, {V}, {dO}, near, &reference);
    const GradientCheck b = check_kernel_gradients({Q}, {K}, {V}, {dO}, far, &reference);
    REQUIRE(a.dv->reference->max_abs_error_upper == 0);
    // The multiplicative form lets nothing but an exact output pass beside an exact reference.
    CHECK(judge_ratio(a.dv->candidate, *a.dv->reference, 2, 0) == ToleranceVerdict::exceeded);
    CHECK(judge_ratio(a.dv->candidate, *a.dv->reference, 2, 1e-5) == ToleranceVerdict::within);
    CHECK(judge_ratio(b.dv->candidate, *b.dv->reference, 2, 1e-5) == ToleranceVerdict::exceeded);
  }

  SECTION("bad input names the tensor") {
    const Eigen::MatrixXd Q = Eigen::MatrixXd::Ones(3, 2), K = Eigen::MatrixXd::Ones(4, 2), V = Eigen::MatrixXd::Ones(4, 3);
    KernelGradients g;
    CHECK_THROWS_WITH(check_kernel_gradients({Q}, {K}, {V}, {}, g), Catch::Contains("nothing") || Catch::Contains("no gradient"));
    g.dk = {Eigen::MatrixXd::Ones(3, 2)};
    CHECK_THROWS_WITH(check_kernel_gradients({Q}, {K}, {V}, {Eigen::MatrixXd::Ones(3, 3)}, g),
                      Catch::Contains("dk head 0 is 3 x 2") && Catch::Contains("4 x 2"));
    g.dk = {Eigen::MatrixXd::Ones(4, 2)};
    CHECK_THROWS_WITH(check_kernel_gradients({Q}, {K}, {V}, {}, g), Catch::Contains("dout"));
    KernelGradients ref;
    ref.dq = {Eigen::MatrixXd::Ones(3, 2)};
    CHECK_THROWS_WITH(check_kernel_gradients({Q}, {K}, {V}, {Eigen::MatrixXd::Ones(3, 3)}, g, &ref),
                      Catch::Contains("reference dq needs the candidate's dq"));
  }
}

TEST_CASE("attnrank::check_kernel_gradients with grouped queries (GQA and MQA)") {
  rc::prop("dK and dV of a K/V head are the sums over its query heads: the bands contain the true errors", [] {
    const auto kv = *rc::gen::inRange<std::size_t>(1, 3), group = *rc::gen::inRange<std::size_t>(1, 9);
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7), d = *rc::gen::inRange<Eigen::Index>(1, 4);
    std::vector<Eigen::MatrixXd> q, k, v, dout;
    for (std::size_t j = 0; j < kv; ++j) k.push_back(gen_entries(n, d, 1.0)), v.push_back(gen_entries(n, d, 1.0));
    for (std::size_t t = 0; t < kv * group; ++t) q.push_back(gen_entries(n, d, 1.0)), dout.push_back(gen_entries(n, d, 1.0));
    KernelCheckOptions options;
    options.kv_heads = grouped_kv_heads(1, kv * group, kv);
    std::vector<Matrix<Interval>> dk(kv), dv(kv), dq;
    {
      const PrecisionScope scope(256);
      for (std::size_t t = 0; t < q.size(); ++t) {
        const std::size_t j = t / group;
        const detail::IntervalGradients E = detail::interval_attention_gradients(q[t], k[j], v[j], dout[t], std::nullopt,
                                                                                 nullptr, {true, true, true, false});
        dq.push_back(E.dq);
        dk[j] = dk[j].size() ? Matrix<Interval>(dk[j] + E.dk) : E.dk;
        dv[j] = dv[j].size() ? Matrix<Interval>(dv[j] + E.dv) : E.dv;
      }
    }
    KernelGradients candidate;
    for (std::size_t t = 0; t < q.size(); ++t) candidate.dq.push_back(nearest(dq[t]));
    for (std::size_t j = 0; j < kv; ++j) candidate.dk.push_back(nearest(dk[j])), candidate.dv.push_back(nearest(dv[j]));
    const std::size_t planted_head = *rc::gen::inRange<std::size_t>(0, kv);
    candidate.dk[planted_head](0, 0) += 1e-3;
    const GradientCheck c = check_kernel_gradients(q, k, v, dout, candidate, nullptr, options);
    RC_ASSERT(c.dk->candidate.max_abs_error_lower <= 1e-3 * (1 + 1e-9));
    RC_ASSERT(c.dk->candidate.max_abs_error_upper >= 1e-3 * (1 - 1e-6));
    RC_ASSERT(c.dk->candidate.worst_matrix == planted_head);
    RC_ASSERT(c.dv->candidate.max_abs_error_upper < 1e-12);  // the nearest doubles of the exact sums
    RC_ASSERT(c.dq->candidate.max_abs_error_upper < 1e-12);
  });
  SECTION("the forward check of a GQA head is the check with K and V repeated") {
    std::vector<Eigen::MatrixXd> q, k{Eigen::MatrixXd::Random(5, 3)}, v{Eigen::MatrixXd::Random(5, 2)}, out, rk, rv;
    for (int t = 0; t < 4; ++t) {
      q.push_back(Eigen::MatrixXd::Random(5, 3));
      out.push_back(Eigen::MatrixXd::Random(5, 2));
      rk.push_back(k[0]);
      rv.push_back(v[0]);
    }
    KernelCheckOptions mqa;
    mqa.kv_heads = grouped_kv_heads(1, 4, 1);
    const KernelCheck a = check_kernel(q, k, v, out, nullptr, mqa), b = check_kernel(q, rk, rv, out);
    CHECK(a.candidate.max_abs_error_lower == b.candidate.max_abs_error_lower);
    CHECK(a.candidate.max_abs_error_upper == b.candidate.max_abs_error_upper);
    CHECK_THROWS_WITH(grouped_kv_heads(1, 4, 3), Catch::Contains("divide"));
    KernelCheckOptions unread;
    unread.kv_heads = {0, 0, 0, 0};
    const KernelCheck c = check_kernel(q, {k[0], k[0]}, {v[0], v[0]}, out, nullptr, unread);
    CHECK(c.candidate.max_abs_error_upper == b.candidate.max_abs_error_upper);  // an unread K/V head changes nothing
    unread.kv_heads = {0, 0, 0, 2};
    CHECK_THROWS_WITH(check_kernel(q, {k[0], k[0]}, {v[0], v[0]}, out, nullptr, unread),
                      Catch::Contains("query head 3 reads K/V head 2 of 2"));
  }
}

TEST_CASE("attnrank::Mask::window") {
  rc::prop("allows key j of query i exactly when p - left <= j <= p + right, p = i + N_k - N_q or i", [] {
    const auto nq = *rc::gen::inRange<Eigen::Index>(1, 12), nk = *rc::gen::inRange<Eigen::Index>(1, 12);
    const long left = *rc::gen::inRange(-1, 6), right = *rc::gen::inRange(-1, 6);
    const MaskAlignment a = *rc::gen::element(MaskAlignment::bottom_right, MaskAlignment::top_left);
    const auto allowed = [&](Eigen::Index i, Eigen::Index j) {
      const Eigen::Index p = i + (a == MaskAlignment::bottom_right ? nk - nq : 0);
      return (left < 0 || j >= p - left) && (right < 0 || j <= p + right);
    };
    bool empty_row = false;
    for (Eigen::Index i = 0; i < nq; ++i) {
      bool any = false;
      for (Eigen::Index j = 0; j < nk; ++j) any = any || allowed(i, j);
      empty_row = empty_row || !any;
    }
    if (empty_row) {
      RC_ASSERT_THROWS_AS(Mask::window(nq, nk, left, right, a), input_error);
      return;
    }
    const Mask m = Mask::window(nq, nk, left, right, a);
    RC_ASSERT(m.size() == nq);
    RC_ASSERT(m.cols() == nk);
    for (Eigen::Index i = 0; i < nq; ++i)
      for (Eigen::Index j = 0; j < nk; ++j) RC_ASSERT(m.allows(i, j) == allowed(i, j));
  });
  SECTION("square causal is the causal mask in both alignments; bad sizes are refused") {
    CHECK(Mask::window(5, 5, -1, 0) == Mask::causal(5));
    CHECK(Mask::window(5, 5, -1, 0, MaskAlignment::top_left) == Mask::causal(5));
    CHECK(Mask::window(3, 7, -1, -1).is_full());
    CHECK_THROWS_WITH(Mask::window(9, 5, -1, 0), Catch::Contains("query row 0 (0-based) allows no key"));
    CHECK_THROWS_WITH(Mask::window(3, 3, -2, 0), Catch::Contains("-1 for unbounded"));
    CHECK_NOTHROW(Mask::window(9, 5, -1, 0, MaskAlignment::top_left));
  }
}

TEST_CASE("attnrank::check_kernel with a mask per head") {
  rc::prop("each head under its own mask: the bands contain the true errors, forward and backward", [] {
    const auto heads = *rc::gen::inRange<std::size_t>(1, 5);
    const auto nq = *rc::gen::inRange<Eigen::Index>(1, 7), nk = *rc::gen::inRange<Eigen::Index>(1, 7);
    std::vector<Eigen::MatrixXd> q, k, v, dout, out, dq;
    KernelCheckOptions options;
    const double planted = *rc::gen::element(0.0, 1e-6, 0.25);
    const std::size_t planted_head = *rc::gen::inRange<std::size_t>(0, heads);
    for (std::size_t t = 0; t < heads; ++t) {
      q.push_back(gen_entries(nq, 3, 1.0));
      k.push_back(gen_entries(nk, 3, 1.0));
      v.push_back(gen_entries(nk, 2, 1.0));
      dout.push_back(gen_entries(nq, 2, 1.0));
      std::optional<Mask> m = gen_window(nq, nk);
      options.masks.push_back(m ? *m : Mask::window(nq, nk, -1, -1));
      const PrecisionScope scope(256);
      Eigen::MatrixXd o = nearest(detail::interval_attention(q[t], k[t], v[t], std::nullopt, &options.masks[t]));
      Eigen::MatrixXd g = nearest(detail::interval_attention_gradients(q[t], k[t], v[t], dout[t], std::nullopt,
                                                                        &options.masks[t], {true, false, false, false}).dq);
      if (t == planted_head) o(0, 0) += planted, g(0, 0) += planted;
      out.push_back(o);
      dq.push_back(g);
    }
    const KernelCheck c = check_kernel(q, k, v, out, nullptr, options);
    KernelGradients grads;
    grads.dq = dq;
    const GradientCheck gc = check_kernel_gradients(q, k, v, dout, grads, nullptr, options);
    for (const OutputError* e : {&c.candidate, &gc.dq->candidate}) {
      RC_ASSERT(e->max_abs_error_lower <= planted + 1e-15);
      RC_ASSERT(e->max_abs_error_upper >= planted - 1e-15);
      if (planted > 0) RC_ASSERT(e->worst_matrix == planted_head);
    }
  });
  SECTION("one mask per query head, and not with a mask for all") {
    const Eigen::MatrixXd M = Eigen::MatrixXd::Ones(3, 2);
    KernelCheckOptions options;
    options.masks = {Mask::causal(3), Mask::causal(3)};
    CHECK_THROWS_WITH(check_kernel({M}, {M}, {M}, {M}, nullptr, options), Catch::Contains("2 masks for 1 query heads"));
    options.masks = {Mask::causal(3)};
    options.mask = Mask::causal(3);
    CHECK_THROWS_WITH(check_kernel({M}, {M}, {M}, {M}, nullptr, options), Catch::Contains("not both"));
  }
}
