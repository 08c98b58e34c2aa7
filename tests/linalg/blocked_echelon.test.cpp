// attnrank/linalg/detail/blocked_echelon.hpp: the blocked elimination mod p makes
// exactly the unblocked one's choices (the oracle: echelon_mod_unblocked, one
// reduction per entry and pivot), on matrices large enough to be blocked and
// built to hit every branch: small primes (many zero pivots), zero and repeated
// columns, low rank, wide and tall shapes.
#include "rank_support.hpp"

#include <attnrank/linalg/detail/blocked_echelon.hpp>

#include <random>

using namespace attnrank;
using namespace attnrank::detail;

namespace {

/// A rows x cols integer matrix of the given kind from a seeded generator.
Matrix<Integer> structured_matrix(Eigen::Index rows, Eigen::Index cols, int kind, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> small(-9, 9);
  Matrix<Integer> A(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) A(i, j) = small(g);
  switch (kind) {
    case 1: {  // low rank: a product through an inner dimension below both sides
      const Eigen::Index inner = std::uniform_int_distribution<Eigen::Index>(1, std::min(rows, cols) - 1)(g);
      Matrix<Integer> X(rows, inner), Y(inner, cols);
      for (Eigen::Index i = 0; i < X.size(); ++i) X(i) = small(g);
      for (Eigen::Index i = 0; i < Y.size(); ++i) Y(i) = small(g);
      A = X * Y;
      break;
    }
    case 2:  // zero columns and repeated columns, some inside the first panels
      for (Eigen::Index j = 0; j < cols; ++j) {
        const int what = std::uniform_int_distribution<int>(0, 5)(g);
        if (what == 0) A.col(j).setZero();
        if (what == 1 && j > 0) A.col(j) = A.col(std::uniform_int_distribution<Eigen::Index>(0, j - 1)(g));
      }
      break;
    case 3:  // sparse: most entries 0, so pivots are often missing from the first rows
      for (Eigen::Index i = 0; i < A.size(); ++i)
        if (std::uniform_int_distribution<int>(0, 9)(g) != 0) A(i) = 0;
      break;
    default:
      break;
  }
  return A;
}

}  // namespace

TEST_CASE("blocked elimination mod p", "[property]") {
  rc::prop("the same pivots, pivot rows and determinant as the unblocked elimination", [] {
#ifdef ATTNRANK_SANITIZED  // -O0 under ASan: 51 s at up to 260; still several panels at up to 160
    const auto rows = *rc::gen::inRange<Eigen::Index>(100, 160), cols = *rc::gen::inRange<Eigen::Index>(100, 160);
#else
    const auto rows = *rc::gen::inRange<Eigen::Index>(100, 260), cols = *rc::gen::inRange<Eigen::Index>(100, 260);
#endif
    const int kind = *rc::gen::inRange(0, 4);
    const std::uint32_t prime = *rc::gen::element(2u, 3u, 13u, 251u, 65521u, PrimeSequence().next());
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    const Modulus mod(prime);
    const ModMatrix M = reduce_mod(structured_matrix(rows, cols, kind, seed), mod);
    const ModEchelon blocked = echelon_mod(M, mod), plain = echelon_mod_unblocked(M, mod);
    RC_ASSERT(blocked.pivot_cols == plain.pivot_cols);
    RC_ASSERT(blocked.pivot_rows == plain.pivot_rows);
    RC_ASSERT(blocked.det == plain.det);
  });
  rc::prop("square matrices: the determinant mod p, nonzero exactly when every column has a pivot", [] {
#ifdef ATTNRANK_SANITIZED  // 25 s at -O0 under ASan up to 200
    const auto n = *rc::gen::inRange<Eigen::Index>(128, 150);
#else
    const auto n = *rc::gen::inRange<Eigen::Index>(128, 200);
#endif
    const std::uint32_t prime = *rc::gen::element(251u, PrimeSequence().next());
    const Modulus mod(prime);
    const int kind = *rc::gen::inRange(0, 4);
    const ModMatrix M = reduce_mod(structured_matrix(n, n, kind, *rc::gen::arbitrary<std::uint64_t>()), mod);
    const ModEchelon blocked = echelon_mod(M, mod), plain = echelon_mod_unblocked(M, mod);
    RC_ASSERT(blocked.det == plain.det);
    RC_ASSERT((blocked.det != 0) == (static_cast<Eigen::Index>(blocked.pivot_cols.size()) == n));
  });
}

TEST_CASE("blocked elimination: the panel width keeps every sum exact") {
  for (std::uint32_t p : {2u, 251u, PrimeSequence().next(), (1u << 26) - 5}) {
    const Modulus m(p);
    const Eigen::Index b = echelon_panel_width(m);
    INFO("p = " << p << ", b = " << b);
    if (b >= 8) {  // used: b (p - 1)^2 + p < 2^53
      const long double q = static_cast<long double>(p - 1) * (p - 1);
      CHECK(static_cast<long double>(b) * q + p < 9007199254740992.0L);
    }
  }
  CHECK(echelon_panel_width(Modulus(PrimeSequence().next())) == 64);
  CHECK(echelon_panel_width(Modulus((1u << 26) - 5)) < 8);  // too large: the unblocked path
}

TEST_CASE("exact rank and determinant through the blocked path") {
  // n = 200 (150 sanitized) > 2 panels: a product of full-rank factors has exactly the inner rank,
  // and the proof checks; a unimodular matrix (triangular, unit diagonal, then
  // mixed by row operations) has determinant +-1.
  std::mt19937_64 g(20261203);
  std::uniform_int_distribution<int> small(-5, 5);
#ifdef ATTNRANK_SANITIZED  // -O0 under ASan: 66 s at n = 200; 150 is still three panels of 64
  const Eigen::Index n = 150, inner = 101;
#else
  const Eigen::Index n = 200, inner = 137;
#endif
  Matrix<Integer> X(n, inner), Y(inner, n);
  for (Eigen::Index i = 0; i < X.size(); ++i) X(i) = small(g);
  for (Eigen::Index i = 0; i < Y.size(); ++i) Y(i) = small(g);
  const Matrix<Rational> A = (X * Y).cast<Rational>();
  const ExactRank r = exact_rank(A);
  CHECK(r.rank == inner);
  CHECK(check_exact_rank(A, r));

  Matrix<Integer> U = Matrix<Integer>::Identity(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = i + 1; j < n; ++j) U(i, j) = small(g);
  for (Eigen::Index i = n - 1; i > 0; --i) U.row(i) += small(g) * U.row(i - 1);  // row i-1 still as built: det unchanged
  U.row(0).swap(U.row(n - 1));                                                 // det negated
  CHECK(exact_determinant(U) == -1);
  const Matrix<Integer> D = Matrix<Integer>::Identity(n, n) * 3;
  CHECK(exact_determinant(Matrix<Integer>(U * D)) == -pow(Integer(3), static_cast<unsigned>(n)));
}
