// The certified double tier against the double tier, at the sizes issue 22 names:
// the layer at (n, d_model, h) = (128, 512, 8) and (4096, 64, 1) (one head of
// width 64 over 4096 tokens), and check-kernel's enclosure of one head,
// softmax(Q K^T / 8) V at N = 4096, d = 64, for NumPy's float64 head as the peer.
//
//   kernel_bench [google-benchmark flags]
//   kernel_bench --write-inputs DIR     Q, K, V of the head as float64 .npy, for the NumPy peer
//
// Inputs from a seeded generator (ATTNRANK_BENCH_SEED, default 12345; printed):
// Gaussian Q, K, V rounded to float32 (what a kernel's inputs are), layer weights
// of size 1/sqrt(d_model).
#include <attnrank/attention/certified_attention.hpp>
#include <attnrank/attention/certified_double_forward.hpp>
#include <attnrank/attention/softmax.hpp>

#include <benchmark/benchmark.h>

#include <malloc.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

namespace {

using namespace attnrank;

unsigned long long seed() {
  const char* s = std::getenv("ATTNRANK_BENCH_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 12345ULL;
}

Eigen::MatrixXd gaussian(Eigen::Index r, Eigen::Index c, double scale, unsigned long long salt) {
  std::mt19937_64 rng(seed() * 1000003 + salt);
  std::normal_distribution<double> g;
  Eigen::MatrixXd m(r, c);
  for (auto& x : m.reshaped()) x = static_cast<float>(scale * g(rng));
  return m;
}

struct Head {
  Eigen::MatrixXd Q, K, V;
};

const Head& head(Eigen::Index n, Eigen::Index d) {
  static Head h;
  if (h.Q.rows() != n || h.Q.cols() != d) h = {gaussian(n, d, 1, 1), gaussian(n, d, 1, 2), gaussian(n, d, 1, 3)};
  return h;
}

void attention_certified_double(benchmark::State& state) {
  const Head& h = head(state.range(0), state.range(1));
  const ScaleBounds s = ScaleBounds::inverse_sqrt(h.Q.cols());
  double width = 0;
  for (auto _ : state) {
    const BoundsMatrix B = certified_attention(h.Q, h.K, h.V, s);
    width = (B.hi - B.lo).maxCoeff();
    benchmark::DoNotOptimize(B.lo.data());
  }
  state.counters["max_width"] = width;
}

struct Layer {
  MultiHeadAttention<double> layer;
  Eigen::MatrixXd X;
};

const Layer& layer(Eigen::Index n, Eigen::Index d_model, Eigen::Index heads) {
  static std::unique_ptr<Layer> l;
  if (!l || l->X.rows() != n || l->layer.shape().d_model != d_model) {
    const double w = 1 / std::sqrt(static_cast<double>(d_model));
    l = std::make_unique<Layer>(Layer{MultiHeadAttention<double>(gaussian(d_model, d_model, w, 4), gaussian(d_model, d_model, w, 5),
                                                                 gaussian(d_model, d_model, w, 6), gaussian(d_model, d_model, w, 7), heads),
                                      gaussian(n, d_model, 1, 8)});
  }
  return *l;
}

void layer_double(benchmark::State& state) {
  const Layer& l = layer(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) benchmark::DoNotOptimize(l.layer.forward(l.X).output.data());
}

void layer_certified_double(benchmark::State& state) {
  const Layer& l = layer(state.range(0), state.range(1), state.range(2));
  double width = 0;
  for (auto _ : state) {
    const CertifiedDoubleTrace t = certified_double_forward(l.layer, l.X);
    width = (t.output.hi - t.output.lo).maxCoeff();
    benchmark::DoNotOptimize(t.output.lo.data());
  }
  state.counters["max_width"] = width;
}

void write_npy(const std::filesystem::path& p, const Eigen::MatrixXd& m) {
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(m.rows()) + ", " +
                     std::to_string(m.cols()) + "), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::ofstream f(p, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(dict.size());
  f.put(static_cast<char>(len & 0xff)).put(static_cast<char>(len >> 8));
  f << dict;
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r = m;
  f.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(sizeof(double) * r.size()));
}

}  // namespace

BENCHMARK(attention_certified_double)->Args({4096, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(layer_double)->Args({128, 512, 8})->Args({4096, 64, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(layer_certified_double)->Args({128, 512, 8})->Args({4096, 64, 1})->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  std::cerr << "seed ATTNRANK_BENCH_SEED=" << seed() << "\n";
  // What the attnrank command does (cli/main.cpp): keep freed memory, so that the
  // 134 MB score matrices at N = 4096 are not fresh page-faulting mmaps every pass.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (argc == 3 && std::string(argv[1]) == "--write-inputs") {
    std::filesystem::create_directories(argv[2]);
    const Head& h = head(4096, 64);
    write_npy(std::filesystem::path(argv[2]) / "q.npy", h.Q);
    write_npy(std::filesystem::path(argv[2]) / "k.npy", h.K);
    write_npy(std::filesystem::path(argv[2]) / "v.npy", h.V);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
