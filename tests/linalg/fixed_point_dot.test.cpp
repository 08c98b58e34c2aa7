// Tests for the fixed-point dot products of linalg/detail/fixed_point_dot.hpp (and the
// packed products of linalg/detail/packed_product.hpp, through multiply) against
// exact rational sums: the MPFR dot is the correctly rounded sum, and the MPFI
// dot's ends are the exact interval dot product's ends rounded outward, whenever
// the terms span at most max_span_bits; beyond that both stay within the
// documented bound. Operands have mixed precisions, exponents from 2^-5000 to
// 2^5000 (so both cases occur), zeros, and cancelling pairs.
#include "support.hpp"

#include <attnrank/linalg/product.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace attnrank;

namespace {

/// x exactly, as a rational (x finite).
Rational exact(mpfr_srcptr x) {
  if (mpfr_zero_p(x)) return Rational(0);
  mpz_t m;
  mpz_init(m);
  const long e = mpfr_get_z_2exp(m, x);
  const Integer significand(m);
  mpz_clear(m);
  if (e >= 0) return Rational(Integer(significand << static_cast<unsigned>(e)));
  return Rational(significand, Integer(Integer(1) << static_cast<unsigned>(-e)));
}

Rational power_of_two(long e) {
  const Integer p = Integer(1) << static_cast<unsigned>(e < 0 ? -e : e);
  return e >= 0 ? Rational(p) : Rational(Integer(1), p);
}

/// Half an ulp of a regular x (0 for zero).
Rational half_ulp(mpfr_srcptr x) {
  if (mpfr_zero_p(x)) return Rational(0);
  return power_of_two(mpfr_get_exp(x) - static_cast<long>(mpfr_get_prec(x)) - 1);
}


/// The span of the exponents e_x + e_y of the nonzero products x_k y_k: the
/// sums are exact when it is at most max_span_bits.
struct Span {
  long top = 0, bottom = 0;
  bool any = false;
  void include(mpfr_srcptr x, mpfr_srcptr y) {
    if (mpfr_zero_p(x) || mpfr_zero_p(y)) return;
    const long e = mpfr_get_exp(x) + mpfr_get_exp(y);
    top = any ? std::max(top, e) : e;
    bottom = any ? std::min(bottom, e) : e;
    any = true;
  }
  bool exact() const { return !any || top - bottom <= detail::FixedPointSum::max_span_bits; }
};

/// The bound on what is dropped when the span is wider than max_span_bits.
Rational truncation_bound(long n, const Rational& largest) {
  return n * largest * power_of_two(-(detail::FixedPointSum::max_span_bits - 2));
}

/// q rounded to the precision of `like` in mode `rnd`, as a rational.
Rational rounded(const Rational& q, mpfr_srcptr like, mpfr_rnd_t rnd) {
  mpfr_t r;
  mpfr_init2(r, mpfr_get_prec(like));
  mpfr_set_q(r, q.backend().data(), rnd);
  const Rational out = exact(r);
  mpfr_clear(r);
  return out;
}

/// A random finite value at `bits` bits: zero, or a random significand at an
/// exponent offset from a small, medium or huge range.
void random_value(mpfr_ptr out, mpfr_prec_t bits) {
  mpfr_set_prec(out, bits);
  if (*rc::gen::inRange(0, 8) == 0) {
    mpfr_set_zero(out, *rc::gen::arbitrary<bool>() ? 1 : -1);
    return;
  }
  Integer m = *rc::gen::inRange<long>(1, std::numeric_limits<long>::max());
  m = m * (Integer(1) << 62) + *rc::gen::inRange<long>(0, std::numeric_limits<long>::max());
  mpfr_set_z(out, m.backend().data(), MPFR_RNDN);
  const long shift = *rc::gen::element<long>(0, 1, -1, 7, -30, 64, -64, 130, -200, 700, -5000, 5000, -9000, 9000);
  mpfr_mul_2si(out, out, shift - 124 + *rc::gen::inRange<long>(-3, 4), MPFR_RNDN);
  if (*rc::gen::arbitrary<bool>()) mpfr_neg(out, out, MPFR_RNDN);
}

mpfr_prec_t random_precision() { return *rc::gen::element<mpfr_prec_t>(24, 53, 64, 65, 128, 171, 300, 20000); }

}  // namespace

TEST_CASE("detail::dot [mpfr]") {
  rc::prop("the fixed-point MPFR dot is the correctly rounded sum (within the bound past max_span_bits)", [] {
    const auto n = *rc::gen::inRange(0, 40);
    const bool mixed = *rc::gen::arbitrary<bool>();
    const mpfr_prec_t common = random_precision();
    std::vector<Real> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(k);
      // Every third term may cancel an earlier one exactly.
      if (k > 0 && *rc::gen::inRange(0, 3) == 0) {
        const auto j = static_cast<std::size_t>(*rc::gen::inRange(0, k));
        mpfr_set_prec(x[i].backend().data(), mpfr_get_prec(x[j].backend().data()));
        mpfr_set_prec(y[i].backend().data(), mpfr_get_prec(y[j].backend().data()));
        mpfr_neg(x[i].backend().data(), x[j].backend().data(), MPFR_RNDN);
        mpfr_set(y[i].backend().data(), y[j].backend().data(), MPFR_RNDN);
        continue;
      }
      random_value(x[i].backend().data(), mixed ? random_precision() : common);
      random_value(y[i].backend().data(), mixed ? random_precision() : common);
    }
    Real out, term;
    mpfr_set_prec(out.backend().data(), mixed ? random_precision() : common);
    detail::DotWorkspace workspace;
    detail::dot(out.backend().data(), x.data(), y.data(), n, workspace, term.backend().data());

    Rational sum = 0, largest = 0;
    Span span;
    for (std::size_t k = 0; k < x.size(); ++k) {
      const Rational p = exact(x[k].backend().data()) * exact(y[k].backend().data());
      sum += p;
      largest = std::max(largest, Rational(abs(p)));
      span.include(x[k].backend().data(), y[k].backend().data());
    }
    RC_CLASSIFY(!span.exact(), "wide span");
    if (span.exact()) {
      RC_ASSERT(exact(out.backend().data()) == rounded(sum, out.backend().data(), MPFR_RNDN));
    } else {
      const Rational error = abs(exact(out.backend().data()) - sum);
      RC_ASSERT(error <= half_ulp(out.backend().data()) + truncation_bound(n, largest));
    }
  });

  SECTION("infinities and NaN get MPFR's own answers") {
    std::vector<Real> x(3), y(3);
    x[0] = 1;
    x[1] = std::numeric_limits<double>::infinity();
    x[2] = 2;
    y[0] = y[1] = y[2] = 1;
    Real out, term;
    detail::DotWorkspace workspace;
    detail::dot(out.backend().data(), x.data(), y.data(), 3, workspace, term.backend().data());
    CHECK(mpfr_inf_p(out.backend().data()));
    y[1] = 0;  // inf * 0 = NaN
    detail::dot(out.backend().data(), x.data(), y.data(), 3, workspace, term.backend().data());
    CHECK(mpfr_nan_p(out.backend().data()));
  }
  SECTION("an empty or all-zero dot is +0") {
    std::vector<Real> x(2), y(2);
    Real out = 5, term;
    detail::DotWorkspace workspace;
    detail::dot(out.backend().data(), x.data(), y.data(), 0, workspace, term.backend().data());
    CHECK(mpfr_zero_p(out.backend().data()));
    out = 5;
    detail::dot(out.backend().data(), x.data(), y.data(), 2, workspace, term.backend().data());
    CHECK(mpfr_zero_p(out.backend().data()));
    CHECK(!mpfr_signbit(out.backend().data()));
  }
  SECTION("exact cancellation of huge terms keeps a tiny one") {
    std::vector<Real> x(3), y(3);
    x[0] = Real("1e300");
    x[1] = -x[0];
    x[2] = Real("1e-300");
    y[0] = y[1] = y[2] = Real("3");
    Real out, term;
    detail::DotWorkspace workspace;
    detail::dot(out.backend().data(), x.data(), y.data(), 3, workspace, term.backend().data());
    CHECK(out == x[2] * 3);
  }
}

/// [lo, lo + width] at `bits` bits, width zero, tiny or large: sometimes across zero.
void random_interval(Interval& v, mpfr_prec_t bits) {
  Real lo, width;
  random_value(lo.backend().data(), bits);
  random_value(width.backend().data(), bits);
  mpfr_abs(width.backend().data(), width.backend().data(), MPFR_RNDN);
  if (*rc::gen::inRange(0, 3) == 0) mpfr_set_zero(width.backend().data(), 1);
  mpfi_set_prec(v.backend().data(), bits);
  mpfr_set(&v.backend().data()->left, lo.backend().data(), MPFR_RNDD);
  mpfr_add(&v.backend().data()->right, lo.backend().data(), width.backend().data(), MPFR_RNDU);
  if (mpfr_zero_p(&v.backend().data()->left)) mpfr_set_zero(&v.backend().data()->left, 1);
  if (mpfr_zero_p(&v.backend().data()->right)) mpfr_set_zero(&v.backend().data()->right, -1);
}

/// Adds the exact product [a] [b] to [low, high] and accounts for it.
void include_term(const Interval& x, const Interval& y, Rational& low, Rational& high, Rational& largest, Span& span,
                  bool& straddles_both) {
  mpfi_srcptr a = x.backend().data(), b = y.backend().data();
  const Rational al = exact(&a->left), ah = exact(&a->right), bl = exact(&b->left), bh = exact(&b->right);
  const Rational products[] = {al * bl, al * bh, ah * bl, ah * bh};
  low += *std::min_element(std::begin(products), std::end(products));
  high += *std::max_element(std::begin(products), std::end(products));
  for (const Rational& p : products) largest = std::max(largest, Rational(abs(p)));
  for (mpfr_srcptr u : {&a->left, &a->right})
    for (mpfr_srcptr v : {&b->left, &b->right}) span.include(u, v);
  straddles_both = straddles_both || (al < 0 && ah > 0 && bl < 0 && bh > 0);
}

/// out encloses [low, high]; when the sum was exact (no term straddling on both
/// sides, span within max_span_bits) it is [low, high] rounded outward.
void check_interval_entry(mpfi_srcptr r, const Rational& low, const Rational& high, const Rational& largest,
                          const Span& span, bool straddles_both, long n) {
  const Rational lower = exact(&r->left), upper = exact(&r->right);
  RC_ASSERT(lower <= low);
  RC_ASSERT(upper >= high);
  RC_ASSERT(!mpfr_signbit(&r->left) || !mpfr_zero_p(&r->left));  // MPFI's zero convention
  RC_ASSERT(mpfr_signbit(&r->right) || !mpfr_zero_p(&r->right));
  if (straddles_both) return;  // MPFI's loop answers, with its own rounding errors
  if (span.exact()) {
    RC_ASSERT(lower == rounded(low, &r->left, MPFR_RNDD));
    RC_ASSERT(upper == rounded(high, &r->right, MPFR_RNDU));
  } else {
    RC_ASSERT(low - lower <= 2 * half_ulp(&r->left) + truncation_bound(n, largest));
    RC_ASSERT(upper - high <= 2 * half_ulp(&r->right) + truncation_bound(n, largest));
  }
}

TEST_CASE("detail::dot [mpfi]") {
  rc::prop("the fixed-point MPFI dot is the exact interval dot product rounded outward", [] {
    const auto n = *rc::gen::inRange(0, 30);
    const mpfr_prec_t bits = random_precision();
    std::vector<Interval> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
    Rational low = 0, high = 0, largest = 0;
    Span span;
    bool straddles_both = false;
    for (std::size_t k = 0; k < x.size(); ++k) {
      for (Interval* v : {&x[k], &y[k]}) random_interval(*v, bits);
      include_term(x[k], y[k], low, high, largest, span, straddles_both);
    }
    Interval out, term;
    mpfi_set_prec(out.backend().data(), bits);
    detail::DotWorkspace workspace;
    detail::dot(out.backend().data(), x.data(), y.data(), n, workspace, term.backend().data());
    RC_CLASSIFY(straddles_both, "MPFI's loop");
    RC_CLASSIFY(!span.exact(), "wide span");
    check_interval_entry(out.backend().data(), low, high, largest, span, straddles_both, n);
  });

  rc::prop("dust below the span still rounds each end outward", [] {
    // One product exactly representable (x_0 times 1) plus products near
    // 2^-18000: past max_span_bits, so the dust is dropped, and each end must
    // still move outward past x_0 because of it. (Not at 20000 bits: there the
    // window reaches below the dust, and the exact sum is representable.)
    const mpfr_prec_t bits = *rc::gen::element<mpfr_prec_t>(24, 53, 64, 65, 128, 171, 300);
    const auto n = *rc::gen::inRange(2, 6);
    std::vector<Interval> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
    Rational low = 0, high = 0;
    Real v;
    for (std::size_t k = 0; k < x.size(); ++k) {
      for (Interval* w : {&x[k], &y[k]}) {
        random_value(v.backend().data(), bits);  // (no redraw loop: a shrinking generator may repeat 0 forever)
        if (mpfr_zero_p(v.backend().data())) mpfr_set_si(v.backend().data(), -3, MPFR_RNDN);
        mpfr_set_exp(v.backend().data(), k == 0 ? 1 : -9000);
        if (k == 0 && w == &y[0]) mpfr_set_ui(v.backend().data(), 1, MPFR_RNDN);
        mpfi_set_prec(w->backend().data(), bits);
        mpfi_set_fr(w->backend().data(), v.backend().data());
      }
      const Rational p = exact(&x[k].backend().data()->left) * exact(&y[k].backend().data()->left);
      low += p;
      high += p;
    }
    Interval out, term;
    mpfi_set_prec(out.backend().data(), bits);
    detail::DotWorkspace workspace;
    detail::dot(out.backend().data(), x.data(), y.data(), n, workspace, term.backend().data());
    RC_ASSERT(exact(&out.backend().data()->left) < low);
    RC_ASSERT(exact(&out.backend().data()->right) > high);
  });

  SECTION("an infinite endpoint gets MPFI's own answer") {
    std::vector<Interval> x(2), y(2);
    x[0] = 1;
    mpfr_set_inf(&x[1].backend().data()->right, 1);
    mpfr_set_ui(&x[1].backend().data()->left, 2, MPFR_RNDD);
    y[0] = y[1] = 3;
    Interval out, term;
    detail::DotWorkspace workspace;
    detail::dot(out.backend().data(), x.data(), y.data(), 2, workspace, term.backend().data());
    CHECK(mpfr_cmp_ui(&out.backend().data()->left, 9) == 0);
    CHECK(mpfr_inf_p(&out.backend().data()->right));
  }
}

/// A random product: A (r x n) and B (n x c, or c x n when `transposed`), filled
/// by fill(v, bits) at one precision for all (the packed path) or mixed ones (the
/// per-entry dot), and C = A B (or A B^T) at yet another output precision.
template <class T>
struct ProductCase {
  Matrix<T> A, B, C;
  bool transposed = false, mixed = false;
};

template <class T, class Fill>
ProductCase<T> gen_product_case(Fill fill) {
  const auto r = *rc::gen::inRange<Eigen::Index>(1, 5), n = *rc::gen::inRange<Eigen::Index>(0, 7),
             c = *rc::gen::inRange<Eigen::Index>(1, 5);
  ProductCase<T> p;
  p.transposed = *rc::gen::arbitrary<bool>();
  p.mixed = *rc::gen::inRange(0, 4) == 0;
  const mpfr_prec_t common = random_precision();
  p.A = Matrix<T>(r, n);
  p.B = p.transposed ? Matrix<T>(c, n) : Matrix<T>(n, c);
  for (Matrix<T>* M : {&p.A, &p.B})
    for (auto& v : M->reshaped()) fill(v, p.mixed ? random_precision() : common);
  PrecisionScope scope(static_cast<unsigned>(random_precision()));
  p.C = p.transposed ? multiply_transposed(p.A, p.B) : multiply(p.A, p.B);
  RC_ASSERT(p.C.rows() == r);
  RC_ASSERT(p.C.cols() == c);
  return p;
}

TEST_CASE("multiply [mpfr]: packed rows") {
  rc::prop("every entry of A B and A B^T is the correctly rounded exact sum (or within the bound)", [] {
    const auto [A, B, C, transposed, mixed] =
        gen_product_case<Real>([](Real& v, mpfr_prec_t bits) { random_value(v.backend().data(), bits); });
    const Eigen::Index r = C.rows(), c = C.cols(), n = A.cols();
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) {
        Rational sum = 0, largest = 0;
        Span span;
        for (Eigen::Index k = 0; k < n; ++k) {
          const Real& b = transposed ? B(j, k) : B(k, j);
          const Rational p = exact(A(i, k).backend().data()) * exact(b.backend().data());
          sum += p;
          largest = std::max(largest, Rational(abs(p)));
          span.include(A(i, k).backend().data(), b.backend().data());
        }
        mpfr_srcptr out = C(i, j).backend().data();
        if (span.exact())
          RC_ASSERT(exact(out) == rounded(sum, out, MPFR_RNDN));
        else
          RC_ASSERT(abs(exact(out) - sum) <= half_ulp(out) + truncation_bound(n, largest));
      }
  });
  SECTION("an infinity in a row gives MPFR's answer for that row only") {
    Matrix<Real> A(2, 2), B(2, 1);
    A << 1, 2, 3, 4;
    A(0, 1) = std::numeric_limits<double>::infinity();
    B << 5, 6;
    const Matrix<Real> C = multiply(A, B);
    CHECK(mpfr_inf_p(C(0, 0).backend().data()));
    CHECK(C(1, 0) == 39);
  }
}

TEST_CASE("multiply [mpfi]: packed rows") {
  rc::prop("every entry of A B and A B^T is the exact interval product rounded outward (or within the bound)", [] {
    // Intervals across zero in some rows of both sides send those pairs of rows
    // to the per-entry dot too.
    const auto [A, B, C, transposed, mixed] = gen_product_case<Interval>(random_interval);
    const Eigen::Index r = C.rows(), c = C.cols(), n = A.cols();
    bool any_straddle = false;
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) {
        Rational low = 0, high = 0, largest = 0;
        Span span;
        bool straddles_both = false;
        for (Eigen::Index k = 0; k < n; ++k)
          include_term(A(i, k), transposed ? B(j, k) : B(k, j), low, high, largest, span, straddles_both);
        any_straddle = any_straddle || straddles_both;
        check_interval_entry(C(i, j).backend().data(), low, high, largest, span, straddles_both, n);
      }
    RC_CLASSIFY(mixed, "mixed precisions");
    RC_CLASSIFY(any_straddle, "a term straddling on both sides");
  });
  SECTION("an infinite endpoint in a row gives MPFI's answer for that row only") {
    Matrix<Interval> A(2, 2), B(2, 1);
    A << 1, 2, 3, 4;
    mpfr_set_inf(&A(0, 1).backend().data()->right, 1);
    B << 5, 6;
    const Matrix<Interval> C = multiply(A, B);
    CHECK(mpfr_inf_p(&C(0, 0).backend().data()->right));
    CHECK(mpfr_cmp_ui(&C(0, 0).backend().data()->left, 17) == 0);
    CHECK(mpfr_cmp_ui(&C(1, 0).backend().data()->left, 39) == 0);
    CHECK(mpfr_cmp_ui(&C(1, 0).backend().data()->right, 39) == 0);
  }
}

TEST_CASE("multiply [mpfr, mpfi]: integer products are exact") {
  rc::prop("small-integer products are exact in both tiers, and an interval is the point", [] {
    const auto r = *rc::gen::inRange<Eigen::Index>(0, 6), k = *rc::gen::inRange<Eigen::Index>(0, 6),
               c = *rc::gen::inRange<Eigen::Index>(0, 6);
    const Matrix<Rational> A = test::gen_matrix(r, k), B = test::gen_matrix(k, c);
    Matrix<Rational> scaled_a = A, scaled_b = B;
    for (auto& v : scaled_a.reshaped()) v = Rational(numerator(v) * 1);  // integers: exact in binary
    for (auto& v : scaled_b.reshaped()) v = Rational(numerator(v) * 1);
    const Matrix<Rational> exact_product = scaled_a * scaled_b;
    const Matrix<Real> real = multiply(from_rational<Real>(scaled_a), from_rational<Real>(scaled_b));
    const Matrix<Interval> interval = multiply(from_rational<Interval>(scaled_a), from_rational<Interval>(scaled_b));
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) {
        RC_ASSERT(exact(real(i, j).backend().data()) == exact_product(i, j));
        RC_ASSERT(exact(&interval(i, j).backend().data()->left) == exact_product(i, j));
        RC_ASSERT(exact(&interval(i, j).backend().data()->right) == exact_product(i, j));
      }
  });
}

TEST_CASE("multiply [double]: small products on the calling thread, large ones by Eigen, the same product") {
  rc::prop("multiply and multiply_transposed agree with Eigen's product to rounding, on both sides of the threshold", [] {
    const auto rows = *rc::gen::element<Eigen::Index>(0, 1, 3, 7, 64, 130);
    const auto depth = *rc::gen::element<Eigen::Index>(0, 1, 5, 64, 200);
    const auto cols = *rc::gen::element<Eigen::Index>(0, 2, 8, 64, 300);
    std::mt19937 g(*rc::gen::arbitrary<std::uint32_t>());  // from RapidCheck's seed: replayable
    std::uniform_real_distribution<double> u(-1, 1);
    Eigen::MatrixXd A(rows, depth), B(depth, cols);
    for (Eigen::Index i = 0; i < A.size(); ++i) A.data()[i] = u(g);
    for (Eigen::Index i = 0; i < B.size(); ++i) B.data()[i] = u(g);
    const Eigen::MatrixXd expected = A * B;
    const Eigen::MatrixXd got = multiply(A, B), got_t = multiply_transposed(A, Eigen::MatrixXd(B.transpose()));
    RC_ASSERT(got.rows() == rows);
    RC_ASSERT(got.cols() == cols);
    RC_ASSERT(got_t.rows() == rows);
    RC_ASSERT(got_t.cols() == cols);
    // Any order of summation is within depth u |A| |B| of the exact product, so two
    // orders are within twice that of each other.
    const Eigen::MatrixXd tolerance = 2.0 * static_cast<double>(depth) * 0x1p-52 * (A.cwiseAbs() * B.cwiseAbs());
    RC_ASSERT(((got - expected).cwiseAbs().array() <= tolerance.array()).all());
    RC_ASSERT(((got_t - expected).cwiseAbs().array() <= tolerance.array()).all());
  });
}
