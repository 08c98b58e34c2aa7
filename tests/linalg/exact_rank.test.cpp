// attnrank/linalg/exact_rank.hpp: exact rank, determinant, echelon form and kernel.
// The oracles are independent of the code under test: Eigen's FullPivLU over the
// rationals (exact, since epsilon is 0), closed forms, and the laws of rank.
#include "rank_support.hpp"

#include <attnrank/linalg/detail/modular.hpp>  // PrimeSequence: the primes the modular path uses

#include <Eigen/LU>

using namespace attnrank;
using namespace attnrank::test;

namespace {

Eigen::Index oracle_rank(const Matrix<Rational>& A) {
  if (A.size() == 0) return 0;
  return Eigen::FullPivLU<Matrix<Rational>>(A).rank();
}

}  // namespace

TEST_CASE("attnrank::exact_rank") {
  SECTION("rank, proof and check on small known matrices") {
    Matrix<Rational> A(3, 3);
    A << 1, 2, 3, 4, 5, 6, 7, 8, 9;
    const ExactRank r = exact_rank(A);
    CHECK(r.rank == 2);
    CHECK(r.kernel.cols() == 1);
    CHECK(check_exact_rank(A, r));
    CHECK(exact_determinant(A) == 0);
  }
  SECTION("zero, empty, row and column matrices") {
    CHECK(exact_rank(Matrix<Rational>(Matrix<Rational>::Zero(4, 3))).rank == 0);
    CHECK(exact_rank(Matrix<Rational>(0, 0)).rank == 0);
    CHECK(exact_rank(Matrix<Rational>(0, 3)).kernel.cols() == 3);
    // Tall empty shapes: no row() or col() of null data (UBSan found the generator doing it).
    for (const auto& [m, n] : {std::pair<Eigen::Index, Eigen::Index>{8, 0}, {0, 8}, {9, 0}}) {
      const ExactRank e = exact_rank(Matrix<Rational>(m, n));
      CHECK(e.rank == 0);
      CHECK(e.kernel.rows() == n);
      CHECK(e.kernel.cols() == n);
      CHECK(exact_rank_by_elimination(Matrix<Rational>(m, n)).rank == 0);
    }
    Matrix<Rational> row(1, 5), col(5, 1);
    row << 0, 0, Rational(3, 7), 1, 0;
    col << 0, 0, 0, Rational(-1, 3), 0;
    CHECK(exact_rank(row).rank == 1);
    CHECK(exact_rank(col).rank == 1);
    CHECK(check_exact_rank(row, exact_rank(row)));
    CHECK(exact_determinant(Matrix<Rational>(0, 0)) == 1);
  }
  SECTION("decimals are rationals: the tutorial's diagonal target has rank 3 and det 0.49") {
    const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
    CHECK(exact_rank(A).rank == 3);
    CHECK(exact_determinant(A) == Rational(49, 100));
  }
  SECTION("unlucky primes: a matrix divisible by the first primes is still ranked exactly") {
    // Every entry a multiple of the first three primes the fast path tries: its
    // rank mod each of them is 0, so only the exact checks and the fallback
    // can give the right answer.
    detail::PrimeSequence primes;
    Integer m{1};
    for (int i = 0; i < 3; ++i) m *= primes.next();
    Matrix<Integer> B(4, 4);
    B << 1, 2, 3, 4, 2, 4, 6, 8, 0, 1, 0, 1, 5, 5, 5, 5;
    const Matrix<Integer> A = B * m;
    const ExactRank r = exact_rank(A);
    CHECK(r.rank == 3);
    CHECK(r.method == "bareiss");
    const Matrix<Integer> A2 = B * Integer(detail::PrimeSequence().next());
    const ExactRank r2 = exact_rank(A2);  // divisible by the first prime only
    CHECK(r2.rank == 3);
    CHECK(r2.method == "modular");
    CHECK(exact_determinant(A) == 0);
  }
  SECTION("entries beyond 2^52 take the fraction-free path and stay exact") {
    Matrix<Integer> A(3, 4);
    const Integer big = Integer(1) << 80;
    A << big, 1, 2, 3, big + 1, 2, 4, 6, 2 * big + 1, 3, 6, 9;
    const ExactRank r = exact_rank(A);
    CHECK(r.rank == 2);
    CHECK(check_exact_rank(A.unaryExpr([](const Integer& z) { return Rational(z); }), r));
  }
  SECTION("the fast path on larger rank-deficient integer matrices") {
    Matrix<Integer> X(40, 17), Y(17, 40);
    for (Eigen::Index i = 0; i < 40; ++i)
      for (Eigen::Index j = 0; j < 17; ++j) {
        X(i, j) = (i * 7 + j * 3) % 19 - 9 + (i == j);
        Y(j, i) = (i * 5 + j * 11) % 19 - 9;
      }
    const Matrix<Integer> A = X * Y;
    const ExactRank r = exact_rank(A);
    CHECK(r.method == "modular");
    CHECK(r.rank == oracle_rank(A.unaryExpr([](const Integer& z) { return Rational(z); })));
    CHECK(check_exact_rank(A.unaryExpr([](const Integer& z) { return Rational(z); }), r));
  }
  SECTION("a forged certificate is rejected") {
    Matrix<Rational> A(2, 2);
    A << 1, 2, 2, 4;
    ExactRank r = exact_rank(A);
    REQUIRE(check_exact_rank(A, r));
    r.kernel(0, 0) += 1;
    CHECK_FALSE(check_exact_rank(A, r));
    ExactRank claims_full = exact_rank(A);
    claims_full.rank = 2;
    CHECK_FALSE(check_exact_rank(A, claims_full));
  }
  SECTION("the determinant of a permutation matrix is its sign (row swaps counted)") {
    for (Eigen::Index n : {13, 20}) {
      Matrix<Integer> P = Matrix<Integer>::Zero(n, n);
      for (Eigen::Index i = 0; i < n; ++i) P(i, (i + 1) % n) = 1;  // one n-cycle: sign (-1)^(n-1)
      CHECK(exact_determinant(P) == (n % 2 ? 1 : -1));
      CHECK(exact_determinant_by_elimination(P) == (n % 2 ? 1 : -1));
    }
  }
  SECTION("a non-square determinant is an input error") {
    CHECK_THROWS_AS(exact_determinant(Matrix<Rational>(2, 3)), input_error);
  }
}

TEST_CASE("attnrank::exact_rank properties", "[property]") {
  rc::prop("the modular fast path, Bareiss and Eigen's exact LU agree on the rank", [] {
    const Matrix<Rational> A = gen_structured_rational_matrix();
    const ExactRank fast = exact_rank(A);
    const ExactRank slow = exact_rank_by_elimination(A);
    RC_ASSERT(fast.rank == slow.rank);
    RC_ASSERT(fast.rank == oracle_rank(A));
    RC_ASSERT(check_exact_rank(A, fast));
    RC_ASSERT(check_exact_rank(A, slow));
  });
  rc::prop("the multimodular determinant equals Bareiss's", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(0, 30);
    Matrix<Integer> A = gen_integer_matrix(n, n, *rc::gen::inRange(1, 1000000));
    // Mostly zeros below some diagonals: zero pivots force row swaps, whose sign
    // the determinant must track.
    if (*rc::gen::arbitrary<bool>())
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j)
          if ((i * 7 + j * 3) % 4 != 0) A(i, j) = 0;
    RC_ASSERT(exact_determinant(A) == exact_determinant_by_elimination(A));
  });
  rc::prop("det(A B) = det(A) det(B) exactly", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(0, 7);
    const Matrix<Rational> A = gen_matrix(n, n), B = gen_matrix(n, n);
    RC_ASSERT(exact_determinant(Matrix<Rational>(A * B)) == exact_determinant(A) * exact_determinant(B));
  });
  // proofs/Ceiling.v, rank_mul_le_inner.
  rc::prop("rank(X Y) <= inner dimension, with equality when both factors have full rank (Eq. 2-5)", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 9), d = *rc::gen::inRange<Eigen::Index>(1, 9),
               n = *rc::gen::inRange<Eigen::Index>(1, 9);
    const Matrix<Rational> X = gen_matrix(m, d), Y = gen_matrix(d, n);
    const Eigen::Index r = exact_rank(Matrix<Rational>(X * Y)).rank;
    RC_ASSERT(r <= d);
    if (oracle_rank(X) == d && oracle_rank(Y) == d) RC_ASSERT(r == d);
  });
  // proofs/Subadditivity.v, rank_subadditive.
  rc::prop("rank(X + Y) <= rank X + rank Y (Eq. 2-8)", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 8), n = *rc::gen::inRange<Eigen::Index>(1, 8);
    const Matrix<Rational> X = gen_low_rank(m, n), Y = gen_low_rank(m, n);
    RC_ASSERT(exact_rank(Matrix<Rational>(X + Y)).rank <= exact_rank(X).rank + exact_rank(Y).rank);
  });
  // proofs/Subadditivity.v, rank_row_constant_le1.
  rc::prop("rank(c 1^T) <= 1, with equality iff c != 0", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 10);
    const Matrix<Rational> c = gen_matrix(n, 1);
    const Matrix<Rational> C = c * Matrix<Rational>::Ones(1, n);
    RC_ASSERT(exact_rank(C).rank == (is_zero(c) ? 0 : 1));
  });
  // proofs/Subadditivity.v, seed_floor_sub.
  rc::prop("rank(L + c 1^T) >= rank(L) - 1 (the tutorial's floor, Step B)", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 10);
    const Matrix<Rational> L = *rc::gen::arbitrary<bool>() ? gen_low_rank(n, n) : gen_matrix(n, n);
    const Matrix<Rational> c = gen_matrix(n, 1);
    const Matrix<Rational> S = L + c * Matrix<Rational>::Ones(1, n);
    RC_ASSERT(exact_rank(S).rank + 1 >= exact_rank(L).rank);
  });
  // proofs/ExactFloor.v, exact_floor_le and exact_floor_attained.
  rc::prop("rank(L + c 1^T) >= rank(L C), with equality at c = -L 1 / n (the exact floor)", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 10);
    const Matrix<Rational> L = *rc::gen::arbitrary<bool>() ? gen_low_rank(n, n) : gen_matrix(n, n);
    const Matrix<Rational> C = Matrix<Rational>::Identity(n, n) - Matrix<Rational>::Constant(n, n, Rational(1, n));
    const Eigen::Index floor = exact_rank(Matrix<Rational>(L * C)).rank;
    const Matrix<Rational> ones = Matrix<Rational>::Ones(1, n);
    const Matrix<Rational> c = gen_matrix(n, 1);
    RC_ASSERT(exact_rank(Matrix<Rational>(L + c * ones)).rank >= floor);
    const Matrix<Rational> c_star = -(L * Matrix<Rational>::Ones(n, 1)) / Rational(n);
    RC_ASSERT(exact_rank(Matrix<Rational>(L + c_star * ones)).rank == floor);
  });
  rc::prop("a matrix built as X Y with independent full-rank factors has exactly their rank", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 25), n = *rc::gen::inRange<Eigen::Index>(1, 25);
    const auto r = *rc::gen::inRange<Eigen::Index>(0, std::min(m, n) + 1);
    const Matrix<Integer> X = gen_integer_matrix(m, r, 9), Y = gen_integer_matrix(r, n, 9);
    const auto q = [](const Matrix<Integer>& Z) { return Matrix<Rational>(Z.unaryExpr([](const Integer& z) { return Rational(z); })); };
    RC_PRE(oracle_rank(q(X)) == r && oracle_rank(q(Y)) == r);
    const ExactRank res = exact_rank(Matrix<Integer>(X * Y));
    RC_ASSERT(res.rank == r);
    RC_ASSERT(check_exact_rank(q(X * Y), res));
  });
  // proofs/DiagonalTarget.v, det_aI_bJ and rank_aI_bJ_full.
  rc::prop("det(a I + b J) = a^(n-1) (a + n b), and the rank follows the eigenvalues", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(0, 16);
    const Rational a = *gen_rational(), b = *rc::gen::oneOf(gen_rational(), rc::gen::just(n ? Rational(-a / n) : Rational(1)));
    const Matrix<Rational> M = scaled_identity_plus_ones(a, b, n);
    RC_ASSERT(exact_determinant(M) == det_scaled_identity_plus_ones(a, b, n));
    RC_ASSERT(exact_rank(M).rank == rank_scaled_identity_plus_ones(a, b, n));
  });
  rc::prop("the reduced row echelon form has unit pivots, clean pivot columns and the same kernel", [] {
    const Matrix<Rational> A = gen_structured_rational_matrix();
    const RowEchelonForm e = exact_reduced_row_echelon(A);
    const auto r = static_cast<Eigen::Index>(e.pivot_cols.size());
    RC_ASSERT(r == oracle_rank(A));
    for (Eigen::Index t = 0; t < r; ++t)
      for (Eigen::Index i = 0; i < A.rows(); ++i)
        RC_ASSERT(e.R(i, e.pivot_cols[static_cast<std::size_t>(t)]) == (i == t ? 1 : 0));
    for (Eigen::Index t = 1; t < r; ++t) RC_ASSERT(e.pivot_cols[static_cast<std::size_t>(t - 1)] < e.pivot_cols[static_cast<std::size_t>(t)]);
    RC_ASSERT(is_zero(e.R.bottomRows(A.rows() - r)));
    const Matrix<Rational> K = exact_kernel_basis(A);
    RC_ASSERT(K.cols() == A.cols() - r);
    RC_ASSERT(is_zero(Matrix<Rational>(A * K)));
    RC_ASSERT(oracle_rank(K) == K.cols());
    // Same row space: stacking R on A adds no rank.
    Matrix<Rational> both(2 * A.rows(), A.cols());
    both << A, e.R;
    RC_ASSERT(oracle_rank(both) == r);
  });
}
