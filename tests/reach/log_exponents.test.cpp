// Tests for attnrank/reach/log_exponents.hpp: the coprime base and the exact
// exponent matrices behind the exact upper bound on the floor. The oracle is
// exact arithmetic: prod_t q_t^(E_t)_ij rebuilds every entry of A. The masked
// variants (decompose_log_where, and certified_log_bounds_where of
// reach/centered_log.hpp) against the copy with the uncounted entries set to 1.
#include "support.hpp"

#include <attnrank/reach/centered_log.hpp>
#include <attnrank/reach/log_exponents.hpp>

#include <numeric>

using namespace attnrank;

namespace {

/// prod_t bases[t]^e[t] as an exact rational (negative exponents divide).
Rational power_product(const std::vector<Integer>& bases, const std::vector<long>& e) {
  Rational r = 1;
  for (std::size_t t = 0; t < bases.size(); ++t)
    for (long k = 0; k < std::labs(e[t]); ++k) r = e[t] > 0 ? Rational(r * bases[t]) : Rational(r / bases[t]);
  return r;
}

/// Products of a few small primes and composites, so values share factors.
Integer gen_smooth() {
  Integer x = 1;
  const auto k = *rc::gen::inRange(0, 4);
  for (int t = 0; t < k; ++t) x *= *rc::gen::element(2, 3, 4, 6, 9, 10, 12, 35, 49, 97);
  return x;
}

}  // namespace

TEST_CASE("attnrank::detail::coprime_base") {
  rc::prop("the base is sorted, pairwise coprime, above 1, and every value is a product of its powers", [] {
    const auto m = *rc::gen::inRange(0, 8);
    std::vector<Integer> values;
    for (int t = 0; t < m; ++t) values.push_back(gen_smooth());
    const std::vector<Integer> base = detail::coprime_base(values, 512);
    RC_ASSERT(std::is_sorted(base.begin(), base.end()));
    for (std::size_t s = 0; s < base.size(); ++s) {
      RC_ASSERT(base[s] > 1);
      for (std::size_t t = s + 1; t < base.size(); ++t) RC_ASSERT(gcd(base[s], base[t]) == 1);
    }
    for (const Integer& v : values) {
      const auto e = exponents_over(v, base);
      RC_ASSERT(e.has_value());
      RC_ASSERT(power_product(base, *e) == Rational(v));
    }
  });
  SECTION("a base past the limit is refused (empty), not truncated") {
    CHECK(detail::coprime_base({2, 3, 5, 7}, 3).empty());
    CHECK(detail::coprime_base({12, 18}, 3) == std::vector<Integer>{2, 3});
  }
}

TEST_CASE("attnrank::exponents_over") {
  CHECK(exponents_over(72, {2, 3}) == std::vector<long>{3, 2});
  CHECK(exponents_over(1, {2, 3}) == std::vector<long>{0, 0});
  CHECK_FALSE(exponents_over(10, {2, 3}).has_value());  // 5 is outside the base
  CHECK_FALSE(exponents_over(0, {2}).has_value());
  CHECK_FALSE(exponents_over(-4, {2}).has_value());
  CHECK_FALSE(exponents_over(4, {1}).has_value());  // 1 is no base
}

TEST_CASE("attnrank::decompose_log and stacked_centered_exponents") {
  rc::prop("the exponent matrices rebuild A exactly, and the stack is n E_t C", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 5);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(gen_smooth(), gen_smooth());
    const auto d = decompose_log(A);
    RC_ASSERT(d.has_value());
    RC_ASSERT(d->exponents.size() == d->bases.size());
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        std::vector<long> e;
        for (const Matrix<Integer>& E : d->exponents) e.push_back(E(i, j).convert_to<long>());
        RC_ASSERT(power_product(d->bases, e) == A(i, j));
      }
    const Matrix<Integer> S = stacked_centered_exponents(*d);
    RC_ASSERT(S.rows() == static_cast<Eigen::Index>(d->bases.size()) * n);
    const Matrix<Integer> nC = Matrix<Integer>::Identity(n, n) * Integer(n) - Matrix<Integer>::Constant(n, n, Integer(1));
    for (std::size_t t = 0; t < d->exponents.size(); ++t) {
      const Matrix<Integer> expected = d->exponents[t] * nC;
      RC_ASSERT(S.middleRows(static_cast<Eigen::Index>(t) * n, n) == expected);
    }
  });
  SECTION("a constant target has no bases: log A = 0") {
    const auto d = decompose_log(Matrix<Rational>::Constant(3, 3, Rational(1)));
    REQUIRE(d.has_value());
    CHECK(d->bases.empty());
    CHECK(stacked_centered_exponents(*d).rows() == 0);
  }
  SECTION("a non-positive entry is an input error naming it; limits give no decomposition") {
    Matrix<Rational> A = Matrix<Rational>::Constant(2, 2, Rational(1, 2));
    A(1, 0) = 0;
    CHECK_THROWS_WITH(decompose_log(A), Catch::Contains("[1, 0] (0-based)"));
    A(1, 0) = Rational(Integer(1) << 5000, 3);
    CHECK_FALSE(decompose_log(A).has_value());  // a numerator of 5001 bits > max_bits
    Matrix<Rational> two_primes(1, 2);
    two_primes << Rational(2), Rational(3);
    CHECK(decompose_log(two_primes, {4096, 4096, 2}).has_value());
    CHECK_FALSE(decompose_log(two_primes, {4096, 4096, 1}).has_value());  // two bases > max_bases
    CHECK_FALSE(decompose_log(two_primes, {1, 4096, 512}).has_value());   // two distinct values > 1
  }
}

TEST_CASE("attnrank::decompose_log_where and certified_log_bounds_where") {
  rc::prop("uncounted entries (zeros among them) act as 1: the same as on a copy with 1 there, A untouched", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 6);
    Matrix<Rational> A(n, n), ones_off(n, n);
    std::vector<std::vector<bool>> counted(static_cast<std::size_t>(n), std::vector<bool>(static_cast<std::size_t>(n)));
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        const bool c = *rc::gen::arbitrary<bool>();
        counted[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = c;
        // An uncounted entry may be 0 (a masked position), which the copy cannot hold.
        A(i, j) = c || *rc::gen::arbitrary<bool>() ? Rational(gen_smooth(), gen_smooth()) : Rational(0);
        ones_off(i, j) = c ? A(i, j) : Rational(1);
      }
    const Matrix<Rational> before = A;
    const auto where = [&](Eigen::Index i, Eigen::Index j) {
      return static_cast<bool>(counted[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
    };
    const auto d = decompose_log_where(A, DecompositionLimits{}, where);
    const auto e = decompose_log(ones_off);
    RC_ASSERT(d.has_value() == e.has_value());
    RC_ASSERT(d->bases == e->bases);
    for (std::size_t t = 0; t < d->exponents.size(); ++t) RC_ASSERT(d->exponents[t] == e->exponents[t]);
    const BoundsMatrix L = certified_log_bounds_where(A, where);
    const BoundsMatrix M = certified_log_bounds(ones_off);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        if (where(i, j)) {
          RC_ASSERT(L.lo(i, j) == M.lo(i, j));
          RC_ASSERT(L.hi(i, j) == M.hi(i, j));
        } else {
          RC_ASSERT(L.lo(i, j) == 0.0);  // log 1, exactly
          RC_ASSERT(L.hi(i, j) == 0.0);
        }
      }
    RC_ASSERT(A == before);
  });
  SECTION("a counted non-positive entry is still an input error naming it") {
    Matrix<Rational> A = Matrix<Rational>::Constant(2, 2, Rational(1, 2));
    A(0, 1) = 0;
    CHECK(decompose_log_where(A, DecompositionLimits{}, [](Eigen::Index i, Eigen::Index j) { return i != 0 || j != 1; })
              .has_value());
    CHECK_THROWS_WITH(decompose_log_where(A, DecompositionLimits{}, [](Eigen::Index, Eigen::Index) { return true; }),
                      Catch::Contains("[0, 1] (0-based)"));
  }
}
