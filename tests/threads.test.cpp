// The parallel parts, under test for data races: the directed-rounding product
// runs its two GEMMs on two threads for big products (directed_rounding.hpp).
// CI builds this program with ThreadSanitizer as well (docs/reliability.md).
#include <attnrank/directed_rounding.hpp>
#include <attnrank/matrix_spec.hpp>
#include <attnrank/reach.hpp>

#include <catch2/catch.hpp>

#include <cfenv>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
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
  const BoundsMatrix b = product_bounds(A, B);
  Eigen::MatrixXd exact = Eigen::MatrixXd::Zero(A.rows(), B.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index k = 0; k < A.cols(); ++k) exact.row(i) += A(i, k) * B.row(k);
  return b.lo == exact && b.hi == exact;
}

}  // namespace

TEST_CASE("attnrank::product_bounds on two threads") {
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
