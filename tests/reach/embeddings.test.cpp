// attnrank/reach/embeddings.hpp and reach/embeddings_certificate.hpp: reach
// with the embeddings X held fixed, and the checker of its certificates.
#include "rank_support.hpp"

#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/embeddings_certificate.hpp>

#include <numeric>
#include <utility>
#include <vector>

using namespace attnrank;
using namespace attnrank::test;

TEST_CASE("attnrank::reach_with_embeddings") {
  const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
  SECTION("the worked example's X has full row rank: the free answer, with head weights") {
    const Matrix<Rational> X = worked_example::X();
    const EmbeddingsReach two = reach_with_embeddings(A, X, 2);
    CHECK(two.x_full_row_rank);
    CHECK(two.result.verdict == Verdict::reachable);
    CHECK(two.WQ.rows() == 4);
    CHECK(two.WQ.cols() == 2);
    CHECK(two.result.witness->max_abs_error < 1e-12);  // X W^Q W^K^T X^T reproduces A
    CHECK(reach_with_embeddings(A, X, 1).result.verdict == Verdict::unreachable);
  }
  SECTION("embeddings that cannot express the target: violated constraints, certified") {
    Matrix<Rational> X(3, 1);
    X << 1, 2, 3;
    const EmbeddingsReach e = reach_with_embeddings(A, X, 1);
    CHECK(e.constraints == "violated (certified)");
    CHECK(e.result.verdict == Verdict::unreachable);
  }
  SECTION("a target made from the embeddings is reachable, with exact constraints") {
    Matrix<Rational> X(3, 2);
    X << 1, 0, 1, 1, 1, 2;  // contains the ones vector
    const Matrix<Rational> E = X * X.transpose();
    const Matrix<Rational> B = E.unaryExpr([](const Rational& e) { return Rational(Integer(1) << e.convert_to<long>()); });
    const EmbeddingsReach e = reach_with_embeddings(B, X, 1);
    CHECK(e.constraints == "hold (exact)");
    CHECK(e.result.verdict == Verdict::reachable);
    CHECK(e.result.witness->max_abs_error < 1e-12);
  }
  SECTION("wrong shapes are input errors") {
    CHECK_THROWS_WITH(reach_with_embeddings(A, Matrix<Rational>::Ones(2, 4), 1), Catch::Contains("have 2 rows, but the target has n = 3"));
    CHECK_THROWS_WITH(reach_with_embeddings(A, worked_example::X(), 5), Catch::Contains("1 <= d_k <= d_model"));
  }
}

TEST_CASE("attnrank::reach_with_embeddings properties", "[property]") {
  rc::prop("when X has full row rank, the embeddings question and the free question coincide", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 6);
    const auto d = *rc::gen::inRange<Eigen::Index>(n, n + 3);
    // Full row rank by construction (discarding rank-deficient draws gives up at
    // RapidCheck's small sizes, where the entries are mostly zero): an n x n block
    // L U of unit triangular integer factors, other columns arbitrary, columns shuffled.
    Matrix<Integer> L = Matrix<Integer>::Identity(n, n), U = Matrix<Integer>::Identity(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < i; ++j) {
        L(i, j) = *rc::gen::inRange(-2, 3);
        U(j, i) = *rc::gen::inRange(-2, 3);
      }
    Matrix<Integer> Z(n, d);
    Z.leftCols(n) = L * U;
    Z.rightCols(d - n) = gen_integer_matrix(n, d - n, 3);
    std::vector<Eigen::Index> order(static_cast<std::size_t>(d));
    std::iota(order.begin(), order.end(), Eigen::Index{0});
    for (std::size_t i = order.size(); i > 1; --i)  // Fisher-Yates
      std::swap(order[i - 1], order[*rc::gen::inRange<std::size_t>(0, i)]);
    Matrix<Rational> X(n, d);
    for (Eigen::Index j = 0; j < d; ++j)
      X.col(j) = Z.col(order[static_cast<std::size_t>(j)]).unaryExpr([](const Integer& z) { return Rational(z); });
    RC_ASSERT(exact_rank(X).rank == n);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(*rc::gen::inRange(1, 9), *rc::gen::inRange(1, 9));
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const EmbeddingsReach e = reach_with_embeddings(A, X, dk);
    RC_ASSERT(e.x_full_row_rank);
    RC_ASSERT(e.result.verdict == reach(A, dk).verdict);
  });
}

TEST_CASE("attnrank::check_embeddings_certificate") {
  const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
  SECTION("violated constraints: unreachable, certified, re-checked; tampering rejected") {
    Matrix<Rational> X(3, 1);
    X << 1, 2, 3;
    const nlohmann::json cert = make_embeddings_certificate(A, X, reach_with_embeddings(A, X, 1));
    CHECK(check_embeddings_certificate(A, X, cert).valid);
    nlohmann::json t = cert;
    t["dk"] = 1;
    t["constraints"] = "hold (exact)";
    t["digest"] = fnv1a_hex([&] { auto u = t; u.erase("digest"); return u.dump(); }());
    CHECK_FALSE(check_embeddings_certificate(A, X, t).valid);
    Matrix<Rational> X2 = X;
    X2(0, 0) = 2;
    CHECK_FALSE(check_embeddings_certificate(A, X2, cert).valid);
  }
  SECTION("exact constraints and an exact rank bound: reachable, re-checked") {
    Matrix<Rational> X(3, 2);
    X << 1, 0, 1, 1, 1, 2;
    const Matrix<Rational> B = Matrix<Rational>(X * X.transpose()).unaryExpr([](const Rational& e) { return Rational(Integer(1) << e.convert_to<long>()); });
    const EmbeddingsReach e = reach_with_embeddings(B, X, 1);
    REQUIRE(e.result.verdict == Verdict::reachable);
    CHECK(check_embeddings_certificate(B, X, make_embeddings_certificate(B, X, e)).valid);
  }
  SECTION("full row rank: the free certificate inside is checked") {
    const Matrix<Rational> X = worked_example::X();
    const nlohmann::json cert = make_embeddings_certificate(A, X, reach_with_embeddings(A, X, 1));
    CHECK(check_embeddings_certificate(A, X, cert).valid);
  }
}
