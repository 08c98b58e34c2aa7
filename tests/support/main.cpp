// Catch2 main shared by every test program. RapidCheck takes its seed from
// RC_PARAMS; when none is given we fix one (so CI runs are reproducible), put it
// in RC_PARAMS and print it, so every run says how to replay it:
//   RC_PARAMS="seed=<n>" ./build/tests/<program>
// ATTNRANK_RANDOM_SEED=1 draws a fresh seed instead (for exploratory runs).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

int main(int argc, char* argv[]) {
  const char* params = std::getenv("RC_PARAMS");
  std::string p = params ? params : "";
  if (p.find("seed=") == std::string::npos) {
    unsigned long long seed = 20261130ULL;
    if (std::getenv("ATTNRANK_RANDOM_SEED")) seed = std::random_device{}();
    p = (p.empty() ? "" : p + " ") + "seed=" + std::to_string(seed);
    setenv("RC_PARAMS", p.c_str(), 1);
  }
  std::cout << "RapidCheck parameters: RC_PARAMS=\"" << p << "\" (set RC_PARAMS to replay or lengthen)" << std::endl;
  return Catch::Session().run(argc, argv);
}
