#pragma once
// What the reach command's free and masked reports share (cli/reach_command.cpp,
// cli/reach_masked.cpp).

#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/approximate.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace attnrank::cli {

/// Above this n the error bounds are computed only when --epsilon asks.
inline constexpr Eigen::Index approx_default_limit = 512;

/// A certificate file, read strictly (parse_certificate).
nlohmann::json read_certificate_file(const std::string& path);

/// Whether every row of A sums exactly to 1. Softmax normalises rows, so the
/// verdict is about A / rowsums either way; the output says so when it matters.
bool rows_sum_to_one(const Matrix<Rational>& A);

/// The bounds on E* in a reach report's JSON: error_lower, error_upper (null
/// when none is proven), error_lower_reason, seed, the witness (witness_Q/K, or
/// witness_W_Q/W_K on embeddings), and epsilon with its verdict when asked.
void add_approximate_json(nlohmann::json& j, const ApproxBounds& b, std::uint64_t seed, bool embeddings,
                          std::optional<double> epsilon);

/// The line that answers --epsilon first, in the user's terms.
std::string epsilon_line(const ApproxBounds& b, double epsilon);

/// The reach command's options when --mask names a mask.
struct MaskedReachArguments {
  const Matrix<Rational>& A;
  const Mask& mask;
  std::string target, x, check, certificate, svg;
  long dk = 0;
  bool has_dk = false;
  unsigned bits = 53;
  bool has_epsilon = false;
  double epsilon = 0;
  std::uint64_t seed = 1;
  bool json = false;
};

/// reach --mask: the verdict, bounds, certificate, figure or check, as text or
/// JSON (input_error on bad input).
std::string run_masked_reach(const MaskedReachArguments& m);

}  // namespace attnrank::cli
