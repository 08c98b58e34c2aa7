// attnrank/linalg/accurate_product.hpp, and the two-stage determinant and rank
// tests built on it. Exact rationals are the oracle: every enclosure is checked
// against the exact product, determinant or rank of the same data.
#include "rank_support.hpp"

#include <attnrank/linalg/accurate_product.hpp>
#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/linalg/exact_rank.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// A double with a full random 53-bit significand, 2^e <= |x| < 2^(e+1).
double gen_full_double(int e) {
  const auto bits = *rc::gen::arbitrary<std::uint64_t>();
  const double significand = 1.0 + static_cast<double>(bits >> 12) * 0x1p-52;
  return ((bits & 1) ? -1.0 : 1.0) * std::ldexp(significand, e);
}

/// Full-precision doubles on one scale (anywhere in [2^-360, 2^360], inside the product's range), spread over
/// 2^60 within each matrix, with some zeros and some zero rows and columns.
Eigen::MatrixXd gen_full_matrix(Eigen::Index r, Eigen::Index c) {
  const int scale = *rc::gen::element(0, 0, 0, -360, 360, 17, -200);
  Eigen::MatrixXd m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j)
      m(i, j) = *rc::gen::inRange(0, 8) == 0 ? 0.0 : gen_full_double(scale + *rc::gen::inRange(-30, 31));
  if (*rc::gen::inRange(0, 6) == 0) m.row(*rc::gen::inRange<Eigen::Index>(0, r)).setZero();
  if (*rc::gen::inRange(0, 6) == 0) m.col(*rc::gen::inRange<Eigen::Index>(0, c)).setZero();
  return m;
}

Integer power(int base, int exponent) {
  Integer p = 1;
  for (int i = 0; i < exponent; ++i) p *= base;
  return p;
}

/// hi + lo + t rad, exactly.
Matrix<Rational> point_in(const DoubleDoubleBall& X, int t_quarters) {
  Matrix<Rational> out(X.hi.rows(), X.hi.cols());
  for (Eigen::Index i = 0; i < X.hi.rows(); ++i)
    for (Eigen::Index j = 0; j < X.hi.cols(); ++j)
      out(i, j) = to_rational(X.hi(i, j)) + to_rational(X.lo(i, j)) +
                  Rational(t_quarters, 4) * to_rational(X.rad(i, j));
  return out;
}

/// Every entry of `exact` lies in hi + lo +- rad.
void assert_contains(const DoubleDoubleBall& b, const Matrix<Rational>& exact) {
  RC_ASSERT(b.hi.rows() == exact.rows());
  RC_ASSERT(b.hi.cols() == exact.cols());
  for (Eigen::Index i = 0; i < exact.rows(); ++i)
    for (Eigen::Index j = 0; j < exact.cols(); ++j) {
      const Rational miss = exact(i, j) - to_rational(b.hi(i, j)) - to_rational(b.lo(i, j));
      RC_ASSERT(abs(miss) <= to_rational(b.rad(i, j)));
    }
}

/// The slice width the product uses for inner dimension k (the header's beta).
int slice_bits(Eigen::Index k) {
  int log2k = 0;
  while ((Eigen::Index{1} << log2k) < k) ++log2k;
  return (53 - log2k) / 2;
}

/// Row i of A times column j of B in the worst case, as the accuracy is stated:
/// k max|A(i, :)| max|B(:, j)|.
double scale_of(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B, Eigen::Index i, Eigen::Index j) {
  return static_cast<double>(A.cols()) * A.row(i).cwiseAbs().maxCoeff() * B.col(j).cwiseAbs().maxCoeff();
}

/// An exactly singular integer matrix of rank n - 1 (its last column minus the
/// sum of the others), every entry then moved by a random 17th decimal: det is tiny and not
/// zero, and the condition number is about 1e17, past one double stage.
Matrix<Rational> gen_nearly_singular_decimals(Eigen::Index n) {
  Matrix<Rational> A(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    Rational sum = 0;
    for (Eigen::Index j = 0; j + 1 < n; ++j) {
      A(i, j) = *rc::gen::inRange(-9, 10);
      sum += A(i, j);
    }
    A(i, n - 1) = -sum;
  }
  RC_PRE(exact_rank(A).rank == n - 1);  // nearly singular by the perturbation alone, not more
  const Rational tiny = Rational(1, Integer("100000000000000000"));
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) A(i, j) += tiny * *rc::gen::inRange(-99, 100);
  return A;
}

}  // namespace

TEST_CASE("attnrank::accurate_product", "[property]") {
  rc::prop("the ball contains the exact product, at double-double accuracy", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 7), k = *rc::gen::inRange<Eigen::Index>(1, 40),
               n = *rc::gen::inRange<Eigen::Index>(1, 7);
    const Eigen::MatrixXd A = gen_full_matrix(m, k), B = gen_full_matrix(k, n);
    const auto b = accurate_product(A, B);
    RC_ASSERT(b.has_value());
    assert_contains(*b, exact_of(A) * exact_of(B));
    // Accuracy: the rest terms are ~2^-(2 beta) of the scale, enclosed to ~k u of that.
    const double relative = std::ldexp(4.0 * static_cast<double>(k), -2 * slice_bits(k) - 52);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) RC_ASSERT(b->rad(i, j) <= relative * scale_of(A, B, i, j) + 0x1p-1000);
  });
  rc::prop("cancellation: A times its double inverse is enclosed far below double precision", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 12);
    Eigen::MatrixXd A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = gen_full_double(*rc::gen::inRange(-3, 4));
    const Eigen::MatrixXd R = A.inverse();
    RC_PRE(R.allFinite());
    const auto b = accurate_product(A, R);
    RC_ASSERT(b.has_value());
    assert_contains(*b, exact_of(A) * exact_of(R));
    RC_ASSERT(b->rad.maxCoeff() <= 1e-25 * (A.cwiseAbs() * R.cwiseAbs()).maxCoeff());
  });
  rc::prop("a double-double ball operand: every matrix in the ball, on either side", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 6), k = *rc::gen::inRange<Eigen::Index>(1, 20);
    const Eigen::MatrixXd A = gen_full_matrix(m, k), B = gen_full_matrix(m, k);
    // A ball whose lo is ~2^-60 of hi and whose radius is ~2^-100 of it (dyadic, so
    // hi + lo + t rad is exact for the quarters t below).
    DoubleDoubleBall X{gen_full_matrix(k, m), Eigen::MatrixXd(k, m), Eigen::MatrixXd(k, m)};
    for (Eigen::Index i = 0; i < k; ++i)
      for (Eigen::Index j = 0; j < m; ++j) {
        X.lo(i, j) = std::ldexp(X.hi(i, j), -60) * *rc::gen::inRange(-3, 4);
        X.rad(i, j) = std::ldexp(std::fabs(X.hi(i, j)), -100) * *rc::gen::inRange(0, 4);
      }
    const auto left = accurate_product(A, X);
    const auto right = accurate_product(X, B);
    RC_ASSERT(left.has_value());
    RC_ASSERT(right.has_value());
    for (int t : {-4, -1, 0, 3, 4}) {
      const Matrix<Rational> x = point_in(X, t);
      assert_contains(*left, exact_of(A) * x);
      assert_contains(*right, x * exact_of(B));
    }
  });
  rc::prop("to_ball keeps every member of the double-double ball", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 5);
    DoubleDoubleBall X{gen_full_matrix(n, n), gen_full_matrix(n, n), Eigen::MatrixXd(n, n)};
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) X.rad(i, j) = std::ldexp(1.0, *rc::gen::inRange(-400, 0));
    const BallMatrix b = to_ball(X);
    for (int t : {-4, 0, 4}) {
      const Matrix<Rational> x = point_in(X, t);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j)
          RC_ASSERT(abs(x(i, j) - to_rational(b.mid(i, j))) <= to_rational(b.rad(i, j)));
    }
  });
}

TEST_CASE("attnrank::accurate_product: out of its range, nothing; empty, zero") {
  Eigen::MatrixXd A = Eigen::MatrixXd::Identity(3, 3), B = Eigen::MatrixXd::Ones(3, 3);
  REQUIRE(accurate_product(A, B).has_value());
  A(1, 2) = std::ldexp(1.0, 500);  // a row scale beyond 2^400
  CHECK_FALSE(accurate_product(A, B).has_value());
  A.row(1).setZero();
  A(1, 2) = std::ldexp(1.0, -500);  // a row whose largest entry is below 2^-400
  CHECK_FALSE(accurate_product(A, B).has_value());
  A(1, 2) = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(accurate_product(A, B).has_value());
  A(1, 2) = 0;
  B(2, 0) = std::numeric_limits<double>::infinity();
  CHECK_FALSE(accurate_product(A, B).has_value());
  CHECK(std::fegetround() == FE_TONEAREST);
  CHECK_THROWS_AS(accurate_product(Eigen::MatrixXd(2, 3), Eigen::MatrixXd(2, 3)), std::invalid_argument);
  CHECK_THROWS_AS(accurate_product(Eigen::MatrixXd(2, 2),
                                   DoubleDoubleBall{Eigen::MatrixXd(2, 2), Eigen::MatrixXd(2, 1), Eigen::MatrixXd(2, 2)}),
                  std::invalid_argument);
  // An empty inner dimension: the zero matrix, exactly.
  const auto empty = accurate_product(Eigen::MatrixXd(2, 0), Eigen::MatrixXd(0, 3));
  REQUIRE(empty.has_value());
  CHECK(empty->hi.isZero());
  CHECK(empty->lo.isZero());
  CHECK(empty->rad.isZero());
}

TEST_CASE("attnrank::to_double_double_ball", "[property]") {
  rc::prop("decimals and fractions: q in hi + lo +- rad, rad about 2^-106 |q|", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 5);
    Matrix<Rational> Q(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        std::string digits = std::to_string(*rc::gen::inRange(1, 1000000000)) +
                             std::to_string(*rc::gen::inRange(100000000, 1000000000));
        const Integer num((*rc::gen::arbitrary<bool>() ? "-" : "") + digits);
        switch (*rc::gen::inRange(0, 4)) {
          case 0: Q(i, j) = Rational(num, power(10, *rc::gen::inRange(0, 40))); break;
          case 1: Q(i, j) = Rational(num) * power(10, *rc::gen::inRange(0, 200)); break;
          case 2: Q(i, j) = Rational(*rc::gen::inRange(-1000, 1000), *rc::gen::inRange(1, 1000)); break;
          default: Q(i, j) = to_rational(gen_full_double(*rc::gen::inRange(-600, 600)));
        }
      }
    const auto b = to_double_double_ball(Q);
    RC_ASSERT(b.has_value());
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        const Rational miss = Q(i, j) - to_rational(b->hi(i, j)) - to_rational(b->lo(i, j));
        RC_ASSERT(abs(miss) <= to_rational(b->rad(i, j)));
        RC_ASSERT(to_rational(b->rad(i, j)) <= abs(Q(i, j)) * to_rational(0x1p-100));
      }
  });
  rc::prop("fractions of 64-bit integers (the path without MPFR): enclosed, tight, exact when hi + lo is q", [] {
    // Numerators and denominators at every bit length up to 64, powers of two and
    // their neighbours, and doubles themselves (whose balls must have radius 0).
    const auto gen_u64 = [] {
      const int bits = *rc::gen::inRange(1, 65);
      const std::uint64_t top = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
      switch (*rc::gen::inRange(0, 3)) {
        case 0: return std::uint64_t{1} << (bits - 1);
        case 1: return top;
        default: return (*rc::gen::arbitrary<std::uint64_t>() & top) | (std::uint64_t{1} << (bits - 1));
      }
    };
    const auto big = [](std::uint64_t v) {
      Integer z;
      mpz_import(z.backend().data(), 1, 1, sizeof v, 0, 0, &v);
      return z;
    };
    Matrix<Rational> Q(1, 3);
    const Integer num = big(gen_u64()), den = big(gen_u64());
    Q(0, 0) = Rational(*rc::gen::arbitrary<bool>() ? Integer(-num) : num, den);
    Q(0, 1) = Rational(big(gen_u64() >> 11), Integer(1) << *rc::gen::inRange(0, 64));  // a double
    Q(0, 2) = Rational(big(gen_u64()));                                                 // an integer
    const auto b = to_double_double_ball(Q);
    RC_ASSERT(b.has_value());
    for (Eigen::Index j = 0; j < 3; ++j) {
      const Rational q = Q(0, j);
      const Rational miss = q - to_rational(b->hi(0, j)) - to_rational(b->lo(0, j));
      RC_ASSERT(abs(miss) <= to_rational(b->rad(0, j)));
      RC_ASSERT(to_rational(b->rad(0, j)) <= abs(q) * to_rational(0x1p-100));
      RC_ASSERT(std::fabs(b->lo(0, j)) <= 0.5 * (std::nextafter(std::fabs(b->hi(0, j)), INFINITY) - std::fabs(b->hi(0, j))));
      if (miss == 0 && j > 0) RC_ASSERT(b->rad(0, j) == 0);  // doubles and integers below 2^64 are pairs exactly
    }
    RC_ASSERT(b->rad(0, 1) == 0);
  });
  SECTION("beyond the range it keeps normal: nothing") {
    Matrix<Rational> Q(1, 1);
    Q(0, 0) = Rational(power(2, 1100));
    CHECK_FALSE(to_double_double_ball(Q).has_value());
    Q(0, 0) = Rational(Integer(1), power(2, 800));
    CHECK_FALSE(to_double_double_ball(Q).has_value());
  }
}

TEST_CASE("attnrank::certified_determinant: two stages past one double stage") {
  SECTION("Hilbert 13 to 15 (condition numbers 5e17 to 1.5e21) at 53 bits: narrow, around the exact value") {
    for (Eigen::Index n : {13, 14, 15}) {
      const Matrix<Rational> H = hilbert(n);
      const CertifiedDeterminant d = certified_determinant(H);
      INFO("n = " << n << ", eps " << d.eps);
      REQUIRE(d.preconditioned);
      CHECK(d.method == "double-double");
      CHECK(d.bits == 106);
      CHECK(scalar_traits<Interval>::contains(d.det, exact_determinant(H)));
      const Real width = upper_bound(d.det) - lower_bound(d.det);
      CHECK(width / abs(upper_bound(d.det)) < 1e-8);
    }
  }
  SECTION("a matrix of doubles too ill-conditioned for one stage") {
    // The double nearest Hilbert 14: its own determinant, not Hilbert's.
    const Eigen::MatrixXd D = hilbert(14).unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
    const CertifiedDeterminant d = certified_determinant(D);
    REQUIRE(d.preconditioned);
    CHECK(d.method == "double-double");
    CHECK(scalar_traits<Interval>::contains(d.det, exact_determinant(exact_of(D))));
  }
  SECTION("singular: still Hadamard's bound around 0, and the further test's residual is reported") {
    Matrix<Rational> A(3, 3);
    A << 1, 2, 3, 4, 5, 6, 7, 8, 9;
    const CertifiedDeterminant d = certified_determinant(A);
    CHECK_FALSE(d.preconditioned);
    CHECK(scalar_traits<Interval>::contains(d.det, Rational(0)));
  }
}

TEST_CASE("attnrank::certified_determinant two stages, properties", "[property]") {
  rc::prop("nearly singular 17-digit decimals: the enclosure contains the exact determinant", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 24);
    const Matrix<Rational> A = gen_nearly_singular_decimals(n);
    const CertifiedDeterminant d = certified_determinant(A);
    const Rational exact = exact_determinant(A);
    RC_ASSERT(scalar_traits<Interval>::contains(d.det, exact));
    RC_PRE(exact != 0);
    // Past one double stage, and within reach of two: the decimals' own determinant.
    RC_ASSERT(d.preconditioned);
    RC_ASSERT(!scalar_traits<Interval>::contains(d.det, Rational(0)));
  });
  rc::prop("the rank of the same matrices is proven full", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 24);
    const Matrix<Rational> A = gen_nearly_singular_decimals(n);
    RC_PRE(exact_determinant(A) != 0);
    const CertifiedRank r = certified_rank(A);
    RC_ASSERT(r.lower == n);
    RC_ASSERT(r.residual_bound < 1);
  });
  rc::prop("an exactly singular matrix is never proven nonsingular", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 24);
    Matrix<Rational> A = gen_nearly_singular_decimals(n);
    for (Eigen::Index i = 0; i < n; ++i) {  // undo the perturbation of the last column: rows sum to 0
      Rational sum = 0;
      for (Eigen::Index j = 0; j + 1 < n; ++j) sum += A(i, j);
      A(i, n - 1) = -sum;
    }
    RC_ASSERT(exact_determinant(A) == 0);
    const CertifiedDeterminant d = certified_determinant(A);
    RC_ASSERT(scalar_traits<Interval>::contains(d.det, Rational(0)));
    RC_ASSERT(certified_rank(A).lower < n);
  });
}
