// Reachability benchmarks (Google Benchmark): time to a certified verdict for
// random positive targets, and the full answer with witness and certified error.
// bench/compare-reach adds NumPy's uncertified matrix_rank of the same centered
// log matrix (for the causal verdict: of the same staircase blocks) and prints
// ratios (docs/performance.md).
//
//   reach_bench [--write-inputs DIR] [benchmark flags]
// Targets come from ATTNRANK_BENCH_SEED (default 12345), printed first.
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/free.hpp>
#include <attnrank/reach/masked.hpp>

#include <benchmark/benchmark.h>
#include <sys/resource.h>

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

/// Uniform (0.001, 1) doubles, used exactly (each double is a rational).
const Eigen::MatrixXd& target_doubles(int n) {
  static std::map<int, Eigen::MatrixXd> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::mt19937_64 g(seed() + 31 * static_cast<std::uint64_t>(n));
  std::uniform_real_distribution<double> d(0.001, 1.0);
  Eigen::MatrixXd A(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) A(i, j) = d(g);
  return cache.emplace(n, std::move(A)).first->second;
}

const Matrix<Rational>& target(int n) {
  static std::map<int, Matrix<Rational>> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  return cache.emplace(n, target_doubles(n).unaryExpr([](double x) { return to_rational(x); })).first->second;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void reach_verdict(benchmark::State& state) {
  const Matrix<Rational>& A = target(static_cast<int>(state.range(0)));
  ReachOptions o;
  o.witness = false;
  ReachResult r;
  for (auto _ : state) r = reach(A, 64, o);
  state.counters["floor_lower"] = static_cast<double>(r.floor.lower);
  state.counters["unreachable"] = r.verdict == Verdict::unreachable;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void reach_with_witness(benchmark::State& state) {
  const Matrix<Rational>& A = target(static_cast<int>(state.range(0)));
  ReachResult r;
  for (auto _ : state) r = reach(A, 64);
  state.counters["max_abs_error"] = r.witness ? r.witness->max_abs_error : -1;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

/// Certified bounds on E*(A, 64): the optimised witness and the singular-value bound.
void approx_bounds(benchmark::State& state) {
  const Matrix<Rational>& A = target(static_cast<int>(state.range(0)));
  ApproxBounds b;
  for (auto _ : state) b = approx_error_bounds(A, state.range(1));
  state.counters["error_lower"] = b.error_lower;
  state.counters["error_upper"] = b.error_upper;
  state.counters["start_error"] = b.start_error;
}

/// The width profile for d_k = 1..16 at epsilon = 0.01; range(1) = 0: the
/// starts only (no search: the fast bracket), 1: the default (search where the
/// answer is open).
void approx_width_profile(benchmark::State& state) {
  const Matrix<Rational>& A = target(static_cast<int>(state.range(0)));
  ApproxOptions o;
  o.optimise = state.range(1) != 0;
  WidthResult w;
  for (auto _ : state) w = approx_width(A, 0.01, 16, o);
  state.counters["width_lower"] = static_cast<double>(w.width_lower);
  state.counters["width_upper"] = static_cast<double>(w.width_upper);
  state.counters["upper_at_16"] = w.profile.back().error_upper;
  state.counters["lower_at_1"] = w.profile.front().error_lower;
}

/// The causal (decoder) verdict at the generic floor d_k = n / 2: the target is
/// the lower triangle of the same random matrix; every block and overlap of the
/// staircase gets its certified rank (reach/masked.hpp).
void causal_verdict(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Matrix<Rational> A = target(n);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) A(i, j) = 0;
  const Mask mask = Mask::causal(n);
  ReachOptions o;
  o.witness = false;
  MaskedReachResult r;
  for (auto _ : state) r = reach(A, n / 2, mask, o);
  state.counters["floor_lower"] = static_cast<double>(r.floor.lower);
  state.counters["floor_upper"] = static_cast<double>(r.floor.upper);
  state.counters["reachable"] = r.verdict == Verdict::reachable;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void write_inputs(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (int n : {128, 512, 1024}) {
    std::ofstream f(dir / ("target_" + std::to_string(n) + ".f64"), std::ios::binary);
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> R = target_doubles(n);
    f.write(reinterpret_cast<const char*>(R.data()), static_cast<std::streamsize>(R.size() * sizeof(double)));
  }
}

}  // namespace

BENCHMARK(reach_verdict)->Arg(128)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(approx_bounds)->Args({512, 64})->Args({128, 8})->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(approx_width_profile)->Args({128, 1})->Args({512, 0})->Args({512, 1})->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(reach_with_witness)->Arg(128)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(causal_verdict)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->Iterations(1);

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
