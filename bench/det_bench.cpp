// Certified determinants of decimal matrices (Google Benchmark): attnrank against
// Arb's arb_mat_det in the same binary, on the same decimals, with the certified
// relative width of each beside its time. bench/compare-det adds whole-process
// runs (the CLI on a CSV file against this binary's --arb-det on the same file)
// and prints the ratios (docs/performance.md).
//
//   det_bench --write-inputs DIR          the CSV files the benchmarks use
//   det_bench --arb-det FILE.csv [BITS]   Arb's determinant of a CSV file (whole process, BITS default 128)
//   det_bench [benchmark flags]
// Inputs come from ATTNRANK_BENCH_SEED (default 12345), printed first.
//  * "centred": the row-centred log of a softmax attention pattern, log A - mean,
//    which is the score matrix with each row's mean removed: its rows sum to zero
//    exactly, so only the 17-digit decimals written make it nonsingular
//    (condition number ~1e17-1e19: what a user's CSV of log-probabilities is).
//  * "uniform": 17-digit decimals uniform in [-1, 1] (well-conditioned).
#include <attnrank/io/parse.hpp>
#include <attnrank/linalg/certified_determinant.hpp>

#include <arb.h>
#include <arb_mat.h>
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace attnrank;

std::uint64_t seed() {
  const char* s = std::getenv("ATTNRANK_BENCH_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 12345;
}

/// The matrix as CSV text of 17-significant-digit decimals (cached).
const std::string& csv(bool centred, int n) {
  static std::map<std::pair<bool, int>, std::string> cache;
  auto it = cache.find({centred, n});
  if (it != cache.end()) return it->second;
  std::mt19937_64 g(seed() + 31 * static_cast<std::uint64_t>(n) + centred);
  std::normal_distribution<double> gauss(0, 2);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::ostringstream out;
  std::vector<double> row(static_cast<std::size_t>(n));
  char buf[40];
  for (int i = 0; i < n; ++i) {
    double mean = 0;
    for (double& x : row) {
      x = centred ? gauss(g) : uniform(g);
      mean += x;
    }
    mean /= n;
    for (int j = 0; j < n; ++j) {
      std::snprintf(buf, sizeof buf, "%.17g", centred ? row[static_cast<std::size_t>(j)] - mean : row[static_cast<std::size_t>(j)]);
      out << buf << (j + 1 < n ? "," : "\n");
    }
  }
  return cache.emplace(std::make_pair(centred, n), out.str()).first->second;
}

const Matrix<Rational>& rationals(bool centred, int n) {
  static std::map<std::pair<bool, int>, Matrix<Rational>> cache;
  auto it = cache.find({centred, n});
  if (it != cache.end()) return it->second;
  return cache.emplace(std::make_pair(centred, n), parse_matrix(csv(centred, n), "bench")).first->second;
}

/// The decimals of a CSV text, row by row.
std::vector<std::vector<std::string>> cells(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    out.emplace_back();
    std::istringstream fields(line);
    std::string cell;
    while (std::getline(fields, cell, ',')) out.back().push_back(cell);
  }
  return out;
}

/// Arb's determinant of the decimals at `bits`: its certified relative width
/// (2 rad / |mid|, as log10), or +inf when the ball contains 0.
double arb_det_log10_width(const std::vector<std::vector<std::string>>& c, slong bits) {
  const slong n = static_cast<slong>(c.size());
  arb_mat_t A;
  arb_mat_init(A, n, n);
  for (slong i = 0; i < n; ++i)
    for (slong j = 0; j < n; ++j)
      if (arb_set_str(arb_mat_entry(A, i, j), c[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)].c_str(), bits))
        throw std::runtime_error("Arb cannot read " + c[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
  arb_t det;
  arb_init(det);
  arb_mat_det(det, A, bits);
  const double width = arb_contains_zero(det) ? INFINITY : (static_cast<double>(arb_rel_error_bits(det)) + 1) * std::log10(2.0);
  arb_clear(det);
  arb_mat_clear(A);
  return width;
}

/// attnrank's certified relative width (hi - lo) / min |det|, as log10.
double log10_width(const CertifiedDeterminant& d) {
  if (!d.preconditioned) return INFINITY;
  const Real lo = abs(lower_bound(d.det)), hi = abs(upper_bound(d.det));
  const Real w = (upper_bound(d.det) - lower_bound(d.det)) / (lo < hi ? lo : hi);
  return static_cast<double>(log10(w));
}

void det_attnrank(benchmark::State& state) {
  const Matrix<Rational>& A = rationals(state.range(0) != 0, static_cast<int>(state.range(1)));
  CertifiedDeterminant d;
  for (auto _ : state) d = certified_determinant(A);
  state.counters["log10_rel_width"] = log10_width(d);
  state.SetLabel(d.method);
}

void det_arb(benchmark::State& state) {
  const auto c = cells(csv(state.range(0) != 0, static_cast<int>(state.range(1))));
  double width = 0;
  for (auto _ : state) width = arb_det_log10_width(c, 128);
  state.counters["log10_rel_width"] = width;
}

void write_inputs(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (int n : {256, 512, 1024}) std::ofstream(dir / ("centred_" + std::to_string(n) + ".csv")) << csv(true, n);
  for (int n : {512, 1024}) std::ofstream(dir / ("uniform_" + std::to_string(n) + ".csv")) << csv(false, n);
}

}  // namespace

// range(0): 1 centred, 0 uniform; range(1): n.
BENCHMARK(det_attnrank)->Args({1, 256})->Args({1, 512})->Args({1, 1024})->Args({0, 512})
    ->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(det_arb)->Args({1, 256})->Args({1, 512})->Args({1, 1024})->Args({0, 512})
    ->Unit(benchmark::kMillisecond)->Iterations(1);

int main(int argc, char** argv) {
  std::cerr << "seed ATTNRANK_BENCH_SEED=" << seed() << "\n";
  if (argc == 3 && std::string(argv[1]) == "--write-inputs") {
    write_inputs(argv[2]);
    return 0;
  }
  if ((argc == 3 || argc == 4) && std::string(argv[1]) == "--arb-det") {
    std::ifstream f(argv[2], std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    const slong bits = argc == 4 ? std::atol(argv[3]) : 128;
    std::cout << "log10_rel_width " << arb_det_log10_width(cells(text.str()), bits) << "\n";
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
