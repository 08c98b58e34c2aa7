// Rank benchmarks (Google Benchmark), with FLINT in the same binary as the peer
// for exact integer rank. bench/compare-rank adds NumPy's matrix_rank and full
// SVD on the same matrices and prints the ratios (docs/performance.md).
//
//   rank_bench [--write-inputs DIR] [benchmark flags]
// Inputs are generated from ATTNRANK_BENCH_SEED (default 12345), printed first.
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/linalg/numeric_rank.hpp>

#include <benchmark/benchmark.h>
#include <flint/fmpz_mat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>

namespace {

using namespace attnrank;

std::uint64_t seed() {
  const char* s = std::getenv("ATTNRANK_BENCH_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 12345;
}

/// n x n integers in [-9, 9]; deficient: the product of n x n/2 and n/2 x n such factors.
const Matrix<Integer>& integer_matrix(int n, bool deficient) {
  static std::map<std::pair<int, bool>, Matrix<Integer>> cache;
  auto it = cache.find({n, deficient});
  if (it != cache.end()) return it->second;
  std::mt19937_64 g(seed() + static_cast<std::uint64_t>(n) * 2 + deficient);
  std::uniform_int_distribution<int> d(-9, 9);
  const auto random = [&](int r, int c) {
    Matrix<Integer> m(r, c);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) m(i, j) = d(g);
    return m;
  };
  Matrix<Integer> A = deficient ? Matrix<Integer>(random(n, n / 2) * random(n / 2, n)) : random(n, n);
  return cache.emplace(std::make_pair(n, deficient), std::move(A)).first->second;
}

/// n x n doubles, uniform in [-1, 1] (full rank, condition ~ n).
const Eigen::MatrixXd& double_matrix(int n) {
  static std::map<int, Eigen::MatrixXd> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::mt19937_64 g(seed() + 7 * static_cast<std::uint64_t>(n));
  std::uniform_real_distribution<double> d(-1, 1);
  Eigen::MatrixXd A(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) A(i, j) = d(g);
  return cache.emplace(n, std::move(A)).first->second;
}

/// A score matrix of rank 64 plus noise 1e-3 (the question "is this head's score
/// matrix rank 64?"), or a dense random matrix (Lanczos's hard case).
const Eigen::MatrixXd& svd_matrix(int n, bool low_rank) {
  static std::map<std::pair<int, bool>, Eigen::MatrixXd> cache;
  auto it = cache.find({n, low_rank});
  if (it != cache.end()) return it->second;
  std::mt19937_64 g(seed() + 13 * static_cast<std::uint64_t>(n) + low_rank);
  std::normal_distribution<double> d;
  const auto gaussian = [&](int r, int c) {
    Eigen::MatrixXd m(r, c);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) m(i, j) = d(g);
    return m;
  };
  Eigen::MatrixXd A = low_rank ? Eigen::MatrixXd(gaussian(n, 64) * gaussian(64, n) / 8.0 + 1e-3 * gaussian(n, n))
                               : gaussian(n, n);
  return cache.emplace(std::make_pair(n, low_rank), std::move(A)).first->second;
}

void exact_rank_attnrank(benchmark::State& state) {
  const Matrix<Integer>& A = integer_matrix(static_cast<int>(state.range(0)), state.range(1) != 0);
  Eigen::Index r = 0;
  for (auto _ : state) benchmark::DoNotOptimize(r = exact_rank(A).rank);
  state.counters["rank"] = static_cast<double>(r);
}

void exact_rank_flint(benchmark::State& state) {
  const Matrix<Integer>& A = integer_matrix(static_cast<int>(state.range(0)), state.range(1) != 0);
  fmpz_mat_t F;
  fmpz_mat_init(F, A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) fmpz_set_mpz(fmpz_mat_entry(F, i, j), A(i, j).backend().data());
  slong r = 0;
  for (auto _ : state) benchmark::DoNotOptimize(r = fmpz_mat_rank(F));
  state.counters["rank"] = static_cast<double>(r);
  fmpz_mat_clear(F);
}

void certified_rank_attnrank(benchmark::State& state) {
  const Eigen::MatrixXd& A = double_matrix(static_cast<int>(state.range(0)));
  Eigen::Index r = 0;
  for (auto _ : state) benchmark::DoNotOptimize(r = certified_rank(A).lower);
  state.counters["rank_lower"] = static_cast<double>(r);
}

void top_singular_values_spectra(benchmark::State& state) {
  const Eigen::MatrixXd& A = svd_matrix(static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(approx_top_singular_values(A, 65).values.data());
}

void certified_top_singular_values(benchmark::State& state) {
  const Eigen::MatrixXd& A = svd_matrix(static_cast<int>(state.range(0)), state.range(1) != 0);
  CertifiedSingularValues s;
  for (auto _ : state) {
    s = certified_singular_values(A, 65);
    benchmark::DoNotOptimize(s.values.data());
  }
  state.counters["sigma_1_lower"] = s.values.front().lower;
  state.counters["sigma_65_lower"] = s.values.back().lower;
  state.counters["sigma_1_upper"] = s.values.front().upper;
  state.counters["sigma_65_upper"] = s.values.back().upper;
}

void full_svd_eigen(benchmark::State& state) {
  const Eigen::MatrixXd& A = svd_matrix(static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(approx_rank(A).singular_values.data());
}

void write_inputs(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto dump = [&](const std::string& name, const Eigen::MatrixXd& A) {
    std::ofstream f(dir / name, std::ios::binary);  // row-major little-endian float64, n x n
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> R = A;
    f.write(reinterpret_cast<const char*>(R.data()), static_cast<std::streamsize>(R.size() * sizeof(double)));
  };
  for (int n : {512, 1024}) dump("certified_" + std::to_string(n) + ".f64", double_matrix(n));
  dump("svd_2048_lowrank.f64", svd_matrix(2048, true));
  dump("svd_2048_dense.f64", svd_matrix(2048, false));
}

}  // namespace

BENCHMARK(exact_rank_attnrank)->ArgsProduct({{64, 128, 256, 512}, {0}})->Args({256, 1})->Args({512, 1})
    ->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(exact_rank_flint)->ArgsProduct({{64, 128, 256, 512}, {0}})->Args({256, 1})->Args({512, 1})
    ->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(certified_rank_attnrank)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(top_singular_values_spectra)->Args({2048, 1})->Args({2048, 0})->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(certified_top_singular_values)->Args({2048, 1})->Args({2048, 0})->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(full_svd_eigen)->Args({2048, 1})->Args({2048, 0})->Unit(benchmark::kMillisecond)->Iterations(1);

int main(int argc, char** argv) {
  std::cerr << "seed ATTNRANK_BENCH_SEED=" << seed() << "\n";
  if (argc == 3 && std::string(argv[1]) == "--write-inputs") {
    write_inputs(argv[2]);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
