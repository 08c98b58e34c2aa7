// attnrank/linalg/numeric_rank.hpp: uncertified singular values, numerical rank, Lanczos
// top-k and Eckart-Young distances. Oracles: matrices built with known singular
// values (U diag(s) V^T with orthogonal U, V) and the full SVD.
#include "rank_support.hpp"

#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/reach/target.hpp>

#include <Eigen/QR>

#include <cmath>
#include <limits>
#include <random>

using namespace attnrank;

namespace {

/// U diag(s) V^T with Haar-ish orthogonal factors from a seeded QR.
Eigen::MatrixXd with_singular_values(const Eigen::VectorXd& s, Eigen::Index m, Eigen::Index n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d;
  const auto gaussian = [&](Eigen::Index r, Eigen::Index c) {
    Eigen::MatrixXd x(r, c);
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) x(i, j) = d(g);
    return x;
  };
  const Eigen::MatrixXd U = Eigen::HouseholderQR<Eigen::MatrixXd>(gaussian(m, m)).householderQ();
  const Eigen::MatrixXd V = Eigen::HouseholderQR<Eigen::MatrixXd>(gaussian(n, n)).householderQ();
  Eigen::MatrixXd S = Eigen::MatrixXd::Zero(m, n);
  for (Eigen::Index i = 0; i < s.size(); ++i) S(i, i) = s(i);
  return U * S * V.transpose();
}

}  // namespace

TEST_CASE("attnrank::approx_rank") {
  Eigen::VectorXd s(6);
  s << 10, 5, 2, 1e-3, 1e-15, 0;
  const Eigen::MatrixXd A = with_singular_values(s, 8, 6, 7);
  SECTION("default tolerance sigma_max max(m, n) eps cuts the roundoff-sized values") {
    const ApproxRank r = approx_rank(A);
    CHECK(r.rank == 4);
    CHECK(r.tolerance == Approx(10 * 8 * std::numeric_limits<double>::epsilon()));
    CHECK(r.singular_values(0) == Approx(10).epsilon(1e-12));
    CHECK(r.gap > 1e11);  // 1e-3 / 1e-15, with sigma_5 known to about 1e-15 absolute
  }
  SECTION("a user tolerance moves the cut, and the gap tells how sharp it is") {
    const ApproxRank r = approx_rank(A, 1e-2);
    CHECK(r.rank == 3);
    CHECK(r.gap == Approx(2 / 1e-3).epsilon(1e-6));
  }
  SECTION("zero matrix, empty matrix, bad tolerance, NaN") {
    CHECK(approx_rank(Eigen::MatrixXd::Zero(3, 2)).rank == 0);
    CHECK(approx_rank(Eigen::MatrixXd(0, 3)).rank == 0);
    CHECK_THROWS_AS(approx_rank(A, -1.0), input_error);
    Eigen::MatrixXd B = A;
    B(2, 2) = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_AS(approx_rank(B), input_error);
  }
}

// Lanczos for the top values, approx_rank's dense SVD (n <= 400) for all of them;
// under sanitizers (-O0) n = 120 runs the same code in a fraction of the time.
#ifdef ATTNRANK_SANITIZED
constexpr Eigen::Index top_values_n = 120;
#else
constexpr Eigen::Index top_values_n = 300;
#endif

TEST_CASE("attnrank::approx_top_singular_values and approx_low_rank_distance") {
  const Eigen::Index n = top_values_n;
  Eigen::VectorXd s(n);
  for (Eigen::Index i = 0; i < n; ++i) s(i) = i < 20 ? 100.0 / (i + 1) : 1e-3 / (i + 1);
  const Eigen::MatrixXd A = with_singular_values(s, n, n, 11);
  SECTION("Lanczos agrees with the full SVD on the top values") {
    const TopSingularValues top = approx_top_singular_values(A, 21);
    REQUIRE(top.converged == 21);
    const Eigen::VectorXd full = approx_rank(A).singular_values;
    for (Eigen::Index i = 0; i < 21; ++i) CHECK(top.values(i) == Approx(full(i)).epsilon(1e-9).margin(1e-12));
  }
  SECTION("Eckart-Young: the distance to rank k is sigma_(k+1), and the Frobenius tail") {
    const LowRankDistance d = approx_low_rank_distance(A, 20);
    CHECK(d.spectral == Approx(s(20)).epsilon(1e-6));
    CHECK(d.frobenius == Approx(std::sqrt(s.tail(n - 20).squaredNorm())).epsilon(1e-3));
    CHECK(approx_low_rank_distance(A, 0).spectral == Approx(100).epsilon(1e-9));
  }
  SECTION("k out of range is an input error") {
    CHECK_THROWS_AS(approx_top_singular_values(A, 0), input_error);
    CHECK_THROWS_AS(approx_top_singular_values(A, n), input_error);
    CHECK_THROWS_AS(approx_low_rank_distance(A, n), input_error);
  }
}

TEST_CASE("attnrank::approx_rank on the hard cases") {
  SECTION("Hilbert 14: no clear cut in doubles (small gap), while certified mode stays honest") {
    const Matrix<Rational> H = *builtin_matrix("hilbert:14");
    const Eigen::MatrixXd D = H.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
    const ApproxRank r = approx_rank(D);
    CHECK(r.rank < 14);   // the exact rank is 14: numeric mode cannot see it
    CHECK(r.gap < 100);   // ... and says so with a small gap
    const CertifiedRank c = certified_rank(H, 53);
    CHECK(c.lower <= 14);
    CHECK(c.upper == 14);
  }
  SECTION("a nearly singular product: rank-3 factors plus a column holding 1e-20") {
    Eigen::MatrixXd X(6, 3), Y(3, 6);
    X << 1, 2, 3, 0, 1, 4, 5, 6, 0, 1, 0, 1, 2, 2, 2, 3, 1, 0;
    Y << 1, 0, 2, 0, 1, 1, 0, 1, 0, 3, 1, 0, 2, 2, 1, 0, 0, 1;
    Eigen::MatrixXd A(6, 7);
    A << X * Y, Eigen::VectorXd::Zero(6);
    A(5, 6) = 1e-20;  // exact rank 4 now, numerically rank 3 with a huge gap
    const ApproxRank r = approx_rank(A);
    CHECK(r.rank == 3);
    CHECK(r.gap > 1e10);
    const CertifiedRank c = certified_rank(A);
    CHECK(c.lower >= 3);
    CHECK(c.lower <= 4);
    CHECK(c.upper == 6);
    CHECK(exact_rank(Matrix<Rational>(A.unaryExpr([](double x) { return to_rational(x); }))).rank == 4);
  }
  SECTION("1 x n and n x 1") {
    Eigen::MatrixXd row(1, 4), col(4, 1);
    row << 0, 3, 0, 0;
    col << 0, 0, 0, 1e-300;
    CHECK(approx_rank(row).rank == 1);
    CHECK(approx_rank(col).rank == 1);
    CHECK(certified_rank(row).lower == 1);
    CHECK(certified_rank(col).lower == 1);
  }
}

namespace {

/// ||A - U diag(s) V^T||_F / ||A||_F, and how far U and V are from orthonormal.
double relative_residual(const Eigen::MatrixXd& A, const TruncatedSvd& t) {
  return (A - t.U * t.s.asDiagonal() * t.V.transpose()).norm() / A.norm();
}
double orthonormality_error(const Eigen::MatrixXd& W) {
  return (W.transpose() * W - Eigen::MatrixXd::Identity(W.cols(), W.cols())).cwiseAbs().maxCoeff();
}

/// log(A) C of the "attention sink": every row puts 9 on token 1 and 1/10 elsewhere (rank 1, equal rows).
Eigen::MatrixXd sink_log(Eigen::Index n) {
  Matrix<Rational> A = Matrix<Rational>::Constant(n, n, Rational(1, 10));
  A.col(0).setConstant(Rational(9));
  return approx_centered_log(A);
}

}  // namespace

// n = 512 reaches the paths above 400 (the Gram eigensolver); under sanitizers
// (-O0) its SVDs take minutes, and the normal build runs them, so there n = 256.
#ifdef ATTNRANK_SANITIZED
constexpr Eigen::Index large_n = 256;
#else
constexpr Eigen::Index large_n = 512;
#endif

TEST_CASE("attnrank::approx_truncated_svd on the spectra attention targets have") {
  // Where Lanczos breaks down (Spectra throws, or does not converge) and Eigen's
  // BDCSVD returns NaN: the audit's internal error at reach diag:512:0.8 --dk 64.
  SECTION("n - 1 equal singular values (the diagonal target): any k of them, orthonormal") {
    const Eigen::Index n = large_n;
    const Eigen::MatrixXd L = approx_centered_log(*builtin_matrix("diag:" + std::to_string(n) + ":0.8"));
    const double c = std::log(0.8 / (0.2 / static_cast<double>(n - 1)));
    for (Eigen::Index k : {1, 12, 64}) {
      INFO("k = " << k);
      const TruncatedSvd t = approx_truncated_svd(L, k);
      REQUIRE(t.s.size() == k);
      CHECK((t.s.array() - c).abs().maxCoeff() < 1e-9 * c);
      CHECK(orthonormality_error(t.U) < 1e-9);
      CHECK(orthonormality_error(t.V) < 1e-9);
    }
    const TopSingularValues top = approx_top_singular_values(L, 5);
    CHECK(top.converged == 5);
    CHECK((top.values.array() - c).abs().maxCoeff() < 1e-9 * c);
  }
  SECTION("rank 1 with equal rows (an attention sink): the one triplet, to rounding") {
    for (Eigen::Index n : {Eigen::Index{301}, large_n}) {
      INFO("n = " << n);
      const Eigen::MatrixXd L = sink_log(n);
      const TruncatedSvd t = approx_truncated_svd(L, 1);
      CHECK(t.s(0) == Approx(L.norm()).epsilon(1e-12));
      CHECK(relative_residual(L, t) < 1e-13);
      CHECK(approx_rank(L).rank == 1);
      CHECK(approx_rank(L).singular_values.allFinite());
    }
  }
  SECTION("the dense path survives BDCSVD's NaN (Jacobi below 400, the Gram eigensolver above)") {
    for (Eigen::Index n : {Eigen::Index{300}, large_n}) {
      const Eigen::MatrixXd L = sink_log(n);
      const TruncatedSvd t = detail::dense_truncated_svd(L, 2, "dense");
      INFO("n = " << n << ": " << t.method);
      CHECK(detail::all_finite(t));
      CHECK(relative_residual(L, t) < 1e-12);
    }
  }
  SECTION("generic spectra: Lanczos agrees with the full SVD") {
    Eigen::VectorXd s(40);
    for (Eigen::Index i = 0; i < 40; ++i) s(i) = std::pow(0.7, static_cast<double>(i));
    const Eigen::MatrixXd A = with_singular_values(s, 400, 400, 5);
    const TruncatedSvd t = approx_truncated_svd(A, 8);
    CHECK(t.method == "lanczos");
    CHECK((t.s - s.head(8)).cwiseAbs().maxCoeff() < 1e-10);
  }
#ifndef ATTNRANK_SANITIZED  // its QRs of order 1100 take minutes at -O0 (546 s of the ASan suite); the normal build runs it
  SECTION("tall and wide, large enough that the Gram operator, the checks and the other side's vectors run on two threads") {
    Eigen::VectorXd s(60);
    for (Eigen::Index i = 0; i < 60; ++i) s(i) = 10 * std::pow(0.8, static_cast<double>(i));
    for (const auto& [m, n] : {std::pair<Eigen::Index, Eigen::Index>{1100, 1001}, {1001, 1100}}) {
      const Eigen::MatrixXd A = with_singular_values(s, m, n, 11);  // over 2^20 entries; an odd half
      const TruncatedSvd t = approx_truncated_svd(A, 16);
      INFO(m << " x " << n << ": " << t.method);
      CHECK(t.method == "lanczos");
      CHECK((t.s - s.head(16)).cwiseAbs().maxCoeff() < 1e-10);
      // Both sides are singular vectors: A V = U S and A^T U = V S.
      CHECK((A * t.V - t.U * t.s.asDiagonal()).norm() < 1e-9);
      CHECK((A.transpose() * t.U - t.V * t.s.asDiagonal()).norm() < 1e-9);
    }
  }
#endif
}

TEST_CASE("attnrank::approx_rank_from_top and default_rank_tolerance") {
  const Eigen::Index n = 60;
  Eigen::VectorXd s(n);
  for (Eigen::Index i = 0; i < n; ++i) s(i) = i < 7 ? 10.0 / (i + 1) : 0.0;  // rank 7
  const Eigen::MatrixXd A = with_singular_values(s, n, n, 3);
  SECTION("the default tolerance is approx_rank's") {
    const ApproxRank r = approx_rank(A);
    CHECK(r.tolerance == default_rank_tolerance(r.singular_values(0), n, n));
    CHECK(default_rank_tolerance(2.0, 3, 5) == 2.0 * 5 * std::numeric_limits<double>::epsilon());
  }
  SECTION("k at or above the rank: the rank exactly (lower = upper = 7)") {
    for (Eigen::Index k : {7, 8, 20}) {
      INFO("k = " << k);
      const TopRankBounds b = approx_rank_from_top(A, k);
      CHECK(b.lower == 7);
      CHECK(b.upper == 7);
      CHECK(b.top.values.size() == k + 1);
      CHECK(b.distance.spectral == Approx(0).margin(1e-12));
    }
  }
  SECTION("k below the rank: at least k + 1, at most min(m, n)") {
    const TopRankBounds b = approx_rank_from_top(A, 3);
    CHECK(b.lower == 4);
    CHECK(b.upper == n);
    CHECK(b.distance.spectral == Approx(s(3)).epsilon(1e-9));
    CHECK(b.top.values(0) == Approx(10.0).epsilon(1e-12));
  }
  SECTION("a tolerance of its own") {
    const TopRankBounds b = approx_rank_from_top(A, 10, 2.6);  // sigma = 10, 5, 3.33, 2.5, ...
    CHECK(b.tolerance == 2.6);
    CHECK(b.lower == 3);
    CHECK(b.upper == 3);
  }
  SECTION("out of range or a negative tolerance: input errors") {
    CHECK_THROWS_AS(approx_rank_from_top(A, 0), input_error);
    CHECK_THROWS_AS(approx_rank_from_top(A, n - 1), input_error);
    CHECK_THROWS_AS(approx_rank_from_top(A, 3, -1.0), input_error);
  }
}
