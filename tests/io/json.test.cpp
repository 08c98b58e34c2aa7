// Tests for attnrank/io/json.hpp: matrices written as JSON read back as the same
// values -- doubles bit for bit, rationals exactly.
#include "support.hpp"

#include <attnrank/io/json.hpp>
#include <attnrank/io/parse.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

using namespace attnrank;
using attnrank::test::gen_matrix;

namespace {
std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
}  // namespace

TEST_CASE("attnrank::matrix_json and rational_matrix_json") {
  SECTION("shape: one array per row, empty matrices are empty arrays") {
    CHECK(matrix_json(Eigen::MatrixXd(0, 0)).dump() == "[]");
    const nlohmann::json j = matrix_json(Eigen::MatrixXd::Zero(2, 3));
    REQUIRE(j.size() == 2);
    CHECK(j[0].size() == 3);
    CHECK(j[1][2].is_number());
  }
  SECTION("the nasty doubles: subnormal, extreme, negative zero") {
    Eigen::MatrixXd M(1, 5);
    M << std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max(), -0.0, 0.1,
        -std::numeric_limits<double>::min();
    const nlohmann::json back = nlohmann::json::parse(matrix_json(M).dump());
    for (Eigen::Index j = 0; j < M.cols(); ++j) CHECK(bits_of(back[0][j].get<double>()) == bits_of(M(0, j)));
  }
  rc::prop("a double matrix survives dump and parse bit for bit", [] {
    const auto r = *rc::gen::inRange<Eigen::Index>(0, 5), c = *rc::gen::inRange<Eigen::Index>(1, 5);
    Eigen::MatrixXd M(r, c);
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) {
        double x;
        do {
          const std::uint64_t b = *rc::gen::arbitrary<std::uint64_t>();
          std::memcpy(&x, &b, sizeof x);
        } while (!std::isfinite(x));  // JSON has no NaN or infinity
        M(i, j) = x;
      }
    const nlohmann::json back = nlohmann::json::parse(matrix_json(M).dump());
    RC_ASSERT(back.size() == static_cast<std::size_t>(r));
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) RC_ASSERT(bits_of(back[i][j].get<double>()) == bits_of(M(i, j)));
  });
  rc::prop("a rational matrix survives as exact strings", [] {
    const auto r = *rc::gen::inRange<Eigen::Index>(1, 5), c = *rc::gen::inRange<Eigen::Index>(1, 5);
    const Matrix<Rational> M = gen_matrix(r, c);
    const nlohmann::json back = nlohmann::json::parse(rational_matrix_json(M).dump());
    for (Eigen::Index i = 0; i < r; ++i)
      for (Eigen::Index j = 0; j < c; ++j) {
        RC_ASSERT(back[i][j].is_string());
        RC_ASSERT(parse_rational(back[i][j].get<std::string>()) == M(i, j));
      }
  });
}
