// Tests for attnrank/numbers/detail/vector_exp.hpp against MPFR's correctly rounded exp,
// and for the double softmax built on it (attention/detail/softmax_double.hpp) against the
// MPFR softmax.
#include "support.hpp"

#include <attnrank/numbers/detail/vector_exp.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>

using namespace attnrank;

namespace {

constexpr double u = 0x1p-53;

/// What the header promises for exp_double(x), checked with a 256-bit exp:
/// relative error < 4u for normal results, absolute 2^-1075 + 4u exp(x) below
/// them, +inf beyond the largest double (allowed within 4u of it), NaN for NaN.
bool within_promise(double x, double y, double* error_in_u = nullptr) {
  if (std::isnan(x)) return std::isnan(y);
  mpfr_t exact, diff, bound;
  mpfr_init2(exact, 256);
  mpfr_init2(diff, 256);
  mpfr_init2(bound, 256);
  mpfr_set_d(exact, x, MPFR_RNDN);
  mpfr_exp(exact, exact, MPFR_RNDN);
  bool ok;
  if (y == std::numeric_limits<double>::infinity()) {
    ok = mpfr_cmp_d(exact, DBL_MAX * (1 - 4 * u)) > 0;  // overflow, or within 4u of it
  } else if (mpfr_cmp_d(exact, DBL_MAX) > 0) {
    ok = false;  // exp(x) overflows but y is finite
  } else {
    mpfr_sub_d(diff, exact, y, MPFR_RNDN);
    mpfr_abs(diff, diff, MPFR_RNDN);
    const bool normal = mpfr_cmp_d(exact, DBL_MIN) >= 0;
    mpfr_mul_2si(bound, exact, -51, MPFR_RNDN);  // 4u exp(x), exact at 256 bits
    if (!normal) {
      mpfr_t half_subnormal_ulp;
      mpfr_init2(half_subnormal_ulp, 64);
      mpfr_set_ui_2exp(half_subnormal_ulp, 1, -1075, MPFR_RNDN);
      mpfr_add(bound, bound, half_subnormal_ulp, MPFR_RNDN);
      mpfr_clear(half_subnormal_ulp);
    }
    ok = std::isfinite(y) && y >= 0 && mpfr_cmp(diff, bound) <= 0;
    if (error_in_u && normal) {
      mpfr_div(diff, diff, exact, MPFR_RNDN);
      *error_in_u = mpfr_get_d(diff, MPFR_RNDN) / u;
    }
  }
  mpfr_clear(exact);
  mpfr_clear(diff);
  mpfr_clear(bound);
  return ok;
}

/// Doubles of every kind exp meets: arbitrary bit patterns, the softmax range
/// [-50, 0], tiny arguments, the subnormal and overflow edges, and the points
/// (k + 1/2) ln2 where the reduction switches k.
rc::Gen<double> gen_exp_argument() {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::arbitrary<std::uint64_t>(), [](std::uint64_t bits) { return std::bit_cast<double>(bits); }),
      rc::gen::map(rc::gen::inRange(-50'000'000, 1), [](int v) { return v * 1e-6; }),
      rc::gen::map(rc::gen::inRange(-1'000'000, 1'000'000), [](int v) { return std::ldexp(v, -60); }),
      rc::gen::map(rc::gen::inRange(-746'000'000, -700'000'000), [](int v) { return v * 1e-6; }),
      rc::gen::map(rc::gen::inRange(700'000'000, 711'000'000), [](int v) { return v * 1e-6; }),
      rc::gen::map(rc::gen::pair(rc::gen::inRange(-1077, 1026), rc::gen::inRange(-4, 5)), [](std::pair<int, int> kj) {
        double x = (kj.first + 0.5) * 0.6931471805599453;
        for (int j = 0; j < std::abs(kj.second); ++j) x = std::nextafter(x, kj.second > 0 ? 1e9 : -1e9);
        return x;
      }));
}

}  // namespace

TEST_CASE("attnrank::detail::exp_double") {
  rc::prop("exp_double is within 4u of exp (relative; absolute 2^-1075 more below the normal range)", [] {
    const double x = *gen_exp_argument();
    double err = 0;
    RC_ASSERT(within_promise(x, detail::exp_double(x), &err));
    RC_TAG(err > 1 ? "normal result, error in (u, 4u)" : "error at most u, or not a normal result");
  });
  SECTION("every switch point of the reduction, and its neighbours") {
    double worst = 0;
    int failures = 0;
    for (int k = -1077; k <= 1025; ++k) {
      double x = (k + 0.5) * 0.6931471805599453;
      for (int step = 0; step < 8; ++step) {
        for (double y : {x, -x}) {
          double err = 0;
          if (!within_promise(y, detail::exp_double(y), &err)) ++failures;
          worst = std::max(worst, err);
        }
        x = std::nextafter(x, 0.0);
      }
    }
    INFO("largest error seen: " << worst << " u");
    CHECK(failures == 0);
    CHECK(worst < 4);
  }
  SECTION("special values") {
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(detail::exp_double(0.0) == 1.0);
    CHECK(detail::exp_double(-0.0) == 1.0);
    CHECK(detail::exp_double(-inf) == 0.0);
    CHECK(detail::exp_double(inf) == inf);
    CHECK(std::isnan(detail::exp_double(std::nan(""))));
    CHECK(std::isnan(detail::exp_double(-std::nan(""))));  // negative NaN: no integer overflow inside (UBSan)
    CHECK(std::isnan(detail::exp_double(inf - inf)));
    double v[4] = {-std::nan(""), 1.0, inf - inf, -inf};
    detail::exp_in_place(v, 4);
    CHECK(std::isnan(v[0]));
    CHECK(v[1] == Approx(std::exp(1.0)).epsilon(1e-15));
    CHECK(std::isnan(v[2]));
    CHECK(v[3] == 0.0);
    CHECK(detail::exp_double(710.0) == inf);
    CHECK(detail::exp_double(-746.0) == 0.0);
    CHECK(detail::exp_double(-1e300) == 0.0);
    CHECK(detail::exp_double(1e300) == inf);
    CHECK(within_promise(709.78, detail::exp_double(709.78)));
    CHECK(within_promise(-745.0, detail::exp_double(-745.0)));
    CHECK(detail::exp_double(-745.0) > 0);
  }
  SECTION("exp_in_place applies exp_double to every element") {
    std::vector<double> v = {-1000, -745, -1, -1e-300, 0, 1e-300, 1, 700, 1000};
    std::vector<double> w = v;
    detail::exp_in_place(w.data(), w.size());
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(w[i] == detail::exp_double(v[i]));
  }
}

TEST_CASE("attnrank::softmax_rows [double, against MPFR]") {
  // docs/tiers.md: the shift s - m rounds each score by at most u |s - m| (a
  // perturbation of the scores); then exp (4u), the sum (gamma_(n-1)) and the
  // division (u) give |dA(r, j)| <= A(r, j) (expm1(2 u range_r) + gamma_(n + 8)).
  rc::prop("each weight is within the documented bound of the MPFR softmax", [] {
    const auto rows = *rc::gen::inRange(1, 5);
    const auto n = *rc::gen::inRange(1, 40);
    const double spread = *rc::gen::element(1e-12, 1.0, 30.0, 700.0, 1e6, 1e300);
    Matrix<double> S(rows, n);
    for (Eigen::Index r = 0; r < rows; ++r)
      for (Eigen::Index k = 0; k < n; ++k) S(r, k) = *rc::gen::inRange(-1'000'000, 1'000'001) * 1e-6 * spread;
    const Matrix<double> A = softmax_rows(S);
    PrecisionScope scope(256);
    const Matrix<Real> reference = softmax_rows(S.cast<Real>().eval());
    const double gamma = (n + 8) * u / (1 - (n + 8) * u);
    for (Eigen::Index r = 0; r < rows; ++r) {
      const double range = S.row(r).maxCoeff() - S.row(r).minCoeff();
      const double factor = std::expm1(2 * u * range) + gamma;
      for (Eigen::Index k = 0; k < n; ++k) {
        // exact is the reference rounded to double (u more); 2^-1070 covers weights
        // that are subnormal (absolute errors there).
        const double exact = static_cast<double>(reference(r, k));
        const double bound = exact == 0 ? 0.0 : (factor + u) * exact;
        RC_ASSERT(std::abs(A(r, k) - exact) <= bound + 0x1p-1070);
      }
    }
  });
}
