// Forward pass of the layer in each tier, at the sizes docs/performance.md reports:
// (n, d_model, h) = (64, 64, 8) and (128, 512, 8).
//
//   layer_bench [google-benchmark flags]      time every tier
//   layer_bench --write-inputs DIR            write the same inputs as CSV for the peers
//
// Inputs are exact decimals drawn from a seeded generator (ATTNRANK_BENCH_SEED,
// default 12345; printed). Weights are k / (100 * round(sqrt(d_model))), so
// scores stay in the range trained models see. mp and interval run at 50 decimal
// digits, the precision the mpmath peer uses.
#include <attnrank/attnrank.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>

namespace {

using namespace attnrank;

struct Inputs {
  Matrix<Rational> X, wq, wk, wv, wo;
  Eigen::Index heads;
};

unsigned long long seed() {
  const char* s = std::getenv("ATTNRANK_BENCH_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 12345ULL;
}

const Inputs& inputs(Eigen::Index n, Eigen::Index d_model, Eigen::Index heads) {
  static std::map<std::tuple<Eigen::Index, Eigen::Index, Eigen::Index>, Inputs> cache;
  auto key = std::make_tuple(n, d_model, heads);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::mt19937_64 rng(seed() + static_cast<unsigned long long>(n * 1000003 + d_model * 101 + heads));
  std::uniform_int_distribution<int> k(-100, 100);
  const long scale = 100 * std::lround(std::sqrt(static_cast<double>(d_model)));
  auto random = [&](Eigen::Index r, Eigen::Index c, long denominator) {
    Matrix<Rational> m(r, c);
    for (auto& x : m.reshaped()) x = Rational(k(rng), denominator);
    return m;
  };
  Inputs in{random(n, d_model, 100), random(d_model, d_model, scale), random(d_model, d_model, scale),
            random(d_model, d_model, scale), random(d_model, d_model, scale), heads};
  return cache.emplace(key, std::move(in)).first->second;
}

template <class T>
MultiHeadAttention<T> layer_in(const Inputs& in) {
  return MultiHeadAttention<T>(from_rational<T>(in.wq), from_rational<T>(in.wk), from_rational<T>(in.wv),
                               from_rational<T>(in.wo), in.heads);
}

constexpr unsigned bits_50_digits = 167;  // 50 decimal digits, as mp.dps = 50

template <class T>
void forward(benchmark::State& state) {
  const Inputs& in = inputs(state.range(0), state.range(1), state.range(2));
  PrecisionScope scope(bits_50_digits);
  const auto layer = layer_in<T>(in);
  const Matrix<T> X = from_rational<T>(in.X);
  for (auto _ : state) benchmark::DoNotOptimize(layer.forward(X).output.data());
  state.counters["bits"] = std::is_same_v<T, double> ? 53 : PrecisionScope::bits();
}

void forward_exact_path(benchmark::State& state) {
  const Inputs& in = inputs(state.range(0), state.range(1), state.range(2));
  PrecisionScope scope(bits_50_digits);
  const auto layer = layer_in<Rational>(in);
  for (auto _ : state) benchmark::DoNotOptimize(layer.forward<Interval>(in.X).output.data());
}

void write_csv(const std::filesystem::path& p, const Matrix<Rational>& m) {
  std::ofstream f(p);
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    for (Eigen::Index j = 0; j < m.cols(); ++j) f << (j ? "," : "") << m(i, j).str();
    f << "\n";
  }
}

const std::vector<std::vector<int64_t>> sizes = {{64, 64, 8}, {128, 512, 8}};

}  // namespace

BENCHMARK_TEMPLATE(forward, double)->ArgsProduct({{64}, {64}, {8}})->Args({128, 512, 8})->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(forward, Real)->Args({64, 64, 8})->Args({128, 512, 8})->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK_TEMPLATE(forward, Interval)->Args({64, 64, 8})->Args({128, 512, 8})->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(forward_exact_path)->Args({64, 64, 8})->Unit(benchmark::kMillisecond)->MinTime(2);

int main(int argc, char** argv) {
  std::cerr << "layer_bench: seed " << seed() << " (ATTNRANK_BENCH_SEED to change)\n";
  if (argc == 3 && std::string(argv[1]) == "--write-inputs") {
    for (const auto& s : sizes) {
      const Inputs& in = inputs(s[0], s[1], s[2]);
      const auto dir = std::filesystem::path(argv[2]) /
                       ("n" + std::to_string(s[0]) + "_d" + std::to_string(s[1]) + "_h" + std::to_string(s[2]));
      std::filesystem::create_directories(dir);
      write_csv(dir / "x.csv", in.X);
      write_csv(dir / "wq.csv", in.wq);
      write_csv(dir / "wk.csv", in.wk);
      write_csv(dir / "wv.csv", in.wv);
      write_csv(dir / "wo.csv", in.wo);
    }
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
