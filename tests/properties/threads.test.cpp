// The parallel parts, under test for data races: the directed-rounding product
// runs its two GEMMs on two threads for big products (numbers/directed_rounding.hpp),
// the MPFR/MPFI products and softmax deal rows to threads
// (numbers/detail/parallel.hpp), and the truncated SVD splits its Gram operator, its
// checks and the certified remainder's panels over two threads (linalg/numeric_rank.hpp,
// linalg/detail/svd_remainder.hpp). CI builds this program with ThreadSanitizer as well
// (docs/reliability.md).
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/reach/free.hpp>
#include <attnrank/attention/softmax.hpp>

#include <catch2/catch.hpp>

#include <cfenv>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using namespace attnrank;

namespace {

/// The seed main() put in RC_PARAMS (tests/main.cpp prints it): one seed for the run.
std::uint64_t run_seed() {
  const std::string p = std::getenv("RC_PARAMS") ? std::getenv("RC_PARAMS") : "";
  const auto at = p.find("seed=");
  return at == std::string::npos ? 20261130ULL : std::stoull(p.substr(at + 5));
}

/// A random integer matrix: its products are exact in double, so lower and
/// upper bounds must both equal the product.
Eigen::MatrixXd integer_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-1000, 1000);
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = d(rng);
  return m;
}

bool bounds_are_exact(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Eigen::MatrixXd A = integer_matrix(170, 180, rng), B = integer_matrix(180, 160, rng);  // >= 4e6 flops: two threads
  const BoundsMatrix b = certified_product_bounds(A, B);
  Eigen::MatrixXd exact = Eigen::MatrixXd::Zero(A.rows(), B.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index k = 0; k < A.cols(); ++k) exact.row(i) += A(i, k) * B.row(k);
  return b.lo == exact && b.hi == exact;
}

}  // namespace

TEST_CASE("attnrank::certified_product_bounds on two threads") {
  const std::uint64_t seed = run_seed();
  INFO("matrices drawn from seed " << seed);
  SECTION("big integer products are bounded exactly, and the caller's rounding mode survives") {
    CHECK(bounds_are_exact(seed));
    CHECK(std::fegetround() == FE_TONEAREST);
  }
  SECTION("callers on several threads at once do not disturb each other") {
    std::vector<char> ok(4, 0);
    std::vector<std::thread> callers;
    for (std::size_t t = 0; t < ok.size(); ++t) callers.emplace_back([&ok, t, seed] { ok[t] = bounds_are_exact(seed + t); });
    for (std::thread& c : callers) c.join();
    for (char o : ok) CHECK(o);
  }
  SECTION("reach at n = 170 (threaded minor certification) decides the diagonal target") {
    const ReachResult r = reach(*builtin_matrix("diag:170:0.8"), 1);
    CHECK(r.verdict == Verdict::unreachable);
  }
}

TEST_CASE("approx_truncated_svd and certified_singular_values on two threads") {
  const std::uint64_t seed = run_seed();
  INFO("matrices drawn from seed " << seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  // Rank 4 plus noise, over 2^20 entries (the Gram operator's split), with k = 4
  // (the checks' GEMMs and the remainder's panels split from 4e6 flops).
  const Eigen::MatrixXd F = Eigen::MatrixXd::NullaryExpr(1030, 4, [&] { return normal(rng); });
  const Eigen::MatrixXd G = Eigen::MatrixXd::NullaryExpr(4, 1024, [&] { return normal(rng); });
  const Eigen::MatrixXd N = Eigen::MatrixXd::NullaryExpr(1030, 1024, [&] { return normal(rng); });
  const Eigen::MatrixXd tall = F * G + 1e-3 * N;
  for (const Eigen::MatrixXd& A : {tall, Eigen::MatrixXd(tall.transpose())}) {
    const TruncatedSvd t = approx_truncated_svd(A, 4);
    CHECK(t.method == "lanczos");
    CHECK((A * t.V - t.U * t.s.asDiagonal()).norm() < 1e-8 * t.s(0));
    SvdOptions truncated;
    truncated.full_limit = 0;
    const CertifiedSingularValues c = certified_singular_values(A, 4, truncated);
    for (const SingularValueBounds& b : c.values) {
      CHECK(b.lower > 0);
      CHECK(b.lower <= b.upper);
    }
    CHECK(std::fegetround() == FE_TONEAREST);
  }
}

namespace {

/// A random matrix of short decimals (-9.99 .. 9.99) in tier T.
template <class T>
Matrix<T> decimal_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-999, 999);
  Matrix<Rational> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = Rational(d(rng), 100);
  return from_rational<T>(m);
}

/// A B entry by entry on this thread (the per-entry dot), compared bit for bit
/// with multiply(A, B), which deals rows to threads at this size.
template <class T>
bool threaded_product_matches(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Matrix<T> A = decimal_matrix<T>(40, 50, rng), B = decimal_matrix<T>(50, 30, rng);
  const Matrix<T> C = multiply(A, B);
  const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> a = A, bt = B.transpose();
  detail::DotWorkspace workspace;
  T entry, term;
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < B.cols(); ++j) {
      detail::dot(entry.backend().data(), a.data() + i * a.cols(), bt.data() + j * bt.cols(), a.cols(), workspace,
                  term.backend().data());
      if constexpr (std::is_same_v<T, Real>) {
        if (!mpfr_equal_p(entry.backend().data(), C(i, j).backend().data())) return false;
      } else {
        if (!mpfr_equal_p(&entry.backend().data()->left, &C(i, j).backend().data()->left) ||
            !mpfr_equal_p(&entry.backend().data()->right, &C(i, j).backend().data()->right))
          return false;
      }
    }
  return true;
}

/// softmax_rows on 64 x 64 scores (threaded) against one row at a time (serial).
template <class T>
bool threaded_softmax_matches(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Matrix<T> S = decimal_matrix<T>(64, 64, rng);
  const Matrix<T> A = softmax_rows(S);
  for (Eigen::Index r = 0; r < S.rows(); ++r) {
    const Matrix<T> row = softmax_rows(Matrix<T>(S.row(r)));
    for (Eigen::Index j = 0; j < S.cols(); ++j) {
      const auto& x = row(0, j).backend();
      const auto& y = A(r, j).backend();
      if constexpr (std::is_same_v<T, Real>) {
        if (!mpfr_equal_p(x.data(), y.data())) return false;
      } else {
        if (!mpfr_equal_p(&x.data()->left, &y.data()->left) || !mpfr_equal_p(&x.data()->right, &y.data()->right))
          return false;
      }
    }
  }
  return true;
}

}  // namespace

TEST_CASE("multiply and softmax_rows in the MPFR and MPFI tiers, rows on threads") {
  const std::uint64_t seed = run_seed();
  INFO("matrices drawn from seed " << seed << "; threads " << detail::row_threads());
  PrecisionScope precision(171);
  SECTION("the threaded products equal the serial per-entry dot, bit for bit") {
    CHECK(threaded_product_matches<Real>(seed));
    CHECK(threaded_product_matches<Interval>(seed));
  }
  SECTION("the threaded softmax equals the serial one, bit for bit") {
    CHECK(threaded_softmax_matches<Real>(seed));
    CHECK(threaded_softmax_matches<Interval>(seed));
  }
  SECTION("callers on several threads at once do not disturb each other") {
    std::vector<char> ok(4, 0);
    std::vector<std::thread> callers;
    for (std::size_t t = 0; t < ok.size(); ++t)
      callers.emplace_back([&ok, t, seed] {
        ok[t] = threaded_product_matches<Real>(seed + t) && threaded_softmax_matches<Interval>(seed + t);
        mpfr_free_cache();  // MPFR's rule for threads that used it (LeakSanitizer checks it)
      });
    for (std::thread& c : callers) c.join();
    for (char o : ok) CHECK(o);
  }
}
