// Tests for numbers/detail/fixed_point_exp.hpp: exp_to_nearest gives exactly what
// mpfr_exp gives (value and ternary sign), exp_bound gives proven bounds within
// a few ulps, at precisions from 2 to 1100 bits (above 960 MPFR answers), for
// arguments of every kind the softmax meets and the edges of the reduction.
#include "support.hpp"

#include <attnrank/numbers/detail/fixed_point_exp.hpp>

using namespace attnrank;

namespace {

/// Sets x (precision `bits`) to an argument of one of the kinds that matter:
/// a shifted score in [-60, 0] (softmax), a positive one, a tiny one, one next to
/// a switch point k ln2 of the reduction (or a table boundary j / 2^16 above it),
/// one near the 2^20 limit of the fixed point, a huge one, a zero, an infinity.
void random_argument(mpfr_ptr x, mpfr_prec_t bits) {
  mpfr_set_prec(x, bits);
  switch (*rc::gen::inRange(0, 9)) {
    case 0:
      mpfr_set_si(x, -*rc::gen::inRange(0, 60'000'000), MPFR_RNDN);
      mpfr_div_ui(x, x, 1'000'000, MPFR_RNDN);
      break;
    case 1:
      mpfr_set_si(x, *rc::gen::inRange(1, 1'000'000), MPFR_RNDN);
      mpfr_div_ui(x, x, 9973, MPFR_RNDN);
      break;
    case 2:
      mpfr_set_si_2exp(x, *rc::gen::inRange(-1000, 1000), -*rc::gen::inRange(10, 400), MPFR_RNDN);
      break;
    case 3: {
      // k ln2 + j 2^-16 + (a few ulps either way): r lands on a table or k boundary.
      mpfr_t t;
      mpfr_init2(t, bits + 200);
      mpfr_const_log2(t, MPFR_RNDN);
      mpfr_mul_si(t, t, *rc::gen::inRange(-3000, 3000), MPFR_RNDN);
      mpfr_t j;
      mpfr_init2(j, 64);
      mpfr_set_si_2exp(j, *rc::gen::inRange(0, 3) * *rc::gen::inRange(0, 65536), -16, MPFR_RNDN);
      mpfr_add(t, t, j, MPFR_RNDN);
      mpfr_set(x, t, MPFR_RNDN);
      for (int steps = *rc::gen::inRange(-3, 4); steps != 0; steps += steps > 0 ? -1 : 1)
        steps > 0 ? mpfr_nextabove(x) : mpfr_nextbelow(x);
      mpfr_clear(j);
      mpfr_clear(t);
      break;
    }
    case 4:
      mpfr_set_si_2exp(x, *rc::gen::inRange(-(1 << 21), 1 << 21), 0, MPFR_RNDN);  // |x| up to 2^21
      if (*rc::gen::arbitrary<bool>()) mpfr_nextbelow(x);
      break;
    case 5:
      mpfr_set_si_2exp(x, *rc::gen::inRange(-1000, 1000), *rc::gen::inRange(20, 40), MPFR_RNDN);
      break;
    case 6:
      mpfr_set_zero(x, *rc::gen::arbitrary<bool>() ? 1 : -1);
      break;
    case 7:
      if (*rc::gen::arbitrary<bool>())
        mpfr_set_inf(x, *rc::gen::arbitrary<bool>() ? 1 : -1);
      else
        mpfr_set_nan(x);
      break;
    default:  // a full-precision random value in [-1, 1)
      mpfr_set_si(x, *rc::gen::inRange(-(1 << 30), 1 << 30), MPFR_RNDN);
      mpfr_div_2ui(x, x, 30, MPFR_RNDN);
      mpfr_sqrt(x, x, MPFR_RNDN);  // NaN for negatives: replaced below by -sqrt(-x)
      if (mpfr_nan_p(x)) {
        mpfr_set_si(x, -*rc::gen::inRange(1, 1 << 30), MPFR_RNDN);
        mpfr_div_2ui(x, x, 30, MPFR_RNDN);
        mpfr_cbrt(x, x, MPFR_RNDN);
      }
  }
}

mpfr_prec_t random_precision() {
  return *rc::gen::oneOf(rc::gen::inRange<mpfr_prec_t>(2, 300), rc::gen::element<mpfr_prec_t>(53, 64, 128, 167, 171, 192),
                         rc::gen::inRange<mpfr_prec_t>(300, 1100));
}

int sign(int t) { return (t > 0) - (t < 0); }

}  // namespace

TEST_CASE("attnrank::detail::exp_to_nearest") {
  rc::prop("exp_to_nearest gives mpfr_exp's value and ternary sign", [] {
    const mpfr_prec_t out_bits = random_precision();
    const mpfr_prec_t in_bits = *rc::gen::element(out_bits, out_bits + 40, std::max<mpfr_prec_t>(2, out_bits / 2));
    mpfr_t x, ours, theirs, spare;
    mpfr_init2(x, in_bits);
    mpfr_init2(ours, out_bits);
    mpfr_init2(theirs, out_bits);
    mpfr_init2(spare, 2);  // exp_to_nearest gives it out's precision
    random_argument(x, in_bits);
    detail::FixedExpWorkspace workspace;
    const int t_ours = detail::exp_to_nearest(ours, x, spare, workspace);
    const int t_theirs = mpfr_exp(theirs, x, MPFR_RNDN);
    const bool same = (mpfr_nan_p(ours) && mpfr_nan_p(theirs)) || mpfr_equal_p(ours, theirs);
    if (!same || sign(t_ours) != sign(t_theirs))
      RC_LOG() << "precision " << out_bits << ", x = " << mpfr_get_d(x, MPFR_RNDN) << "\n";
    RC_ASSERT(same);
    RC_ASSERT(sign(t_ours) == sign(t_theirs));
    mpfr_clears(x, ours, theirs, spare, static_cast<mpfr_ptr>(nullptr));
  });
  SECTION("one workspace serves every precision in turn") {
    detail::FixedExpWorkspace workspace;
    for (mpfr_prec_t bits : {171, 64, 600, 171, 2}) {
      mpfr_t x, ours, theirs, spare;
      mpfr_inits2(bits, x, ours, theirs, spare, static_cast<mpfr_ptr>(nullptr));
      mpfr_set_si(x, -7, MPFR_RNDN);
      mpfr_div_ui(x, x, 3, MPFR_RNDN);
      detail::exp_to_nearest(ours, x, spare, workspace);
      mpfr_exp(theirs, x, MPFR_RNDN);
      CHECK(mpfr_equal_p(ours, theirs));
      mpfr_clears(x, ours, theirs, spare, static_cast<mpfr_ptr>(nullptr));
    }
  }
}

TEST_CASE("attnrank::detail::exp_bound") {
  rc::prop("exp_bound rounds down below exp(x) and up above it, within 2 ulps of each other's rounding", [] {
    const mpfr_prec_t bits = random_precision();
    mpfr_t x, lo, hi, down, up;
    mpfr_init2(x, bits);
    mpfr_inits2(bits, lo, hi, static_cast<mpfr_ptr>(nullptr));
    mpfr_inits2(bits + 200, down, up, static_cast<mpfr_ptr>(nullptr));
    random_argument(x, bits);
    detail::FixedExpWorkspace workspace;
    detail::exp_bound(lo, x, MPFR_RNDD, workspace);
    detail::exp_bound(hi, x, MPFR_RNDU, workspace);
    if (mpfr_nan_p(x)) {
      RC_ASSERT(mpfr_nan_p(lo) && mpfr_nan_p(hi));
    } else {
      // down <= exp(x) <= up, 200 bits finer: lo <= down and up <= hi prove the bounds.
      mpfr_exp(down, x, MPFR_RNDD);
      mpfr_exp(up, x, MPFR_RNDU);
      RC_ASSERT(mpfr_lessequal_p(lo, down));
      RC_ASSERT(mpfr_greaterequal_p(hi, up));
      // Tight: the correct roundings down and up are at most one step away.
      mpfr_t d, u;
      mpfr_inits2(bits, d, u, static_cast<mpfr_ptr>(nullptr));
      mpfr_exp(d, x, MPFR_RNDD);
      mpfr_exp(u, x, MPFR_RNDU);
      if (mpfr_regular_p(d)) mpfr_nextbelow(d);
      if (mpfr_regular_p(u)) mpfr_nextabove(u);
      RC_ASSERT(mpfr_lessequal_p(d, lo));
      RC_ASSERT(mpfr_lessequal_p(hi, u));
      mpfr_clears(d, u, static_cast<mpfr_ptr>(nullptr));
    }
    mpfr_clears(x, lo, hi, down, up, static_cast<mpfr_ptr>(nullptr));
  });
}

TEST_CASE("attnrank::softmax_rows uses the fixed-point exp") {
  SECTION("Real weights equal e_j / sum with mpfr_exp's e_j, bit for bit") {
    PrecisionScope scope(171);
    Matrix<Real> S(2, 5);
    S << Real(-3) / 7, Real(2), Real("1e-40"), Real(-600), Real(0),  //
        Real(1) / 3, Real(1) / 3, Real(-1) / 3, Real(40), Real("-1e7");
    const Matrix<Real> A = softmax_rows(S);
    for (Eigen::Index r = 0; r < S.rows(); ++r) {
      std::vector<Real> e;
      Real sum = 0;
      for (Eigen::Index k = 0; k < S.cols(); ++k) {
        Real shifted = S(r, k) - S.row(r).maxCoeff();
        Real v;
        mpfr_exp(v.backend().data(), shifted.backend().data(), MPFR_RNDN);
        e.push_back(v);
        sum += v;
      }
      for (Eigen::Index k = 0; k < S.cols(); ++k) CHECK(A(r, k) == Real(e[static_cast<std::size_t>(k)] / sum));
    }
  }
}
