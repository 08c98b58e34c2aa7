// The analyses' cheap reading path (analysis/rank_analysis.hpp,
// analysis/svd_analysis.hpp, io/double_tensor.hpp read_binary_doubles): a binary
// array read straight into doubles gives exactly the answer its rationals give,
// and everything that is not such an array goes to the exact reader.
#include "array_support.hpp"
#include "support.hpp"

#include <attnrank/analysis.hpp>
#include <attnrank/io/double_tensor.hpp>

#include <filesystem>
#include <fstream>
#include <random>

using namespace attnrank;
using attnrank::test::double_bits;
using attnrank::test::npy_bytes;
using attnrank::test::raw_bytes;

namespace {

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("attnrank-inputs-" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

/// An .npy of float64 in C order holding M.
std::string npy_of(const Eigen::MatrixXd& M, const std::string& name) {
  std::string data;
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) data += raw_bytes(double_bits(M(i, j)), 8);
  return write_file(name, npy_bytes("<f8", false, {std::size_t(M.rows()), std::size_t(M.cols())}, data));
}

/// Doubles with the nasty cases: rank deficiency, huge and tiny magnitudes, zeros, subnormals.
Eigen::MatrixXd gen_doubles() {
  const auto rows = *rc::gen::inRange<Eigen::Index>(1, 9), cols = *rc::gen::inRange<Eigen::Index>(1, 9);
  const auto rank = *rc::gen::inRange<Eigen::Index>(0, std::min(rows, cols) + 1);
  Eigen::MatrixXd L(rows, std::max<Eigen::Index>(rank, 1)), R(std::max<Eigen::Index>(rank, 1), cols);
  for (Eigen::Index i = 0; i < L.size(); ++i) L(i) = *rc::gen::inRange(-8, 9);
  for (Eigen::Index i = 0; i < R.size(); ++i) R(i) = *rc::gen::inRange(-8, 9);
  Eigen::MatrixXd M = rank == 0 ? Eigen::MatrixXd::Zero(rows, cols) : Eigen::MatrixXd(L * R);
  const double scale = *rc::gen::element(1.0, 1e-300, 1e300, 4.9e-324, 0.1);
  return M * scale;
}

}  // namespace

TEST_CASE("attnrank::analyze_rank and analyze_svd on doubles", "[property]") {
  rc::prop("certified rank of doubles is the certified rank of the rationals they denote", [] {
    const Eigen::MatrixXd M = gen_doubles();
    Matrix<Rational> Q(M.rows(), M.cols());
    for (Eigen::Index i = 0; i < M.size(); ++i) Q(i) = Rational(M(i));
    RankQuestion q;
    q.mode = RankMode::certified;
    const RankAnalysis a = analyze_rank(M, q), b = analyze_rank(Q, q);
    RC_ASSERT(a.certified->lower == b.certified->lower);
    RC_ASSERT(a.certified->upper == b.certified->upper);
    RC_ASSERT(to_json(a) == to_json(b));
    q.mode = RankMode::exact;  // the other modes take the rationals
    RC_ASSERT(to_json(analyze_rank(M, q)) == to_json(analyze_rank(Q, q)));
  });
  rc::prop("certified singular values of doubles are those of their rationals", [] {
    const Eigen::MatrixXd M = gen_doubles();
    Matrix<Rational> Q(M.rows(), M.cols());
    for (Eigen::Index i = 0; i < M.size(); ++i) Q(i) = Rational(M(i));
    const SvdQuestion q{std::nullopt, true, "M"};
    RC_ASSERT(to_json(analyze_svd(M, q)) == to_json(analyze_svd(Q, q)));
  });
}

TEST_CASE("attnrank::read_binary_doubles", "[unit]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> g;
  Eigen::MatrixXd M(5, 3);
  for (Eigen::Index i = 0; i < M.size(); ++i) M(i) = g(rng);
  const std::string npy = npy_of(M, "m.npy");
  SECTION("an .npy of floats is read as the doubles it stores, the same numbers as the exact reader's") {
    const std::optional<Eigen::MatrixXd> d = read_binary_doubles(npy);
    REQUIRE(d);
    CHECK(*d == M);
    const Matrix<Rational> exact = read_matrix_argument(npy);
    for (Eigen::Index i = 0; i < M.size(); ++i) CHECK(Rational((*d)(i)) == exact(i));
  }
  SECTION("text, specs, selections, stdin and bad files go to the exact reader") {
    CHECK_FALSE(read_binary_doubles(write_file("m.csv", "1,2\n3,4\n")));
    CHECK_FALSE(read_binary_doubles("diag:3:0.8"));
    CHECK_FALSE(read_binary_doubles(npy + "[0]"));
    CHECK_FALSE(read_binary_doubles("-"));
    CHECK_FALSE(read_binary_doubles("/nonexistent/m.npy"));
    const Eigen::MatrixXd bad = Eigen::MatrixXd::Constant(2, 2, std::nan(""));
    const std::string nan_npy = npy_of(bad, "nan.npy");
    CHECK_FALSE(read_binary_doubles(nan_npy));
    // ... where the exact reader names the problem.
    RankQuestion certified;
    certified.mode = RankMode::certified;
    CHECK(attnrank::test::input_error_message([&] { analyze_rank_argument(nan_npy, certified); })
              .find("nan.npy") != std::string::npos);
  }
  SECTION("the argument entry points answer as the matrix entry points") {
    RankQuestion rq;
    rq.mode = RankMode::certified;
    CHECK(to_json(analyze_rank_argument(npy, rq)) == to_json(analyze_rank(read_matrix_argument(npy), rq)));
    const SvdQuestion sq{2, false, "m"};
    CHECK(to_json(analyze_svd_argument(npy, sq)) == to_json(analyze_svd(read_matrix_argument(npy), sq)));
    CHECK(to_json(analyze_rank_argument("diag:4:0.7", rq)) == to_json(analyze_rank(read_matrix_argument("diag:4:0.7"), rq)));
  }
}
