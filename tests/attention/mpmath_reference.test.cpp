// An independent check: mpmath (Debian's python3-mpmath) computes the layer at 50
// digits from the same exact inputs, with and without masks; the MPFR tier at 200
// bits must agree.
#include "support.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace attnrank;

namespace {

void write_csv(const std::filesystem::path& p, const Matrix<Rational>& m) {
  std::ofstream f(p);
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    for (Eigen::Index j = 0; j < m.cols(); ++j) f << (j ? "," : "") << m(i, j).str();
    f << "\n";
  }
}

std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  REQUIRE(pclose(pipe) == 0);
  return out;
}

}  // namespace

TEST_CASE("attnrank::MultiHeadAttention agrees with an independent mpmath implementation", "[reference]") {
  REQUIRE(std::system("/usr/bin/python3 -c 'import mpmath' 2>/dev/null") == 0);  // scripts/install-deps installs it
  const unsigned seed = 4242;
  std::mt19937 rng(seed);
  INFO("seed " << seed);
  std::uniform_int_distribution<int> entry(-40, 40), size(1, 5), heads_dist(1, 3);
  const auto dir = std::filesystem::temp_directory_path() / ("attnrank-mpmath-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // Trials 6..11 add a mask (causal, or random with a key in every row) for every head.
  std::bernoulli_distribution coin(0.5);
  for (int trial = 0; trial < 12; ++trial) {
    const Eigen::Index n = size(rng), heads = heads_dist(rng), d_k = size(rng), d_v = size(rng), d_model = size(rng) + 1;
    auto random = [&](Eigen::Index r, Eigen::Index c) {
      Matrix<Rational> m(r, c);
      for (auto& x : m.reshaped()) x = Rational(entry(rng), 10);
      return m;
    };
    const auto X = random(n, d_model), wq = random(d_model, heads * d_k), wk = random(d_model, heads * d_k),
               wv = random(d_model, heads * d_v), wo = random(heads * d_v, d_model);
    const char* names[] = {"x.csv", "wq.csv", "wk.csv", "wv.csv", "wo.csv"};
    const Matrix<Rational>* mats[] = {&X, &wq, &wk, &wv, &wo};
    std::string cmd = "/usr/bin/python3 " ATTNRANK_SOURCE_DIR "/tests/reference/layer_mpmath.py 50 " + std::to_string(heads);
    for (int i = 0; i < 5; ++i) {
      write_csv(dir / names[i], *mats[i]);
      cmd += " " + (dir / names[i]).string();
    }
    std::vector<Mask> masks;
    if (trial >= 6) {
      Matrix<Rational> M(n, n);
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index j = 0; j < n; ++j) M(i, j) = trial % 2 == 0 ? Rational(j <= i) : Rational(coin(rng));
        M(i, std::uniform_int_distribution<Eigen::Index>(0, n - 1)(rng)) = 1;
      }
      masks.push_back(Mask::from_matrix(M, "mask"));
      write_csv(dir / "mask.csv", M);
      cmd += " " + (dir / "mask.csv").string();
    }
    std::istringstream reference(run(cmd));
    PrecisionScope scope(200);
    const MultiHeadAttention<Real> layer(from_rational<Real>(wq), from_rational<Real>(wk), from_rational<Real>(wv),
                                         from_rational<Real>(wo), heads);
    const auto t = layer.forward(from_rational<Real>(X), masks);
    for (Eigen::Index i = 0; i < t.output.rows(); ++i)
      for (Eigen::Index j = 0; j < t.output.cols(); ++j) {
        std::string text;
        REQUIRE(reference >> text);
        const Real ref(text);
        const Real diff = abs(Real(t.output(i, j) - ref));
        const Real scale = max(Real(1), abs(ref));
        INFO("trial " << trial << " entry (" << i << ", " << j << "): attnrank " << t.output(i, j).str(50)
                      << " mpmath " << text);
        CHECK(diff <= Real("1e-48") * scale);  // 50 significant digits from mpmath
      }
  }
  std::filesystem::remove_all(dir);
}
