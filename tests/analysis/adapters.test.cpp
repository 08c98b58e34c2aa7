// What the adapters (the CLI, Python) take from the library instead of deciding
// themselves, tested here directly: the refinement options and their defaults,
// the enum parsers, the message conventions (entry_text, row_text), the sweep
// question, reading several files into one head stack, and the picture of a
// reach question. The CLI tests then only check parsing and printing.
#include "array_support.hpp"
#include "support.hpp"

#include <attnrank/analysis.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace attnrank;
using attnrank::test::input_error_message;

TEST_CASE("attnrank::refine_options", "[unit]") {
  SECTION("refine: nullopt is automatic, true always, false never") {
    CHECK(refine_options(std::nullopt, 2.0).policy == RefinePolicy::automatic);
    CHECK(refine_options(true, 2.0).policy == RefinePolicy::always);
    CHECK(refine_options(false, 2.0).policy == RefinePolicy::never);
  }
  SECTION("seconds: nullopt is the default's fixed work, no clock; given, the full search within them") {
    CHECK_FALSE(refine_options(std::nullopt, std::nullopt).time_limit);
    CHECK(refine_options(std::nullopt, std::nullopt).search_flops == default_search_flops);
    CHECK_FALSE(RefineOptions{}.time_limit);
    CHECK(RefineOptions{}.search_flops == default_search_flops);
    CHECK(default_search_flops < full_search_flops);
    CHECK(refine_options(std::nullopt, 0.5).time_limit == 0.5);
    CHECK(refine_options(std::nullopt, 0.5).search_flops == full_search_flops);
    for (double none : {0.0, std::numeric_limits<double>::infinity()}) {
      CHECK_FALSE(refine_options(std::nullopt, none).time_limit);
      CHECK(refine_options(std::nullopt, none).search_flops == full_search_flops);
    }
  }
  SECTION("negative or NaN seconds are refused in the question's words") {
    for (double bad : {-1.0, -0.0001, std::nan("")}) {
      const std::string m = input_error_message([&] { refine_options(std::nullopt, bad); });
      CHECK(m.rfind("time limit ", 0) == 0);
      CHECK(m.find("--") == std::string::npos);
    }
    CHECK(input_error_message([&] { refine_options(std::nullopt, -2.5); }).find("-2.5") != std::string::npos);
  }
}

TEST_CASE("attnrank enum parsers", "[unit]") {
  CHECK(fallback_policy_from_name("auto") == FallbackPolicy::automatic);
  CHECK(fallback_policy_from_name("never") == FallbackPolicy::never);
  CHECK(fallback_policy_from_name("always") == FallbackPolicy::always);
  CHECK(input_error_message([] { fallback_policy_from_name("sometimes"); }).find("'sometimes'") != std::string::npos);
  CHECK(mask_alignment_from_name("bottom-right") == MaskAlignment::bottom_right);
  CHECK(mask_alignment_from_name("top-left") == MaskAlignment::top_left);
  CHECK_FALSE(input_error_message([] { mask_alignment_from_name("centre"); }).empty());
  CHECK_FALSE(det_mode_is_certified("exact"));
  CHECK(det_mode_is_certified("certified"));
  CHECK(input_error_message([] { det_mode_is_certified("numeric"); }).find("'numeric'") != std::string::npos);
  CHECK(parse_rank_mode("numeric") == RankMode::numeric);
}

TEST_CASE("attnrank::entry_text", "[unit]") {
  CHECK(entry_text("A", 1, 2) == "A[1, 2] (0-based)");
  CHECK(row_text("x.npy[3]", 0) == "x.npy[3][0, :] (0-based)");
  SECTION("a target's bad entry is named 0-based, its value in decimal") {
    Matrix<Rational> A(2, 2);
    A << Rational(1, 2), Rational(1, 2), Rational(-9054133, 131072), Rational(1);
    const std::string m = input_error_message([&] { validate_target(A, "A"); });
    CHECK(m.rfind("A[1, 0] (0-based) is -69.07755279541016", 0) == 0);
    CHECK(m.find("/131072") == std::string::npos);
  }
}

TEST_CASE("attnrank::analyze_sweep", "[unit]") {
  SECTION("the tutorial's keys: only argmax and argmin k ever win, rows are probabilities") {
    const SweepAnalysis s = analyze_sweep(SweepQuestion{});
    const nlohmann::json j = to_json(s);
    CHECK(j["schema"] == "attnrank/sweep/1");
    CHECK(j["possible_winners"] == nlohmann::json({1, 2}));
    CHECK(j["rows"].size() == 5);
    for (const nlohmann::json& row : j["rows"]) {
      double sum = 0;
      for (const nlohmann::json& w : row["weights"]) sum += std::stod(w.get<std::string>());
      CHECK(std::abs(sum - 1) < 3e-4);  // each weight certified to 4 decimals
    }
    CHECK(j["rows"][2]["top"].empty());  // q = 0: the flat row
    CHECK(to_text(s).find("token 1, token 2") != std::string::npos);
  }
  SECTION("the causal mask at a position sees only the keys up to it") {
    SweepQuestion q;
    q.causal = true;
    q.position = 2;
    const nlohmann::json j = to_json(analyze_sweep(q));
    CHECK(j["position"] == 2);
    CHECK(j["rows"][0]["weights"][2] == "0.0000");
  }
  SECTION("bad questions, in the question's words") {
    SweepQuestion q;
    q.position = 2;
    CHECK(input_error_message([&] { analyze_sweep(q); }).rfind("a position needs the causal mask", 0) == 0);
    q.causal = true;
    q.position = 4;
    CHECK(input_error_message([&] { analyze_sweep(q); }).rfind("position 4 is outside 1..3", 0) == 0);
    SweepQuestion r;
    r.queries = "0:1:0";
    CHECK(input_error_message([&] { analyze_sweep(r); }).find("the step must not be 0") != std::string::npos);
    r.queries = "0:20001:1";
    CHECK(input_error_message([&] { analyze_sweep(r); }).find("more than 10001 values") != std::string::npos);
    r.queries = "1:0:1";
    CHECK(input_error_message([&] { analyze_sweep(r); }).find("goes away from TO") != std::string::npos);
    SweepQuestion k;
    k.keys = "1,x";
    CHECK(input_error_message([&] { analyze_sweep(k); }).rfind("keys: 'x'", 0) == 0);
  }
}

TEST_CASE("attnrank::read_head_stack", "[unit]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnrank-head-stack-test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, std::size_t heads) {
    std::string data;
    for (std::size_t h = 0; h < heads; ++h)
      for (double v : {0.75, 0.25, 0.5, 0.5}) {
        std::uint64_t bits;
        std::memcpy(&bits, &v, 8);
        data += attnrank::test::raw_bytes(bits, 8);
      }
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << attnrank::test::npy_bytes("<f8", false, {heads, 2, 2}, data);
    return path;
  };
  const std::string a = write("a.npy", 3), b = write("b.npy", 3);
  const HeadStack one = read_head_stack({a});
  CHECK(one.size() == 3);
  CHECK(one.patterns.empty());  // read when the scan asks, not held
  CHECK(one.shape == std::vector<std::size_t>{3, 2, 2});
  const HeadStack two = read_head_stack({a, b});
  CHECK(two.size() == 6);
  CHECK(two.shape == std::vector<std::size_t>{2, 3, 2, 2});
  CHECK(two.index[4] == std::vector<std::size_t>{1, 1});
  Eigen::MatrixXd expected(2, 2);
  expected << 0.75, 0.25, 0.5, 0.5;
  for (std::size_t t = 0; t < two.size(); ++t) CHECK(two.pattern(t) == expected);
  // A NaN in the last head of the second file: named when the scan reads it, before any head is computed.
  std::string data;
  for (std::size_t h = 0; h < 3; ++h)
    for (double v : {0.75, 0.25, h == 2 ? std::nan("") : 0.5, 0.5}) {
      std::uint64_t bits;
      std::memcpy(&bits, &v, 8);
      data += attnrank::test::raw_bytes(bits, 8);
    }
  const std::string c = (dir / "c.npy").string();
  std::ofstream(c, std::ios::binary) << attnrank::test::npy_bytes("<f8", false, {3, 2, 2}, data);
  const HeadStack bad = read_head_stack({a, c});
  const std::string message = input_error_message([&] { analyze_scan(bad, ScanQuestion{}); });
  CHECK(message.find(c + "[2][1, 0] (0-based) is nan") != std::string::npos);
  CHECK_FALSE(input_error_message([] { read_head_stack({}); }).empty());
}

TEST_CASE("attnrank::reach_picture", "[unit]") {
  const Matrix<Rational> A = *builtin_matrix("diag:5:0.6");
  ReachQuestion q;
  q.dk = 2;
  const ReachAnalysis r = analyze_reach(A, q);
  const ReachPicture p = reach_picture(A, std::nullopt, r);
  CHECK(p.dk == 2);
  REQUIRE(p.pattern);
  CHECK(p.pattern->rows() == 5);
  // the quoted head's pattern is a softmax: rows of probabilities
  CHECK((p.pattern->rowwise().sum().array() - 1).abs().maxCoeff() < 1e-12);
  CHECK(p.caption.find(to_string(r.verdict())) != std::string::npos);
  CHECK(p.spectrum.size() > 0);
}

TEST_CASE("attnrank::analyze_det", "[unit]") {
  Matrix<Rational> M(2, 2);
  M << Rational(1, 3), Rational(2), Rational(-1), Rational(5, 7);
  const Rational exact = M(0, 0) * M(1, 1) - M(0, 1) * M(1, 0);  // 47/21
  const DetAnalysis e = analyze_det(M, DetQuestion{false, 53, 17, "M"});
  REQUIRE(e.exact);
  CHECK(*e.exact == exact);
  CHECK(to_json(e)["det"] == "47/21");
  const DetAnalysis c = analyze_det(M, DetQuestion{true, 53, 17, "M"});
  const nlohmann::json j = to_json(c);
  CHECK(std::stod(j["det_lower"].get<std::string>()) <= exact.convert_to<double>());
  CHECK(std::stod(j["det_upper"].get<std::string>()) >= exact.convert_to<double>());
  CHECK(input_error_message([&] { analyze_det(Matrix<Rational>(M.topRows(1)), DetQuestion{}); })
            .find("needs a square matrix") != std::string::npos);
  CHECK(input_error_message([&] { analyze_det(M, DetQuestion{false, 128, 17, "M"}); }) ==
        "bits belongs to the certified mode");
}

TEST_CASE("attnrank::analyze_layer", "[unit]") {
  // One head of width 1 on two tokens: softmax rows of the exact scores, in the double tier.
  Matrix<Rational> X(2, 1), W(1, 1);
  X << Rational(1), Rational(-1);
  W << Rational(1);
  const MultiHeadAttention<Rational> layer(W, W, W, W, 1);
  LayerQuestion q;
  q.tier = LayerTier::double_precision;
  q.for_json = true;
  const nlohmann::json j = to_json(analyze_layer(layer, X, q));
  CHECK(j["schema"] == "attnrank/layer/1");
  const double e2 = std::exp(2.0);  // token 0: scores (1, -1), weights e / (e + 1/e)
  CHECK(std::abs(std::stod(j["A"][0][0][0].get<std::string>()) - e2 / (e2 + 1)) < 1e-15);
  SECTION("three masks for two heads, or zero heads, are the library's errors") {
    const MultiHeadAttention<Rational> two(Matrix<Rational>::Identity(2, 2), Matrix<Rational>::Identity(2, 2),
                                           Matrix<Rational>::Identity(2, 2), Matrix<Rational>::Identity(2, 2), 2);
    Matrix<Rational> X2 = Matrix<Rational>::Identity(2, 2);
    LayerQuestion three = q;
    three.masks.assign(3, Mask::causal(2));
    CHECK(input_error_message([&] { analyze_layer(two, X2, three); }) ==
          "3 masks for 2 heads: give one mask for every head, or one per head");
    CHECK(input_error_message([&] { MultiHeadAttention<Rational>(W, W, W, W, 0); })
              .find("the number of heads h must be at least 1 (got 0)") != std::string::npos);
  }
}

TEST_CASE("attnrank::layer_format", "[unit]") {
  CHECK_FALSE(layer_format(std::nullopt, std::nullopt));
  CHECK(layer_format(3, std::nullopt)->kind == DecimalFormat::Kind::decimals);
  CHECK(layer_format(3, std::nullopt)->count == 3);
  CHECK(layer_format(std::nullopt, 17)->kind == DecimalFormat::Kind::significant);
  CHECK(layer_format(0, std::nullopt)->count == 0);
  CHECK(layer_format(std::nullopt, max_printed_digits)->count == max_printed_digits);
  CHECK(input_error_message([] { layer_format(3, 4); }) == "give digits (decimals) or significant digits, not both");
  CHECK(input_error_message([] { layer_format(-1, std::nullopt); }) == "digits -1 is outside [0, 1000]");
  CHECK(input_error_message([] { layer_format(std::nullopt, 0); }) == "significant 0 is outside [1, 1000]");
  CHECK(input_error_message([] { layer_format(max_printed_digits + 1, std::nullopt); }) ==
        "digits 1001 is outside [0, 1000]");
}

TEST_CASE("attnrank::upper_bound_json", "[unit]") {
  for (double x : {1.0 / 3, 2.0 / 3, 1e-300, 5e-324, 1.7976931348623157e308, 0.1}) {
    // strtod, not stod: a subnormal bound reads back with ERANGE, which stod throws on
    CHECK(std::strtod(upper_bound_json(x).get<std::string>().c_str(), nullptr) >= x);
    CHECK(std::strtod(lower_bound_json(x).get<std::string>().c_str(), nullptr) <= x);
  }
  CHECK(upper_bound_json(INFINITY).is_null());
  CHECK(lower_bound_json(-INFINITY).is_null());
}

TEST_CASE("attnrank::render_table", "[unit]") {
  const TextMatrix m{{"1", "-0.25"}, {"10", "3"}};
  CHECK(render_table(m, {"a", "bb"}, 1) == " a    1  -0.25\n bb  10      3\n");  // right-aligned columns
  CHECK(text_matrix_json(m) == nlohmann::json::array({nlohmann::json::array({"1", "-0.25"}), nlohmann::json::array({"10", "3"})}));
}
