// The attnrank command end to end: outputs, JSON contract, exit codes, errors.
#include "reference_values.hpp"
#include "cli_support.hpp"
#include "support.hpp"

#include <attnrank/numbers/decimal.hpp>
#include <nlohmann/json.hpp>

#include "array_support.hpp"

#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>

using namespace attnrank;
using namespace attnrank::test;
namespace fs = std::filesystem;

/// A number of the JSON: certified bounds are decimal strings, other values numbers.
static double num(const nlohmann::json& v) { return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>(); }

TEST_CASE("attnrank example") {
  SECTION("text: every step, labelled, with the tutorial's two decimals") {
    const Run r = attnrank_cli("example");
    REQUIRE(r.code == 0);
    CHECK(r.err.empty());
    for (const char* s : {"Step 1 - project to full width", "Step 7 - W^O does the mixing", "I     0.67  0.16  0.16",
                          "love  0.14  0.28  0.58", "love  1.73  0.18  0.58  0.28", "LLMs  0.75  1.31  0.41  1.87",
                          "certified to 2 decimals"})
      CHECK_THAT(r.out, Catch::Contains(s));
  }
  SECTION("JSON: the contract's keys, exact integers and certified digits") {
    const Run r = attnrank_cli("example --json --digits 40");
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    for (const char* key : {"Q", "K", "V", "scores", "A", "Z", "concat", "output"}) CHECK(j.contains(key));
    CHECK(j["Q"][1] == std::vector<std::string>{"1", "2", "0", "1"});
    CHECK(j["scores"][1][2][2] == "4");
    CHECK(j["A"].size() == 2);
    CHECK(j["certified"] == true);
    for (std::size_t row = 0; row < 3; ++row)
      for (std::size_t col = 0; col < 4; ++col) {
        const Rational got = parse_rational(j["output"][row][col].get<std::string>());
        const Rational want = parse_rational(test::reference::output[row][col]);
        CHECK(abs(Rational(got - want)) <= Rational(1, Integer("1" + std::string(39, '0'))));
      }
  }
  SECTION("--digits 0 and bad digits") {
    CHECK(attnrank_cli("example --digits 0").code == 0);
    expect_input_error("example --digits -1", "--digits");
    expect_input_error("example --digits abc", "--digits");
  }
}

TEST_CASE("attnrank layer") {
  SECTION("the worked example from files, in every tier") {
    for (const char* tier : {"interval", "mp", "double", "certified-double"}) {
      const Run r = attnrank_cli("layer " + worked_example_args() + " --heads 2 --digits 2 --json --tier " + tier);
      INFO("tier " << tier << ": " << r.err);
      REQUIRE(r.code == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["tier"] == tier);
      CHECK(j["output"][0] == std::vector<std::string>{"1.01", "1.01", "0.83", "1.50"});
      CHECK(j["concat"][1] == std::vector<std::string>{"1.73", "0.18", "0.58", "0.28"});
    }
  }
  SECTION("certified-double hands over to the interval tier when doubles cannot certify the digits, and says so") {
    const Run r = attnrank_cli("layer " + worked_example_args() + " --heads 2 --digits 20 --json --tier certified-double");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["tier"] == "interval");
    CHECK_THAT(j["fallback"].get<std::string>(), Catch::Contains("did not round to 20 decimals"));
    const auto i = nlohmann::json::parse(attnrank_cli("layer " + worked_example_args() + " --heads 2 --digits 20 --json").out);
    CHECK(j["output"] == i["output"]);
    CHECK_THAT(attnrank_cli("layer " + worked_example_args() + " --heads 2 --digits 20 --tier certified-double").out,
               Catch::Contains("Note: ") && Catch::Contains("interval tier (MPFI)"));
  }
  SECTION("--json round-trips by default: 17 significant digits, so weights far below 1e-6 keep their value") {
    const std::string x = file("x_peaked.csv", "3,0,0,0\n0,3,0,0\n0,0,3,0\n0,0,0,3\n3,3,0,0\n");
    const std::string w = file("w_peaked.csv", "2,0,0,0\n0,2,0,0\n0,0,2,0\n0,0,0,2\n");
    const std::string args = "layer --x " + x + " --wq " + w + " --wk " + w + " --wv " + w + " --wo " + w + " --heads 2";
    const auto d = nlohmann::json::parse(attnrank_cli(args + " --json --tier double").out);
    const auto i = nlohmann::json::parse(attnrank_cli(args + " --json").out);
    const auto six = nlohmann::json::parse(attnrank_cli(args + " --json --digits 6").out);
    CHECK(i["notation"] == "significant");
    CHECK(i["digits"] == 17);
    CHECK(six["notation"] == "decimals");
    int tiny = 0;
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t r = 0; r < 5; ++r)
        for (std::size_t c = 0; c < 5; ++c) {
          const double dv = std::strtod(d["A"][h][r][c].get<std::string>().c_str(), nullptr);
          const double iv = std::strtod(i["A"][h][r][c].get<std::string>().c_str(), nullptr);
          INFO("head " << h << " (" << r << ", " << c << "): " << d["A"][h][r][c] << " vs " << i["A"][h][r][c]);
          CHECK(iv > 0);  // softmax never gives 0; fixed decimals did
          CHECK(std::abs(dv - iv) <= 1e-12 * iv);  // the double tier agrees to its own accuracy
          // The double tier's strings are its doubles exactly: 17 digits read back bit for bit.
          CHECK(format_decimal(to_rational(dv), DecimalFormat::significant(17)) == d["A"][h][r][c].get<std::string>());
          if (iv < 5e-7) {
            ++tiny;
            CHECK(six["A"][h][r][c] == "0.000000");
          }
        }
    CHECK(tiny > 0);  // the trap the default avoids is present in this layer
    CHECK_THAT(attnrank_cli(args).out, Catch::Contains("certified to 6 decimals"));
    expect_input_error(args + " --digits 3 --significant 5", "--significant");
    expect_input_error(args + " --significant 0", "--significant");
  }
  SECTION("text output names the shape") {
    const Run r = attnrank_cli("layer " + worked_example_args() + " --heads 2");
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("d_model = 4, h = 2, d_k = 2, d_v = 2"));
  }
  SECTION("one head of full width") {
    const Run r = attnrank_cli("layer " + worked_example_args() + " --heads 1 --json");
    REQUIRE(r.code == 0);
    CHECK(nlohmann::json::parse(r.out)["d_k"] == 4);
  }
}

TEST_CASE("attnrank bad input: exit 2, a message naming the problem, nothing on stdout") {
  const std::string w = file("w4.csv", "1,0,0,0\n0,1,0,0\n0,0,1,0\n0,0,0,1\n");
  const std::string good = " --wq " + w + " --wk " + w + " --wv " + w + " --wo " + w;
  expect_input_error("layer --x /nonexistent.csv" + good + " --heads 2", "/nonexistent.csv: no such file");
  expect_input_error("layer --x " + file("ragged.csv", "1,2,3,4\n1,2\n") + good + " --heads 2",
                     "line 2 has 2 columns, but line 1 has 4");
  expect_input_error("layer --x " + file("text.csv", "1,2,3,4\n1,two,3,4\n") + good + " --heads 2",
                     "text.csv: line 2, column 2: 'two' is not a number");
  expect_input_error("layer --x " + file("nan.csv", "1,2,3,nan\n") + good + " --heads 2", "column 4");
  expect_input_error("layer --x " + file("empty.csv", "") + good + " --heads 2", "no matrix rows");
  expect_input_error("layer --x " + file("x3.csv", "1,2,3\n") + good + " --heads 2",
                     "X is 1 x 3 but the weights expect d_model = 4 columns");
  expect_input_error("layer --x " + file("x4.csv", "1,2,3,4\n") + good + " --heads 3", "not divisible by h = 3");
  expect_input_error("layer --x " + file("x4b.csv", "1,2,3,4\n") + " --wq " + file("w43.csv", "1,2,3\n1,2,3\n1,2,3\n1,2,3\n") +
                         " --wk " + w + " --wv " + w + " --wo " + w + " --heads 1",
                     "W^K is 4 x 4 but W^Q is 4 x 3");
  expect_input_error("layer --x " + file("x4c.csv", "1,2,3,4\n") + good + " --heads 0", "--heads");
  expect_input_error("layer --x " + file("x4d.csv", "1,2,3,4\n") + good, "--heads is required");
  expect_input_error("layer --x " + file("x4e.csv", "1,2,3,4\n") + good + " --heads 2 --tier quad", "--tier");
  expect_input_error("layer --x " + file("x4f.csv", "1,2,3,4\n") + good + " --heads 2 --bits 5", "--bits");
  expect_input_error("example --no-such-option", "--no-such-option");
  expect_input_error("frobnicate", "frobnicate");
  expect_input_error("reach diag:3:0.8 --d_k 2", "did you mean --dk instead of --d_k?");
  expect_input_error("reach diag:3:0.8 --dk 1 --epsilom 0.1", "did you mean --epsilon instead of --epsilom?");
  expect_input_error("help frobnicate", "unknown command 'frobnicate'");
  expect_input_error("layer --x " + file("big.csv", "1e999,0,0,0\n") + good + " --heads 2 --tier double",
                     "X[0, 0] (0-based) is not finite");
}

TEST_CASE("attnrank --help and --version exit 0 on stdout") {
  const Run help = attnrank_cli("--help");
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("example") && Catch::Contains("layer"));
  CHECK(attnrank_cli("--version").out == "attnrank 0.1.0\n");
  // No arguments, and help: every command with one line each.
  for (const char* args : {"", "help"}) {
    const Run list = attnrank_cli(args);
    CHECK(list.code == 0);
    CHECK(list.err.empty());
    for (const char* command : {"example", "layer", "rank", "det", "reach", "svd", "width", "sweep", "appendix"})
      CHECK_THAT(list.out, Catch::Contains(std::string("\n  ") + command + " "));
  }
  const Run reach_help = attnrank_cli("help reach");
  CHECK(reach_help.code == 0);
  CHECK_THAT(reach_help.out, Catch::Contains("--dk") && Catch::Contains("REQUIRED unless --check"));
}

TEST_CASE("attnrank: matrices from .npy, safetensors, text of every kind and stdin") {
  const std::string in = std::string(ATTNRANK_SOURCE_DIR) + "/tests/cli/inputs/";
  // The same 2 x 2 pattern written three ways as 0.7, 0.3, ... is one exact determinant, 3/10.
  for (const char* f : {"space-separated.csv", "header.csv", "pandas-index.csv"}) {
    const Run r = attnrank_cli("det " + in + f);
    INFO(f);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("det = 3/10"));
  }
  // NumPy's savetxt writes 19 digits of the doubles nearest 0.7, ...: not 3/10, read as written.
  for (const char* f : {"pattern.tsv", "savetxt-default.txt"}) {
    const Run r = attnrank_cli("det " + in + f);
    INFO(f);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("det = 2999999999999999556000000000000012321/10000000000000000000000000000000000000"));
  }
  // Notes go to stderr, stdout stays the answer.
  const Run tsv = attnrank_cli("rank " + in + "pattern.tsv --json");
  CHECK(tsv.code == 0);
  CHECK_THAT(tsv.err, Catch::Contains("attnrank: note: ") && Catch::Contains("tab-separated"));
  CHECK(nlohmann::json::parse(tsv.out)["rank_lower"] == 2);
  // Standard input, text and .npy alike.
  CHECK_THAT(attnrank_cli("det - < " + in + "header.csv").out, Catch::Contains("det = 3/10"));
  const Run npy_in = attnrank_cli("rank - < " + in + "heads-4d.npy");
  CHECK(npy_in.code == 2);
  CHECK_THAT(npy_in.err, Catch::Contains("<stdin>: shape (2, 2, 2, 2)"));
  // A head of a 4-D array and a tensor of a safetensors file are the same matrix.
  const Run a = attnrank_cli("det " + in + "heads-4d.npy[0,1]"), b = attnrank_cli("det " + in + "attention.safetensors:blocks.0.attn[1]");
  CHECK(a.code == 0);
  CHECK(a.out == b.out);
}

TEST_CASE("attnrank layer: PyTorch's layout, by --torch-layout and by --state-dict") {
  // The worked example's weights (attnrank's layout, in x out), and their transposes as PyTorch keeps them.
  const int wq[4][4] = {{0, -1, 1, 1}, {0, 1, 0, 0}, {1, 0, 0, -1}, {1, 1, 0, 1}};
  const int wk[4][4] = {{0, -1, 0, 1}, {-1, 1, 0, 0}, {1, -1, 1, -1}, {1, 1, 0, 1}};
  const int wv[4][4] = {{0, 0, 1, 0}, {1, 0, 0, 1}, {0, 1, 0, 0}, {1, 0, 0, 0}};
  const int wo[4][4] = {{0, 0, 1, 1}, {1, 1, 0, 0}, {0, 1, -1, 1}, {1, 0, 0, 0}};
  const auto transposed_csv = [](const int (&w)[4][4]) {
    std::string s;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) s += std::to_string(w[j][i]) + (j < 3 ? "," : "\n");
    return s;
  };
  const auto transposed_f64 = [](const int (&w)[4][4]) {
    std::string s;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) s += attnrank::test::raw_bytes(attnrank::test::double_bits(w[j][i]), 8);
    return s;
  };
  const std::string x = " --x " + file("sd-x.csv", "0,0,1,1\n0,1,0,1\n1,0,0,1\n") + " --heads 2 --tier double --json";
  const Run reference = attnrank_cli("layer" + x + " " + worked_example_args().substr(worked_example_args().find("--wq")));
  REQUIRE(reference.code == 0);
  const auto output = [](const Run& r) { return nlohmann::json::parse(r.out)["output"]; };
  const Run torch_layout = attnrank_cli("layer" + x + " --torch-layout --wq " + file("tq.csv", transposed_csv(wq)) +
                                        " --wk " + file("tk.csv", transposed_csv(wk)) + " --wv " +
                                        file("tv.csv", transposed_csv(wv)) + " --wo " + file("to.csv", transposed_csv(wo)));
  REQUIRE(torch_layout.code == 0);
  CHECK(output(torch_layout) == output(reference));
  const std::string state = file("mha.safetensors", attnrank::test::safetensors_bytes(
      {{"attn.in_proj_weight", "F64", {12, 4}, transposed_f64(wq) + transposed_f64(wk) + transposed_f64(wv)},
       {"attn.out_proj.weight", "F64", {4, 4}, transposed_f64(wo)}}));
  const Run from_state = attnrank_cli("layer" + x + " --state-dict " + state + ":attn.");
  REQUIRE(from_state.code == 0);
  CHECK(output(from_state) == output(reference));
  expect_input_error("layer" + x + " --state-dict " + state, "no in_proj_weight");
  expect_input_error("layer" + x + " --state-dict " + state + ":attn. --wq " + file("q.csv", "1\n"), "excludes");
  expect_input_error("layer" + x, "--wq, --wk, --wv and --wo, or --state-dict");
}

TEST_CASE("attnrank rank") {
  const std::string singular = file("singular.csv", "1,2,3\n4,5,6\n7,8,9\n");
  SECTION("exact: equal bounds, with the proof's pivots") {
    const Run r = attnrank_cli("rank " + singular + " --json");
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["mode"] == "exact");
    CHECK(j["rank_lower"] == 2);
    CHECK(j["rank_upper"] == 2);
    CHECK(j["certificate"]["kernel_dimension"] == 1);
    CHECK_THAT(attnrank_cli("rank " + singular).out, Catch::Contains("rank = 2 (exact, 3 x 3)"));
  }
  SECTION("exact mode reads decimals and fractions as rationals") {
    const Run r = attnrank_cli("rank " + file("dec.csv", "0.1,0.2\n1/3,2/3\n") + " --json");
    CHECK(nlohmann::json::parse(r.out)["rank_lower"] == 1);
  }
  SECTION("certified: honest bounds, tightened by --bits") {
    // Hilbert 24 (condition number ~1e34) is past both double tests, not past MPFI at 128 bits.
    auto j = nlohmann::json::parse(attnrank_cli("rank hilbert:24 --mode certified --json").out);
    CHECK(j["mode"] == "certified");
    CHECK(j["rank_lower"] < 24);
    CHECK(j["rank_upper"] == 24);
    j = nlohmann::json::parse(attnrank_cli("rank hilbert:24 --mode certified --bits 128 --json").out);
    CHECK(j["rank_lower"] == 24);
    CHECK(num(j["certificate"]["residual_bound"]) < 1);
    CHECK_THAT(attnrank_cli("rank hilbert:24 --mode certified").out, Catch::Contains("Raise the precision (bits)"));
    // Hilbert 14 (~1e19) is past one double stage, within two.
    j = nlohmann::json::parse(attnrank_cli("rank hilbert:14 --mode certified --json").out);
    CHECK(j["rank_lower"] == 14);
    CHECK(j["method"] == "double-double");
    CHECK(j["bits"] == 106);
    CHECK_THAT(attnrank_cli("rank hilbert:14 --mode certified").out, Catch::Contains("two stages"));
    const auto d = nlohmann::json::parse(attnrank_cli("det hilbert:14 --mode certified --json").out);
    CHECK(d["preconditioned"] == true);
    CHECK(d["method"] == "double-double");
  }
  SECTION("numeric: singular values, tolerance and gap, marked uncertified") {
    const auto j = nlohmann::json::parse(attnrank_cli("rank " + singular + " --mode numeric --json").out);
    // not proven, so not named as the proven bounds are
    CHECK(j["approx_rank_lower"] == 2);
    CHECK(j["approx_rank_upper"] == 2);
    CHECK_FALSE(j.contains("rank_lower"));
    CHECK(j["certified"] == false);
    CHECK(j["singular_values"].size() == 3);
    CHECK(j["gap"] > 1e10);
    const auto t = nlohmann::json::parse(attnrank_cli("rank diag:40:0.5 --mode numeric --top 2 --json").out);
    CHECK(t["top_singular_values"].size() == 2);
    CHECK(t["distance_to_rank_k"]["k"] == 2);
  }
}

TEST_CASE("attnrank det") {
  SECTION("exact: p/q") {
    const auto j = nlohmann::json::parse(attnrank_cli("det diag:3:0.8 --json").out);
    CHECK(j["det"] == "49/100");
    CHECK_THAT(attnrank_cli("det diag:3:0.8").out, Catch::Contains("det = 49/100"));
  }
  SECTION("certified: decimal bounds around the exact value, and widths") {
    const auto j = nlohmann::json::parse(attnrank_cli("det diag:3:0.8 --mode certified --json").out);
    CHECK(j["preconditioned"] == true);
    CHECK(parse_rational(j["det_lower"].get<std::string>()) <= Rational(49, 100));
    CHECK(Rational(49, 100) <= parse_rational(j["det_upper"].get<std::string>()));
    CHECK(j.contains("width"));
    const auto s = nlohmann::json::parse(attnrank_cli("det " + file("sing.csv", "1,2\n2,4\n") + " --mode certified --json").out);
    CHECK(s["preconditioned"] == false);
    CHECK(parse_rational(s["det_lower"].get<std::string>()) <= 0);
    CHECK(0 <= parse_rational(s["det_upper"].get<std::string>()));
  }
}

TEST_CASE("attnrank rank and det: bad input exits 2 with a precise message") {
  expect_input_error("rank /nonexistent.csv", "/nonexistent.csv: no such file");
  expect_input_error("rank " + file("r_ragged.csv", "1,2\n3\n"), "line 2 has 1 columns, but line 1 has 2");
  expect_input_error("rank " + file("r_text.csv", "1,x\n"), "line 1, column 2: 'x' is not a number");
  expect_input_error("rank " + file("r_empty.csv", "# nothing\n"), "no matrix rows");
  expect_input_error("rank " + file("r_nan.csv", "1,nan\n") + " --mode certified", "column 2");
  expect_input_error("rank " + file("r_inf.csv", "inf,1\n") + " --mode numeric", "column 1");
  expect_input_error("rank " + file("r_huge.csv", "1e400,1\n1,1\n") + " --mode numeric", "beyond the double range");
  expect_input_error("det " + file("r_rect.csv", "1,2,3\n4,5,6\n"), "needs a square matrix, this one is 2 x 3");
  expect_input_error("det " + file("r_rect2.csv", "1,2,3\n4,5,6\n") + " --mode certified", "needs a square matrix");
  expect_input_error("rank diag:1:0.5", "size '1' must be an integer in [2, 8192]");
  expect_input_error("rank diag:3:1.5", "P must be in [0, 1]");
  expect_input_error("rank diag:3", "must be diag:N:P");
  expect_input_error("rank hilbert:99999", "size '99999'");
  expect_input_error("rank hilbert:3 --mode fuzzy", "--mode");
  expect_input_error("rank hilbert:3 --top 2", "top and tol belong to the numeric mode");
  expect_input_error("rank hilbert:3 --mode numeric --top 5", "top 5 needs top + 1 < min(rows, cols) = 3");
  expect_input_error("det hilbert:3 --bits 128", "bits belongs to the certified mode");
  expect_input_error("det hilbert:3 --mode numeric", "--mode");
  expect_input_error("rank", "MATRIX is required");
}

TEST_CASE("attnrank reach and sweep") {
  SECTION("the tutorial's target at d_k = 1 and 2, JSON per the contract") {
    const auto one = nlohmann::json::parse(attnrank_cli("reach diag:3:0.8 --dk 1 --json").out);
    for (const char* key : {"schema", "n", "d_k", "floor_lower", "floor_upper", "verdict", "max_abs_error", "question", "certificate"})
      CHECK(one.contains(key));
    CHECK(one["verdict"] == "unreachable");
    CHECK(one["floor_lower"] == 2);
    CHECK(one["question"] == "free");
    const auto two = nlohmann::json::parse(attnrank_cli("reach diag:3:0.8 --dk 2 --json").out);
    CHECK(two["verdict"] == "reachable");
    CHECK(num(two["max_abs_error"]) < 1e-14);
    CHECK_THAT(attnrank_cli("reach diag:3:0.8 --dk 1").out,
               Catch::Contains("verdict: unreachable") && Catch::Contains("ceiling  rank(Q K^T) <= d_k = 1"));
  }
  SECTION("certificates: written, checked, tampering and other targets rejected") {
    const std::string cert = (scratch() / "cert.json").string();
    REQUIRE(attnrank_cli("reach diag:4:0.7 --dk 2 --certificate " + cert).code == 0);
    const Run ok = attnrank_cli("reach --check " + cert + " diag:4:0.7");
    CHECK(ok.code == 0);
    CHECK_THAT(ok.out, Catch::Contains("certificate valid"));
    std::string text = slurp(cert);
    const auto pos = text.find("\"dk\": 2");
    REQUIRE(pos != std::string::npos);
    text.replace(pos, 7, "\"dk\": 1");
    const std::string tampered = file("tampered.json", text);
    expect_input_error("reach --check " + tampered + " diag:4:0.7", "certificate rejected");
    expect_input_error("reach --check " + cert + " diag:4:0.6", "for a different target");
    expect_input_error("reach --check " + file("notjson.json", "{oops") + " diag:4:0.7", "not valid JSON");
  }
  SECTION("sweep: Figure 8's rows and the winners") {
    const auto j = nlohmann::json::parse(attnrank_cli("sweep --keys 2,0,1 --q -2:2:1 --json").out);
    REQUIRE(j["rows"].size() == 5);
    CHECK(j["rows"][4]["weights"][0] == "0.8668");
    CHECK(j["rows"][2]["top"].empty());
    CHECK(j["possible_winners"] == nlohmann::json::array({1, 2}));
  }
  SECTION("bad input") {
    expect_input_error("reach " + file("neg.csv", "0.5,0.5\n-0.1,1.1\n") + " --dk 1", "neg.csv[1, 0] (0-based) is -0.1: attention weights cannot be negative");
    expect_input_error("reach " + file("nan2.csv", "0.5,nan\n0.5,0.5\n") + " --dk 1", "column 2");
    expect_input_error("reach " + file("rect.csv", "0.5,0.5,0\n0.5,0.5,0\n") + " --dk 1", "must be square");
    expect_input_error("reach " + file("zrow.csv", "0,0\n0.5,0.5\n") + " --dk 1", "zrow.csv[0, :] (0-based) is all zeros");
    expect_input_error("reach diag:3:0.8 --dk 0", "d_k = 0 is out of range");
    expect_input_error("reach diag:3:0.8 --dk 4", "d_k = 4 is out of range");
    expect_input_error("reach diag:3:0.8", "--dk is required");
    expect_input_error("sweep --q 1:2:0", "step must not be 0");
    expect_input_error("sweep --keys 1,x", "keys: 'x' is not a number");
  }
}

TEST_CASE("attnrank reach --epsilon, width and svd") {
  SECTION("reach: error bounds by default, the epsilon verdict first when asked") {
    const auto j = nlohmann::json::parse(attnrank_cli("reach diag:3:0.8 --dk 1 --json").out);
    for (const char* key : {"error_lower", "error_upper", "error_lower_reason", "seed", "witness_Q", "witness_K"})
      CHECK(j.contains(key));
    CHECK_FALSE(j.contains("epsilon_verdict"));
    CHECK(num(j["error_lower"]) > 0.05);
    CHECK(num(j["error_lower"]) <= 0.35);  // E* = 0.35 (tests/reach/approximate.test.cpp)
    CHECK(num(j["error_upper"]) >= 0.35);
    CHECK(num(j["error_upper"]) <= num(j["max_abs_error"]));
    const auto e = nlohmann::json::parse(attnrank_cli("reach diag:3:0.8 --dk 1 --epsilon 0.2 --json").out);
    CHECK(e["epsilon_verdict"] == "undecided");
    CHECK(e["verdict"] == "unreachable");  // the exact verdict stays
    const std::string text = attnrank_cli("reach diag:3:0.8 --dk 1 --epsilon 0.01").out;
    CHECK(text.rfind("epsilon 0.01: not_within", 0) == 0);  // leads with the question asked
    CHECK_THAT(text, Catch::Contains("verdict: unreachable") && Catch::Contains("how close: "));
  }
  SECTION("reach: the certificate carries the bounds, and the checker re-proves them") {
    const std::string cert = (scratch() / "cert_eps.json").string();
    REQUIRE(attnrank_cli("reach diag:4:0.7 --dk 1 --epsilon 0.2 --certificate " + cert).code == 0);
    const auto c = nlohmann::json::parse(slurp(cert));
    CHECK(c["format"] == "attnrank-reach-certificate/3");
    CHECK(c["approximate"]["epsilon_verdict"] == "undecided");
    CHECK(num(c["approximate"]["error_lower"]) > 0);
    CHECK_THAT(attnrank_cli("reach --check " + cert + " diag:4:0.7").out, Catch::Contains("the approximate bounds re-proven"));
  }
  SECTION("reach --x --epsilon: bounds for heads on fixed embeddings, weights as the witness") {
    const std::string x = file("emb_eps.csv", "1,0\n0,1\n1,1\n2,-1\n"), cert = (scratch() / "cert_x_eps.json").string();
    const auto j = nlohmann::json::parse(attnrank_cli("reach diag:4:0.7 --dk 2 --x " + x + " --epsilon 0.1 --json").out);
    CHECK(j["question"] == "embeddings");
    CHECK(j["witness_W_Q"].size() == 2);
    CHECK(num(j["error_lower"]) <= num(j["error_upper"]));
    CHECK(j["certificate"]["approximate"].contains("weights"));
    REQUIRE(attnrank_cli("reach diag:4:0.7 --dk 2 --x " + x + " --epsilon 0.1 --certificate " + cert).code == 0);
    CHECK(attnrank_cli("reach --check " + cert + " diag:4:0.7 --x " + x).code == 0);
  }
  SECTION("width: the bracket, the profile, the figure") {
    const std::string svg = (scratch() / "width.svg").string();
    const Run r = attnrank_cli("width diag:3:0.8 --epsilon 0.2 --json --svg " + svg);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["width_lower"] == 1);
    CHECK(j["width_upper"] == 2);
    REQUIRE(j["profile"].size() == 3);
    CHECK(j["profile"][0]["d_k"] == 1);
    CHECK(num(j["profile"][1]["error_upper"]) < 1e-14);
    const std::string figure = slurp(svg);
    CHECK_THAT(figure, Catch::Contains("<svg") && Catch::Contains("class=\"band\""));
    CHECK_THAT(attnrank_cli("width diag:3:0.8 --epsilon 0.2").out, Catch::Contains("1 <= d_k <= 2"));
    // The cheap band alone: never below the searched bounds; the same lower bounds.
    const auto fast = nlohmann::json::parse(attnrank_cli("width diag:3:0.8 --epsilon 0.2 --no-search --json").out);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(num(fast["profile"][i]["error_upper"]) >= num(j["profile"][i]["error_upper"]));
      CHECK(fast["profile"][i]["error_lower"] == j["profile"][i]["error_lower"]);
    }
    CHECK_THAT(attnrank_cli("width diag:3:0.8 --epsilon 0.2 --no-search").out,
               Catch::Contains("search off") || Catch::Contains("settle the bracket"));
    expect_input_error("reach diag:3:0.8 --dk 1 --no-search --refine", "--refine excludes --no-search");
  }
  SECTION("svd: certified bounds as decimal strings, gaps when asked") {
    const auto j = nlohmann::json::parse(attnrank_cli("svd hilbert:4 --top 4 --gaps --json").out);
    REQUIRE(j["singular_values"].size() == 4);
    // sigma_1 of the 4 x 4 Hilbert matrix = 1.500214280059243...
    const double lo = std::stod(j["singular_values"][0]["lower"].get<std::string>());
    const double hi = std::stod(j["singular_values"][0]["upper"].get<std::string>());
    CHECK(lo <= 1.500214280059243);
    CHECK(hi >= 1.500214280059243);
    CHECK(hi - lo < 1e-13);
    CHECK(j["basis"] == "full");
    REQUIRE(j["gaps"].size() == 3);
    CHECK(j["gaps"][0].is_string());
    CHECK_THAT(attnrank_cli("svd hilbert:4 --top 2").out, Catch::Contains("sigma_2 in ["));
  }
}

TEST_CASE("attnrank reach --x (fixed embeddings)") {
  const std::string x = file("emb.csv", "0,0,1,1\n0,1,0,1\n1,0,0,1\n");
  const auto j = nlohmann::json::parse(attnrank_cli("reach diag:3:0.8 --dk 2 --x " + x + " --json").out);
  CHECK(j["question"] == "embeddings");
  CHECK(j["x_full_row_rank"] == true);
  CHECK(j["verdict"] == "reachable");
  CHECK(j["W_Q"].size() == 4);
  CHECK_THAT(attnrank_cli("reach diag:3:0.8 --dk 2 --x " + x).out, Catch::Contains("X has full row rank"));
  expect_input_error("reach diag:3:0.8 --dk 1 --x " + file("emb2.csv", "1,2\n3,4\n"), "have 2 rows, but the target has n = 3");
}

TEST_CASE("attnrank reach --x: certificates need the same X") {
  const std::string x = file("x31.csv", "1\n2\n3\n"), cert = (scratch() / "cert_x.json").string();
  REQUIRE(attnrank_cli("reach diag:3:0.8 --dk 1 --x " + x + " --certificate " + cert).code == 0);
  CHECK(attnrank_cli("reach --check " + cert + " diag:3:0.8 --x " + x).code == 0);
  expect_input_error("reach --check " + cert + " diag:3:0.8", "check it with the same embeddings X");
  expect_input_error("reach --check " + cert + " diag:3:0.8 --x " + file("x31b.csv", "1\n2\n4\n"), "different embeddings X");
}

TEST_CASE("attnrank: the outside audit's classes, end to end") {
  const std::string inputs = ATTNRANK_SOURCE_DIR "/tests/cli/inputs/";
  SECTION("a singular certified determinant is a true enclosure, never [nan, nan]") {
    for (const char* bits : {"53", "64", "128"}) {
      INFO("--bits " << bits);
      const Run r = attnrank_cli("det " + inputs + "audit-singular.csv --mode certified --json --bits " + bits);
      REQUIRE(r.code == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(parse_rational(j["det_lower"].get<std::string>()) <= 0);
      CHECK(0 <= parse_rational(j["det_upper"].get<std::string>()));
      CHECK_THAT(r.out, !Catch::Contains("nan"));
    }
  }
  SECTION("targets beyond the double range: finite witnesses, valid certificates, no nan in the picture") {
    const std::string tiny = file("tiny.csv", "3e-4000,1,1\n1,3e-4000,1\n1,1,3e-4000\n");
    for (const std::string& target : {inputs + "scaled-rows.csv", tiny}) {
      INFO(target);
      const std::string svg = (scratch() / "beyond.svg").string(), cert = (scratch() / "beyond.json").string();
      const Run r = attnrank_cli("reach " + target + " --dk 1 --json --svg " + svg + " --certificate " + cert);
      REQUIRE(r.code == 0);
      const auto j = nlohmann::json::parse(r.out);
      REQUIRE(j["max_abs_error"].is_string());  // a certified bound: a decimal string rounded up
      CHECK(num(j["max_abs_error"]) < 1);
      CHECK_THAT(slurp(svg), !Catch::Contains("nan"));
      CHECK(attnrank_cli("reach " + target + " --check " + cert).code == 0);
    }
    const auto scaled = nlohmann::json::parse(attnrank_cli("reach " + inputs + "scaled-rows.csv --dk 1 --json").out);
    CHECK(scaled["verdict"] == "reachable");
    CHECK(num(scaled["max_abs_error"]) < 1e-15);  // rows are rescaled exactly before any double
  }
  SECTION("fixed embeddings: the JSON and certificate numbers are each for their own object") {
    const std::string a = inputs + "two.csv", x = inputs + "x-2x4.csv", cert = (scratch() / "emb.json").string();
    const auto j = nlohmann::json::parse(attnrank_cli("reach " + a + " --dk 1 --x " + x + " --json --certificate " + cert).out);
    // the text and key describe the weights: the certificate's double, rounded up to 17 digits
    CHECK(num(j["max_abs_error"]) >= j["certificate"]["weights"]["max_abs_error"].get<double>());
    CHECK(num(j["max_abs_error"]) <= j["certificate"]["weights"]["max_abs_error"].get<double>() * (1 + 1e-15));
    const Run check = attnrank_cli("reach " + a + " --check " + cert + " --x " + x);
    CHECK(check.code == 0);
    const std::string worked = ATTNRANK_SOURCE_DIR "/examples/data/worked-example/x.csv";
    REQUIRE(attnrank_cli("reach diag:3:0.8 --dk 2 --x " + worked + " --certificate " + cert).code == 0);
    CHECK(attnrank_cli("reach diag:3:0.8 --check " + cert + " --x " + worked).code == 0);
  }
  SECTION("verdicts say they are about the entries as written, with the witness error beside them") {
    // softmax of rank-2 scores written with 17 digits: exactly, no head of width 2
    // makes these decimals; a width-2 head comes within ~1e-16.
    const std::string t = file("rounded.csv",
                               "0.21194155761708544,0.57611688476582912,0.21194155761708544\n"
                               "0.33333333333333333,0.33333333333333333,0.33333333333333334\n"
                               "0.09003057317038046,0.24472847105479767,0.66524095577482187\n");
    for (const char* bits : {"53", "256"}) {
      const Run r = attnrank_cli(std::string("reach ") + t + " --dk 1 --bits " + bits);
      REQUIRE(r.code == 0);
      INFO(r.out);
      CHECK_THAT(r.out, Catch::Contains("these entries exactly") && Catch::Contains("head comes within"));
      if (r.out.find("to settle it:") != std::string::npos)
        CHECK_THAT(r.out, Catch::Contains("settles exact producibility only"));
    }
  }
#ifndef ATTNRANK_SANITIZED  // minutes at -O0 under ASan; the normal run covers it
  SECTION("large n: the diagonal target at the tutorial's practical size answers, never an internal error") {
    const Run r = attnrank_cli("reach diag:512:0.8 --dk 64 --json");
    REQUIRE(r.code == 0);
    CHECK(nlohmann::json::parse(r.out)["verdict"] == "unreachable");
    CHECK(attnrank_cli("reach diag:400:0.8 --dk 12 --full-floor").code == 0);
  }
#endif
  SECTION("small wrong things: sweep labels, tiny exact determinants") {
    const Run s = attnrank_cli("sweep --q -2.9935,-2.9931 --digits 6");
    CHECK_THAT(s.out, Catch::Contains("q = -2.9935:") && Catch::Contains("q = -2.9931:"));
    CHECK_THAT(attnrank_cli("sweep --q 1/3,1").out, Catch::Contains("q = 1/3:") && Catch::Contains("q = 1.00:"));
    CHECK_THAT(attnrank_cli("det hilbert:8").out, Catch::Contains("~ 2.7370501137915130e-33 (rounded to 17 significant digits)"));
    CHECK(nlohmann::json::parse(attnrank_cli("det hilbert:8 --json").out)["det_decimal"] == "2.7370501137915130e-33");
  }
}

#ifndef ATTNRANK_SANITIZED
TEST_CASE("attnrank out of memory: a message and exit 1, never an abort") {
  // Under a 600 MB address-space limit an exact rank of hilbert:3000 cannot get
  // its GMP limbs (or Eigen its arrays); either way the process must say so.
  const std::string cmd = "ulimit -v 600000; exec " + std::string(ATTNRANK_CLI) + " rank hilbert:3000";
  const auto out = scratch() / "oom.out", err = scratch() / "oom.err";
  const int status = std::system(("bash -c '" + cmd + "' >" + out.string() + " 2>" + err.string()).c_str());
  INFO(slurp(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_THAT(slurp(err), Catch::StartsWith("attnrank: out of memory") && Catch::Contains("rank hilbert:3000"));
  CHECK(slurp(out).empty());
}
#endif

TEST_CASE("attnrank masks: layer, example and reach") {
  const std::string causal4 = file("causal4.csv",
                                   "1,0,0,0\n0.3,0.7,0,0\n0.2,0.5,0.3,0\n0.1,0.2,0.3,0.4\n");
  SECTION("reach --mask causal: the decoder question, floor floor(n/2), JSON with the mask and the blocks") {
    const auto j = nlohmann::json::parse(attnrank_cli("reach " + causal4 + " --mask causal --dk 1 --json").out);
    CHECK(j["mask"] == "causal");
    CHECK(j["floor_lower"] == 2);
    CHECK(j["floor_upper"] == 2);
    CHECK(j["verdict"] == "unreachable");
    CHECK(j["nested"] == true);
    CHECK(j["blocks"].size() == 4);
    CHECK(j["overlaps"].size() == 3);
    const auto two = nlohmann::json::parse(attnrank_cli("reach " + causal4 + " --mask causal --dk 2 --json").out);
    CHECK(two["verdict"] == "reachable");
    CHECK(num(two["max_abs_error"]) < 1e-12);
    const auto eps = nlohmann::json::parse(attnrank_cli("reach " + causal4 + " --mask causal --dk 1 --epsilon 0.001 --json").out);
    CHECK(num(eps["error_lower"]) <= num(eps["error_upper"]));
    CHECK(num(eps["error_upper"]) <= num(eps["max_abs_error"]));  // the search starts from the witness
    CHECK(eps["epsilon_verdict"] != "within");  // unreachable at d_k = 1, and the rows are far from one-key patterns
    CHECK_THAT(attnrank_cli("reach " + causal4 + " --mask causal --dk 2").out,
               Catch::Contains("mask causal") && Catch::Contains("blocks B_k") && Catch::Contains("verdict: reachable"));
  }
  SECTION("without --mask a causal pattern answers as before, with a note pointing at --mask causal") {
    const Run r = attnrank_cli("reach " + causal4 + " --dk 2");
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("verdict: unreachable") && Catch::Contains("with the causal mask (mask = causal) the question is the decoder's"));
    const auto j = nlohmann::json::parse(attnrank_cli("reach " + causal4 + " --dk 2 --json").out);
    CHECK(j["mask"] == "none");
    CHECK_THAT(j["note"].get<std::string>(), Catch::Contains("causal pattern"));
  }
  SECTION("a mask file: 0/1 pattern, its fingerprint in the JSON") {
    const std::string window = file("window.csv", "1,0,0\n1,1,0\n0,1,1\n");
    const std::string target = file("window_target.csv", "1,0,0\n0.5,0.5,0\n0,0.25,0.75\n");
    const auto j = nlohmann::json::parse(attnrank_cli("reach " + target + " --mask " + window + " --dk 1 --json").out);
    CHECK(j["mask"].get<std::string>().rfind("pattern:", 0) == 0);
    CHECK(j["nested"] == false);
  }
  SECTION("bad masks and targets: exit 2 naming file, row and column") {
    expect_input_error("reach " + causal4 + " --mask " + file("half.csv", "1,0,0,0\n1,0.5,0,0\n1,1,1,0\n1,1,1,1\n") + " --dk 1",
                       "half.csv[1, 1] (0-based) is 0.5");
    expect_input_error("reach " + causal4 + " --mask " + file("empty_row.csv", "1,0,0,0\n0,0,0,0\n1,1,1,0\n1,1,1,1\n") + " --dk 1",
                       "[1, :] (0-based) allows no key");
    expect_input_error("reach " + causal4 + " --mask " + file("small.csv", "1,0\n1,1\n") + " --dk 1", "the mask is 2 x 2");
    expect_input_error("reach diag:4:0.7 --mask causal --dk 1", "[0, 1] (0-based) is 0.1 at a masked position");
    expect_input_error("reach " + causal4 + " --mask causal --dk 1 --x " + file("x3rows.csv", "1,0\n0,1\n1,1\n"),
                       "x3rows.csv: the embeddings X have 3 rows");
    expect_input_error("reach " + causal4 + " --mask causal --dk 1 --epsilon 2", "epsilon 2 is outside [0, 1]");
    expect_input_error("reach " + causal4 + " --mask nosuchfile.csv --dk 1", "nosuchfile.csv");
  }
  SECTION("reach --mask: the certificate records the mask and checks; the figure; width with a mask") {
    const std::string cert = (scratch() / "masked_cert.json").string(), svg = (scratch() / "masked.svg").string();
    const Run r = attnrank_cli("reach " + causal4 + " --mask causal --dk 1 --certificate " + cert + " --svg " + svg);
    REQUIRE(r.code == 0);
    const auto c = nlohmann::json::parse(slurp(cert));
    CHECK(c["question"] == "masked");
    CHECK(c["mask"] == "causal");
    CHECK(c["blocks"].size() == 4);
    CHECK(c.contains("approximate"));
    CHECK_THAT(attnrank_cli("reach " + causal4 + " --mask causal --check " + cert).out,
               Catch::StartsWith("certificate valid") && Catch::Contains("mask causal"));
    expect_input_error("reach " + causal4 + " --check " + cert, "check it with the same mask");
    expect_input_error("reach " + causal4 + " --mask " + file("all_ones.csv", "1,1,1,1\n1,1,1,1\n1,1,1,1\n1,1,1,1\n") +
                           " --check " + cert,
                       "is for mask causal");
    const auto j = nlohmann::json::parse(attnrank_cli("reach " + causal4 + " --mask causal --dk 1 --json").out);
    CHECK(j["certificate"]["question"] == "masked");
    const std::string figure = slurp(svg);
    CHECK_THAT(figure, Catch::Contains("<svg") && Catch::Contains("mask causal") && Catch::Contains("largest fully allowed block"));
    CHECK(figure.find("nan") == std::string::npos);
    const auto w = nlohmann::json::parse(attnrank_cli("width " + causal4 + " --mask causal --epsilon 1e-6 --json").out);
    CHECK(w["mask"] == "causal");
    CHECK(w["width_upper"] == 2);  // floor 2: a masked width-2 head makes it exactly
    CHECK(w["width_lower"] <= 2);
    REQUIRE(w["profile"].size() == 4);
    for (std::size_t k = 1; k < 4; ++k) {  // E* is non-increasing in d_k: so are both bounds
      CHECK(num(w["profile"][k]["error_upper"]) <= num(w["profile"][k - 1]["error_upper"]));
      CHECK(num(w["profile"][k]["error_lower"]) <= num(w["profile"][k - 1]["error_lower"]));
    }
    CHECK_THAT(attnrank_cli("width " + causal4 + " --mask causal --epsilon 1e-6").out, Catch::Contains("mask causal (masked heads)"));
    expect_input_error("width diag:4:0.7 --mask causal --epsilon 0.1", "at a masked position");
  }
  SECTION("reach --mask --x: a masked head on fixed embeddings, its certificate checked with the same X and mask") {
    const std::string thin = file("x_thin.csv", "1,0\n0,1\n1,1\n2,-1\n"),
                      full = file("x_full.csv", "2,0,0,0,1\n0,2,0,0,1\n0,0,2,0,1\n0,0,0,2,1\n"),
                      cert = (scratch() / "masked_x_cert.json").string();
    const auto j = nlohmann::json::parse(attnrank_cli("reach " + causal4 + " --mask causal --dk 2 --x " + thin + " --json").out);
    CHECK(j["question"] == "embeddings");
    CHECK(j["x_full_row_rank"] == false);
    CHECK(j["verdict"] == "undecided");  // floor 2 <= d_k, and X has rank 2 < 4
    CHECK(j["W_Q"].size() == 2);
    CHECK(j["certificate"]["question"] == "masked_embeddings");
    CHECK(num(j["error_lower"]) <= num(j["error_upper"]));
    const auto one = nlohmann::json::parse(attnrank_cli("reach " + causal4 + " --mask causal --dk 1 --x " + thin + " --json").out);
    CHECK(one["verdict"] == "unreachable");  // below the free masked floor, whatever X
    REQUIRE(attnrank_cli("reach " + causal4 + " --mask causal --dk 2 --x " + full + " --certificate " + cert).code == 0);
    const Run check = attnrank_cli("reach " + causal4 + " --mask causal --x " + full + " --check " + cert);
    CHECK(check.code == 0);
    CHECK_THAT(check.out, Catch::Contains("re-proven from the target and X"));
    expect_input_error("reach " + causal4 + " --mask causal --x " + thin + " --check " + cert, "different embeddings X");
    expect_input_error("reach " + causal4 + " --mask causal --check " + cert, "check it with the same embeddings X");
    CHECK_THAT(attnrank_cli("reach " + causal4 + " --mask causal --dk 2 --x " + full).out,
               Catch::Contains("verdict: reachable") && Catch::Contains("X has full row rank"));
  }
  SECTION("layer --mask and example --mask causal: masked scores print as masked, weights exactly 0") {
    const auto j = nlohmann::json::parse(attnrank_cli("layer " + worked_example_args() + " --heads 2 --mask causal --json").out);
    CHECK(j["mask"] == "causal");
    CHECK(j["scaled_scores"][0][0][1] == "masked");
    CHECK(j["A"][1][0][2] == "0");
    CHECK(j["A"][0][0][0] == "1.0000000000000000e+00");
    const auto e = nlohmann::json::parse(attnrank_cli("example --mask causal --json").out);
    CHECK(e["mask"] == "causal");
    CHECK(e["A"][0][1][0] == "0.20");
    const auto two = nlohmann::json::parse(
        attnrank_cli("layer " + worked_example_args() + " --heads 2 --tier double --mask causal --mask none --json").out);
    CHECK(two["mask"] == "per-head");
    CHECK(two["head_masks"] == nlohmann::json::array({"causal", "none"}));
    CHECK(two["scaled_scores"][1][0][1] != "masked");
    expect_input_error("layer " + worked_example_args() + " --heads 2 --mask causal --mask causal --mask causal",
                       "3 masks for 2 heads: give one mask for every head, or one per head");
  }
  SECTION("sweep --mask causal: the query at a position sees the keys up to it; the running records win") {
    const auto j = nlohmann::json::parse(attnrank_cli("sweep --mask causal --position 2 --q 1 --json").out);
    CHECK(j["rows"][0]["weights"][2] == "0.0000");
    CHECK(j["rows"][0]["weights"][0] == "0.8808");
    CHECK(j["possible_winners"] == nlohmann::json::array({1, 2}));
    CHECK(j["causal_possible_winners"] == nlohmann::json::array({1, 2}));
    expect_input_error("sweep --mask causal --position 4", "position 4 is outside 1..3");
    expect_input_error("sweep --position 2", "a position needs the causal mask");
  }
}

namespace {

/// An (H, N, d) float32 .npy file of the given matrices (C order).
std::string npy_f32(const std::string& name, const std::vector<Eigen::MatrixXd>& heads) {
  std::string data;
  for (const Eigen::MatrixXd& m : heads)
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) data += raw_bytes(float_bits(static_cast<float>(m(i, j))), 4);
  const auto p = scratch() / name;
  std::ofstream(p, std::ios::binary)
      << npy_bytes("<f4", false, {heads.size(), static_cast<std::size_t>(heads[0].rows()), static_cast<std::size_t>(heads[0].cols())}, data);
  return p.string();
}

/// A float64 .npy file of the values in C order: shape (n,), or `shape` when given.
std::string npy_f64_vector(const std::string& name, const std::vector<double>& values,
                           std::vector<std::size_t> shape = {}) {
  std::string data;
  for (double x : values) data += raw_bytes(double_bits(x), 8);
  if (shape.empty()) shape = {values.size()};
  const auto p = scratch() / name;
  std::ofstream(p, std::ios::binary) << npy_bytes("<f8", false, shape, data);
  return p.string();
}

}  // namespace

TEST_CASE("attnrank check-kernel") {
  // Two heads of 6 tokens, d = 4; the candidate is the double attention rounded to float32.
  std::vector<Eigen::MatrixXd> q, k, v, out;
  for (int h = 0; h < 2; ++h) {
    Eigen::MatrixXd Q(6, 4), K(6, 4), V(6, 4);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 4; ++j) {
        Q(i, j) = static_cast<float>(((i * 7 + j * 3 + h) % 11) / 5.0 - 1);
        K(i, j) = static_cast<float>(((i * 5 + j * 2 + h) % 13) / 6.0 - 1);
        V(i, j) = static_cast<float>(((i * 3 + j * 7 + h) % 9) / 4.0 - 1);
      }
    Eigen::MatrixXd S = Q * K.transpose() / 2.0;  // 1/sqrt(4)
    for (int i = 0; i < 6; ++i) S.row(i) = (S.row(i).array() - S.row(i).maxCoeff()).exp() / (S.row(i).array() - S.row(i).maxCoeff()).exp().sum();
    q.push_back(Q);
    k.push_back(K);
    v.push_back(V);
    out.push_back(S * V);
  }
  const std::string args = "check-kernel --q " + npy_f32("q.npy", q) + " --k " + npy_f32("k.npy", k) + " --v " +
                           npy_f32("v.npy", v) + " --candidate " + npy_f32("o.npy", out);
  SECTION("JSON: bounds on the error, its place, the method") {
    const Run r = attnrank_cli(args + " --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["schema"] == "attnrank/check-kernel/1");
    CHECK(j["shape"] == std::vector<int>{2, 6, 4});
    CHECK(j["method"] == "double");
    const auto& c = j["candidate"];
    CHECK(num(c["max_abs_error_lower"]) > 0);  // float32 rounding is a real error
    CHECK(num(c["max_abs_error_lower"]) <= num(c["max_abs_error_upper"]));
    CHECK(num(c["max_abs_error_upper"]) < 1e-6);
    CHECK(c["worst"]["head"].get<int>() < 2);
    CHECK(c["dtype"] == "float32");
  }
  SECTION("a reference: the ratio of the two errors, and the masked question") {
    const Run r = attnrank_cli(args + " --reference " + npy_f32("r.npy", out) + " --mask causal --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["mask"] == "causal");
    CHECK(num(j["ratio_lower"]) <= num(j["ratio_upper"]));
  }
  SECTION("--max-error: exit 3 only when the error is proven larger, with the report on stdout") {
    const Run over = attnrank_cli(args + " --max-error 1e-12");
    CHECK(over.code == 3);
    CHECK_THAT(over.out, Catch::Contains("exceeded"));
    CHECK(attnrank_cli(args + " --max-error 0.01").code == 0);
  }
  SECTION("--rtol and --max-ratio: proven verdicts in the JSON, exit 3 only when proven exceeded, misuse exit 2") {
    const Run within = attnrank_cli(args + " --max-error 1e-12 --rtol 0.01 --json");
    INFO(within.err);
    REQUIRE(within.code == 0);
    const auto j = nlohmann::json::parse(within.out);
    CHECK(j["max_error_verdict"] == "within");
    CHECK(j["rtol"] == "0.01");
    // The output against itself as the reference: the ratio is exactly 1.
    const std::string pair = args + " --reference " + npy_f32("o.npy", out);
    const Run one = attnrank_cli(pair + " --max-ratio 2 --json");
    REQUIRE(one.code == 0);
    CHECK(nlohmann::json::parse(one.out)["max_ratio_verdict"] == "within");
    const Run below = attnrank_cli(pair + " --max-ratio 0.5");
    CHECK(below.code == 3);
    CHECK_THAT(below.out, Catch::Contains("max_ratio 0.5: exceeded"));
    expect_input_error(args + " --rtol 0.1", "rtol needs max_error");
    expect_input_error(args + " --max-ratio 2", "max_ratio needs a reference");
    expect_input_error(pair + " --max-ratio -1", "is not a non-negative number");
  }
  SECTION("a NaN or an infinity in an output is a finding: an infinite error at its place, not bad input") {
    std::vector<Eigen::MatrixXd> broken = out, overflowed = out;
    broken[1](4, 2) = std::numeric_limits<double>::quiet_NaN();
    broken[0](5, 3) = std::numeric_limits<double>::quiet_NaN();  // earlier head: the first one reported
    overflowed[1](0, 1) = -std::numeric_limits<double>::infinity();
    const std::string prefix = args.substr(0, args.find(" --candidate"));
    const Run r = attnrank_cli(prefix + " --candidate " + npy_f32("nan.npy", broken) + " --reference " +
                               npy_f32("inf.npy", overflowed) + " --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["candidate"]["nonfinite"] == 2);
    CHECK(j["candidate"]["max_abs_error_lower"] == "inf");
    CHECK(j["candidate"]["max_abs_error_upper"] == "inf");
    CHECK(j["candidate"]["worst"]["head"] == 0);
    CHECK(j["candidate"]["worst"]["row"] == 5);
    CHECK(j["candidate"]["worst"]["column"] == 3);
    CHECK(j["reference"]["nonfinite"] == 1);
    CHECK(j["reference"]["worst"]["head"] == 1);
    CHECK(j["ratio_lower"] == "0");  // inf / inf proves nothing
    CHECK(j["ratio_upper"] == "inf");
    const Run text = attnrank_cli(prefix + " --candidate " + npy_f32("nan.npy", broken));
    CHECK(text.code == 0);
    CHECK_THAT(text.out, Catch::Contains("2 entries are NaN or infinite"));
    CHECK(attnrank_cli(prefix + " --candidate " + npy_f32("nan.npy", broken) + " --max-error 1").code == 3);
    // Q, K and V are inputs: a NaN there is still bad input (the section below).
  }
  SECTION("text names the candidate and the bounds") {
    const Run r = attnrank_cli(args);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("max |O - exact|") && Catch::Contains("certified double tier"));
  }
  SECTION("bad input: exit 2 and a message naming it") {
    expect_input_error("check-kernel --q " + npy_f32("q1.npy", {q[0]}) + " --k " + npy_f32("k.npy", k) + " --v " +
                           npy_f32("v.npy", v) + " --candidate " + npy_f32("o.npy", out),
                       "must agree");
    std::vector<Eigen::MatrixXd> wide = out;
    for (auto& m : wide) {
      m.conservativeResize(6, 5);
      m.col(4).setZero();  // conservativeResize leaves the new column uninitialised
    }
    expect_input_error(args.substr(0, args.find(" --candidate")) + " --candidate " + npy_f32("wide.npy", wide),
                       "rows of Q x columns of V");
    std::vector<Eigen::MatrixXd> nan_q = q;
    nan_q[1](2, 3) = std::numeric_limits<double>::quiet_NaN();
    expect_input_error("check-kernel --q " + npy_f32("nanq.npy", nan_q) + args.substr(args.find(" --k")), "[1][2, 3]");
    expect_input_error(args + " --scale -1", "positive");
    expect_input_error(args + " --mask " + file("m.csv", "1,0\n1,1\n"), "2 x 2");
  }
}

namespace {

/// The matrices' float32 bytes in C order (one safetensors tensor's data).
std::string f32_data(const std::vector<Eigen::MatrixXd>& heads) {
  std::string data;
  for (const Eigen::MatrixXd& m : heads)
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) data += raw_bytes(float_bits(static_cast<float>(m(i, j))), 4);
  return data;
}

}  // namespace

TEST_CASE("attnrank check-kernel: the backward pass") {
  // Two heads of 5 queries and 7 keys (N_q != N_k), d = 3, d_v = 2; the gradients in double, rounded to float32.
  std::vector<Eigen::MatrixXd> q, k, v, dout, dq, dk, dv, lse;
  for (int h = 0; h < 2; ++h) {
    Eigen::MatrixXd Q(5, 3), K(7, 3), V(7, 2), G(5, 2);
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 3; ++j) {
        if (i < 5) Q(i, j) = ((i * 7 + j * 3 + h) % 11) / 5.0 - 1;
        K(i, j) = ((i * 5 + j * 2 + h) % 13) / 6.0 - 1;
        if (j < 2) V(i, j) = ((i * 3 + j * 7 + h) % 9) / 4.0 - 1;
        if (i < 5 && j < 2) G(i, j) = ((i * 2 + j * 5 + h) % 7) / 3.0 - 1;
      }
    const double s = 1 / std::sqrt(3.0);
    Eigen::MatrixXd P = Q * K.transpose() * s;
    Eigen::MatrixXd L(5, 1);
    for (int i = 0; i < 5; ++i) {
      const double m = P.row(i).maxCoeff();
      L(i, 0) = m + std::log((P.row(i).array() - m).exp().sum());
      P.row(i) = (P.row(i).array() - L(i, 0)).exp();
    }
    const Eigen::MatrixXd O = P * V;
    const Eigen::VectorXd D = (G.array() * O.array()).rowwise().sum();
    const Eigen::MatrixXd dS = P.array() * ((G * V.transpose()).colwise() - D).array();
    q.push_back(Q), k.push_back(K), v.push_back(V), dout.push_back(G);
    dq.push_back(dS * K * s), dk.push_back(dS.transpose() * Q * s), dv.push_back(P.transpose() * G), lse.push_back(L);
  }
  const auto npy = [](const std::string& name, const std::vector<Eigen::MatrixXd>& heads) { return npy_f32(name, heads); };
  const std::string inputs = "check-kernel --q " + npy("bq.npy", q) + " --k " + npy("bk.npy", k) + " --v " +
                             npy("bv.npy", v) + " --dout " + npy("bdo.npy", dout);
  const std::string grads = " --dq " + npy("bdq.npy", dq) + " --dk " + npy("bdk.npy", dk) + " --dv " + npy("bdv.npy", dv);
  SECTION("float32 gradients: bands at float32's size, each under its own key; exit 0") {
    const Run r = attnrank_cli(inputs + grads + " --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(!j.contains("candidate"));
    CHECK(j["backward"]["method"] == "double");
    for (const char* g : {"dq", "dk", "dv"}) {
      INFO(g);
      CHECK(num(j[g]["candidate"]["max_abs_error_upper"]) < 1e-6);
      CHECK(num(j[g]["candidate"]["max_abs_error_lower"]) <= num(j[g]["candidate"]["max_abs_error_upper"]));
      CHECK(num(j[g]["candidate"]["rms_error_upper"]) <= num(j[g]["candidate"]["max_abs_error_upper"]));
    }
    CHECK(j["dk"]["candidate"]["worst"]["row"].get<int>() < 7);  // a key row
  }
  SECTION("a planted dQ error is found within its band; FlashAttention's rule with its floor decides exit 3") {
    std::vector<Eigen::MatrixXd> bad = dq;
    bad[1](3, 2) += 0.01;
    const std::string args = inputs + " --dq " + npy("bad.npy", bad) + " --reference-dq " + npy("bdq.npy", dq);
    const Run r = attnrank_cli(args + " --max-ratio 2 --ratio-atol 1e-3 --json");
    REQUIRE(r.code == 3);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(num(j["dq"]["candidate"]["max_abs_error_lower"]) <= 0.01000001);
    CHECK(num(j["dq"]["candidate"]["max_abs_error_upper"]) >= 0.0099999);
    CHECK(j["dq"]["candidate"]["worst"]["head"] == 1);
    CHECK(j["dq"]["candidate"]["worst"]["row"] == 3);
    CHECK(j["dq"]["max_ratio_verdict"] == "exceeded");
    CHECK(j["exceeded"] == nlohmann::json::array({"dq"}));
    CHECK(attnrank_cli(args + " --max-ratio 2 --ratio-atol 0.02").code == 0);  // inside the floor
  }
  SECTION("the logsumexp, shape (H, N); --from reads one safetensors file by name") {
    std::vector<Eigen::MatrixXd> rows;
    for (const auto& m : lse) rows.push_back(m.transpose());  // (2, 5) as a 2-D array
    const Run r = attnrank_cli(inputs + " --lse " + npy("blse.npy", rows).substr(0) + " --json");
    // npy_f32 writes (H, N, d): (2, 1, 5) is not (H, N); the message says which shape is wanted.
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("one entry per query row, shape (2, 5)"));
    const auto path = scratch() / "run.safetensors";
    std::ofstream(path, std::ios::binary) << safetensors_bytes({{"q", "F32", {2, 5, 3}, f32_data(q)},
                                                                {"k", "F32", {2, 7, 3}, f32_data(k)},
                                                                {"v", "F32", {2, 7, 2}, f32_data(v)},
                                                                {"dout", "F32", {2, 5, 2}, f32_data(dout)},
                                                                {"dv", "F32", {2, 7, 2}, f32_data(dv)},
                                                                {"lse", "F32", {2, 5}, f32_data(rows)}});
    const Run from = attnrank_cli("check-kernel --from " + path.string() + " --json");
    INFO(from.err);
    REQUIRE(from.code == 0);
    const auto j = nlohmann::json::parse(from.out);
    CHECK(num(j["lse"]["candidate"]["max_abs_error_upper"]) < 1e-6);
    CHECK(num(j["dv"]["candidate"]["max_abs_error_upper"]) < 1e-6);
  }
  SECTION("bad input: exit 2 naming it") {
    expect_input_error(inputs.substr(0, inputs.find(" --dout")) + grads, "need dout");
    expect_input_error(inputs + " --dq " + npy("bdk.npy", dk), "dq");
    expect_input_error(inputs, "nothing to check");
    expect_input_error(inputs + grads + " --ratio-atol 0.1", "ratio_atol needs max_ratio");
    expect_input_error(inputs + " --reference-dk " + npy("bdk.npy", dk), "needs the candidate's dk");
  }
}

TEST_CASE("attnrank check-kernel: grouped queries (GQA, MQA) read from the shapes") {
  // Four query heads on one K/V head (MQA): dK and dV of the K/V head are the sums over the four.
  Eigen::MatrixXd K(6, 3), V(6, 2);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 3; ++j) {
      K(i, j) = ((i * 5 + j * 2) % 13) / 6.0 - 1;
      if (j < 2) V(i, j) = ((i * 3 + j * 7) % 9) / 4.0 - 1;
    }
  std::vector<Eigen::MatrixXd> q, dout, out, dq;
  Eigen::MatrixXd dK = Eigen::MatrixXd::Zero(6, 3), dV = Eigen::MatrixXd::Zero(6, 2);
  const double s = 1 / std::sqrt(3.0);
  for (int h = 0; h < 4; ++h) {
    Eigen::MatrixXd Q(6, 3), G(6, 2);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 3; ++j) {
        Q(i, j) = ((i * 7 + j * 3 + h) % 11) / 5.0 - 1;
        if (j < 2) G(i, j) = ((i * 2 + j * 5 + h) % 7) / 3.0 - 1;
      }
    Eigen::MatrixXd P = Q * K.transpose() * s;
    for (int i = 0; i < 6; ++i) {
      const double m = P.row(i).maxCoeff();
      P.row(i) = (P.row(i).array() - m).exp() / (P.row(i).array() - m).exp().sum();
    }
    const Eigen::MatrixXd O = P * V;
    const Eigen::VectorXd D = (G.array() * O.array()).rowwise().sum();
    const Eigen::MatrixXd dS = P.array() * ((G * V.transpose()).colwise() - D).array();
    q.push_back(Q), dout.push_back(G), out.push_back(O), dq.push_back(dS * K * s);
    dK += dS.transpose() * Q * s;
    dV += P.transpose() * G;
  }
  const std::string args = "check-kernel --q " + npy_f32("gq.npy", q) + " --k " + npy_f32("gk.npy", {K}) + " --v " +
                           npy_f32("gv.npy", {V}) + " --candidate " + npy_f32("go.npy", out) + " --dout " +
                           npy_f32("gdo.npy", dout) + " --dq " + npy_f32("gdq.npy", dq);
  SECTION("float32 results within float32's size; dK's worst entry names the K/V head") {
    const Run r = attnrank_cli(args + " --dk " + npy_f32("gdk.npy", {dK}) + " --dv " + npy_f32("gdv.npy", {dV}) + " --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    for (const char* g : {"dq", "dk", "dv"}) CHECK(num(j[g]["candidate"]["max_abs_error_upper"]) < 1e-5);
    CHECK(num(j["candidate"]["max_abs_error_upper"]) < 1e-6);
    CHECK(j["dk"]["candidate"]["worst"]["head"] == 0);
    // dK of one query head instead of the sum: an error of the size of the other three heads' share.
    const Run wrong = attnrank_cli(args + " --dk " + npy_f32("gdk1.npy", {dK / 4}) + " --json");
    CHECK(num(nlohmann::json::parse(wrong.out)["dk"]["candidate"]["max_abs_error_lower"]) > 1e-3);
  }
  SECTION("K/V heads that do not divide the query heads: exit 2 naming K") {
    expect_input_error("check-kernel --q " + npy_f32("gq.npy", q) + " --k " + npy_f32("gk3.npy", {K, K, K}) + " --v " +
                           npy_f32("gv3.npy", {V, V, V}) + " --candidate " + npy_f32("go.npy", out),
                       "divides Q's (grouped-query attention)");
    expect_input_error(args + " --dk " + npy_f32("gdk4.npy", {dK, dK, dK, dK}), "but K has");
  }
}

TEST_CASE("attnrank check-kernel: causal and sliding windows when N_q != N_k") {
  // 4 queries, 7 keys: FlashAttention's bottom-right causal mask lets query i see keys 0 .. i + 3.
  Eigen::MatrixXd Q(4, 3), K(7, 3), V(7, 2);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 3; ++j) {
      if (i < 4) Q(i, j) = ((i * 7 + j * 3) % 11) / 5.0 - 1;
      K(i, j) = ((i * 5 + j * 2) % 13) / 6.0 - 1;
      if (j < 2) V(i, j) = ((i * 3 + j * 7) % 9) / 4.0 - 1;
    }
  const auto attention = [&](int shift, int left) {  // allowed: p - left <= j <= p, p = i + shift
    Eigen::MatrixXd S = Q * K.transpose() / std::sqrt(3.0), O(4, 2);
    for (int i = 0; i < 4; ++i) {
      Eigen::RowVectorXd w = Eigen::RowVectorXd::Zero(7);
      double m = -INFINITY;
      for (int j = 0; j < 7; ++j)
        if (j <= i + shift && (left < 0 || j >= i + shift - left)) m = std::max(m, S(i, j));
      for (int j = 0; j < 7; ++j)
        if (j <= i + shift && (left < 0 || j >= i + shift - left)) w(j) = std::exp(S(i, j) - m);
      O.row(i) = (w / w.sum()) * V;
    }
    return O;
  };
  const std::string inputs = "check-kernel --q " + npy_f32("wq.npy", {Q}) + " --k " + npy_f32("wk.npy", {K}) +
                             " --v " + npy_f32("wv.npy", {V});
  const std::string bottom_right = inputs + " --candidate " + npy_f32("wbr.npy", {attention(3, -1)});
  SECTION("a bottom-right causal kernel passes FlashAttention's alignment and is far off PyTorch's") {
    const Run br = attnrank_cli(bottom_right + " --mask causal --json");
    INFO(br.err);
    REQUIRE(br.code == 0);
    const auto j = nlohmann::json::parse(br.out);
    CHECK(j["mask"] == "causal bottom-right");
    CHECK(num(j["candidate"]["max_abs_error_upper"]) < 1e-6);
    const Run tl = attnrank_cli(bottom_right + " --mask causal --align top-left --max-error 1e-3");
    CHECK(tl.code == 3);  // the alignment bug of flash-attention issue 1778's kind, proven
    CHECK_THAT(tl.out, Catch::Contains("mask causal top-left"));
  }
  SECTION("a sliding window: window_size (1, 0) bottom-right") {
    const Run w = attnrank_cli(inputs + " --candidate " + npy_f32("ww.npy", {attention(3, 1)}) + " --window 1,0 --json");
    INFO(w.err);
    REQUIRE(w.code == 0);
    CHECK(nlohmann::json::parse(w.out)["mask"] == "window(1, 0) bottom-right");
    CHECK(num(nlohmann::json::parse(w.out)["candidate"]["max_abs_error_upper"]) < 1e-6);
  }
  SECTION("rows without a key, a file with a mask, misuse: exit 2 naming the problem") {
    expect_input_error("check-kernel --q " + npy_f32("wk7.npy", {K}) + " --k " + npy_f32("wq4.npy", {Q}) + " --v " +
                           npy_f32("wv4.npy", {Eigen::MatrixXd::Ones(4, 2)}) + " --candidate " +
                           npy_f32("wo7.npy", {Eigen::MatrixXd::Ones(7, 2)}) + " --mask causal",
                       "query row 0 (0-based) allows no key");
    expect_input_error(bottom_right + " --window 2,0 --mask " + file("m47.csv", "1,1,1,1,0,0,0\n1,1,1,1,1,0,0\n1,1,1,1,1,1,0\n1,1,1,1,1,1,1\n"),
                       "not both");
    const Run file_mask = attnrank_cli(bottom_right + " --mask " + file("m47.csv", "1,1,1,1,0,0,0\n1,1,1,1,1,0,0\n1,1,1,1,1,1,0\n1,1,1,1,1,1,1\n") + " --json");
    INFO(file_mask.err);
    CHECK(file_mask.code == 0);
    CHECK(num(nlohmann::json::parse(file_mask.out)["candidate"]["max_abs_error_upper"]) < 1e-6);
    expect_input_error(bottom_right + " --mask " + file("m44.csv", "1,0,0,0\n1,1,0,0\n1,1,1,0\n1,1,1,1\n"),
                       "4 queries and 7 keys");
    expect_input_error(bottom_right + " --window -2,0", "-1 for unbounded");
  }
  SECTION("--empty-rows zero: FlashAttention's output 0 and lse +inf in the rows without a key, checked exactly") {
    // 7 queries, 4 keys, causal bottom-right: query i sees keys 0 .. i - 3, rows 0..2 none.
    const Eigen::MatrixXd Qe = K, Ke = Q, Ve = V.topRows(4);
    Eigen::MatrixXd O = Eigen::MatrixXd::Zero(7, 2), lse = Eigen::MatrixXd::Constant(7, 1, INFINITY);
    const Eigen::MatrixXd S = Qe * Ke.transpose() / std::sqrt(3.0);
    for (int i = 3; i < 7; ++i) {
      const Eigen::RowVectorXd w = (S.row(i).head(i - 2).array() - S.row(i).head(i - 2).maxCoeff()).exp().matrix();
      O.row(i) = (w / w.sum()) * Ve.topRows(i - 2);
      lse(i, 0) = S.row(i).head(i - 2).maxCoeff() + std::log(w.sum());
    }
    const std::string args = "check-kernel --q " + npy_f32("eq.npy", {Qe}) + " --k " + npy_f32("ek.npy", {Ke}) +
                             " --v " + npy_f32("ev.npy", {Ve}) + " --mask causal";
    const std::string good = args + " --candidate " + npy_f32("eo.npy", {O}) + " --lse " + npy_f64_vector("else.npy",
                             std::vector<double>(lse.data(), lse.data() + 7), {1, 7});
    expect_input_error(good, "query row 0 (0-based) allows no key");
    const Run r = attnrank_cli(good + " --empty-rows zero --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["empty_rows"] == nlohmann::json{{"convention", "zero"}, {"rows", 3}});
    CHECK(num(j["candidate"]["max_abs_error_upper"]) < 1e-6);
    CHECK(num(j["lse"]["candidate"]["max_abs_error_upper"]) < 1e-6);
    Eigen::MatrixXd garbage = O;
    garbage(1, 1) = 1e-3;  // a row left unwritten
    lse(0, 0) = 0;          // a finite lse where FlashAttention stores +inf
    const Run bad = attnrank_cli(args + " --candidate " + npy_f32("eo2.npy", {garbage}) + " --lse " +
                                 npy_f64_vector("else2.npy", std::vector<double>(lse.data(), lse.data() + 7), {1, 7}) +
                                 " --empty-rows zero --max-error 1e-4");
    CHECK(bad.code == 3);
    CHECK_THAT(bad.out, Catch::Contains("3 query rows without a key (FlashAttention's output 0)"));
    CHECK_THAT(bad.out, Catch::Contains("largest proven error at head 0, row 1, column 1"));
    CHECK_THAT(bad.out, Catch::Contains("1 entries are finite where the exact value is +inf"));
    expect_input_error(good + " --empty-rows none", "--empty-rows");
  }
}

TEST_CASE("attnrank check-kernel: softcap, ALiBi and sinks") {
  // One head, 3 queries and 5 keys; the variant computed here in long double from its definition.
  Eigen::MatrixXd Q(3, 2), K(5, 2), V(5, 2);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 2; ++j) {
      if (i < 3) Q(i, j) = ((i * 5 + j * 3) % 7) / 2.0 - 1;
      K(i, j) = ((i * 3 + j * 5) % 11) / 4.0 - 1;
      V(i, j) = ((i * 7 + j) % 5) / 2.0 - 1;
    }
  const double c = 1.5, slope = 0.5, sink = 0.25;
  Eigen::MatrixXd O(3, 2);
  long double den[3], numer[3][2] = {};  // each row's denominator (with the sink's term) and numerators
  for (int i = 0; i < 3; ++i) {
    den[i] = std::exp(static_cast<long double>(sink));
    for (int j = 0; j < 5; ++j) {
      const long double x = c * std::tanh(static_cast<long double>(Q.row(i).dot(K.row(j))) / std::sqrt(2.0L) / c) -
                            slope * std::abs(i + 2 - j);
      den[i] += std::exp(x);
      for (int l = 0; l < 2; ++l) numer[i][l] += std::exp(x) * V(j, l);
    }
    for (int l = 0; l < 2; ++l) O(i, l) = static_cast<double>(numer[i][l] / den[i]);
  }
  const std::string args = "check-kernel --q " + npy_f32("sq.npy", {Q}) + " --k " + npy_f32("sk.npy", {K}) + " --v " +
                           npy_f32("sv.npy", {V}) + " --candidate " + npy_f32("so.npy", {O});
  SECTION("the variant's float32 output is within float32 rounding; the plain check is far off") {
    const Run r = attnrank_cli(args + " --softcap 1.5 --alibi-slopes 0.5 --sinks 0.25 --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(num(j["candidate"]["max_abs_error_upper"]) < 1e-6);
    CHECK(j["softcap"] == "1.5");
    CHECK(j["alibi_slopes"] == nlohmann::json::array({0.5}));
    CHECK(j["sinks"] == nlohmann::json::array({0.25}));
    CHECK(attnrank_cli(args + " --softcap 1.5 --alibi-slopes 0.5 --max-error 1e-3").code == 3);  // no sink
    const Run text = attnrank_cli(args + " --softcap 1.5 --alibi-slopes 0.5 --sinks 0.25");
    CHECK_THAT(text.out, Catch::Contains("softcap 1.5; ALiBi (bottom-right); sinks"));
  }
  SECTION("a mask per head from an (H, N_q, N_k) array") {
    Eigen::MatrixXd all = Eigen::MatrixXd::Ones(3, 5), first = Eigen::MatrixXd::Zero(3, 5);
    first.col(0).setOnes();  // only key 0: the output is V's first row
    const std::string two_heads = "check-kernel --q " + npy_f32("mq.npy", {Q, Q}) + " --k " + npy_f32("mk.npy", {K, K}) +
                                  " --v " + npy_f32("mv.npy", {V, V});
    Eigen::MatrixXd o0 = V.row(0).replicate(3, 1);
    const Run r = attnrank_cli(two_heads + " --candidate " + npy_f32("mo.npy", {o0, o0}) + " --mask " +
                               npy_f32("masks.npy", {first, all}) + " --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["mask"] == "per-head");
    CHECK(num(j["candidate"]["max_abs_error_lower"]) > 1e-3);  // head 1 sees every key
    CHECK(j["candidate"]["worst"]["head"] == 1);
    expect_input_error(two_heads + " --candidate " + npy_f32("mo2.npy", {o0, o0}) + " --mask " +
                           npy_f32("masks3.npy", {first, all, all}),
                       "give (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, N_k)");
  }
  SECTION("the sinks' gradient: dsinks = -sum_i p_i,sink rowsum(dout o O)_i, a planted error found") {
    Eigen::MatrixXd dO(3, 2);
    for (int i = 0; i < 3; ++i)
      for (int l = 0; l < 2; ++l) dO(i, l) = ((i * 3 + l * 2) % 5) / 4.0 - 0.5;
    long double dz = 0;
    for (int i = 0; i < 3; ++i) {
      const long double d = (numer[i][0] * dO(i, 0) + numer[i][1] * dO(i, 1)) / den[i];  // D_i = rowsum(dO o O)
      dz -= std::exp(static_cast<long double>(sink)) / den[i] * d;
    }
    const double exact = static_cast<double>(dz);
    const std::string backward = "check-kernel --q " + npy_f32("sq.npy", {Q}) + " --k " + npy_f32("sk.npy", {K}) +
                                 " --v " + npy_f32("sv.npy", {V}) + " --dout " + npy_f32("sdo.npy", {dO}) +
                                 " --softcap 1.5 --alibi-slopes 0.5 --sinks 0.25";
    const Run r = attnrank_cli(backward + " --dsinks " + npy_f64_vector("dz.npy", {exact}) + " --json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(num(j["dsinks"]["candidate"]["max_abs_error_upper"]) < 1e-15);
    CHECK(j["dsinks"]["candidate"]["worst"] == nlohmann::json{{"head", 0}});
    const Run planted = attnrank_cli(backward + " --dsinks " + npy_f64_vector("dz2.npy", {exact + 1e-3}) + " --max-error 1e-4");
    CHECK(planted.code == 3);
    CHECK_THAT(planted.out, Catch::Contains("dsinks candidate (") && Catch::Contains("dz2.npy, float64)"));
    CHECK_THAT(planted.out, Catch::Contains("largest proven error at head 0 (0-based)"));
    expect_input_error(args + " --dout " + npy_f32("sdo.npy", {dO}) + " --dsinks " + npy_f64_vector("dz.npy", {exact}),
                       "dsinks needs the sinks");
    expect_input_error(args + " --sinks 0.25 --dsinks " + npy_f64_vector("dz.npy", {exact}), "need dout");
    expect_input_error(backward + " --dsinks " + npy_f64_vector("dz3.npy", {0.0, 0.0}),
                       "holds 2 values (shape (2,)) but Q (1, 3, 2) has H = 1");
  }
  SECTION("misuse: exit 2 naming the option") {
    expect_input_error(args + " --softcap -1", "softcap -1");
    expect_input_error(args + " --alibi-slopes 0.5,0.25", "has shape (2,) but Q (1, 3, 2) has H = 1 and B = 1");
    expect_input_error(args + " --sinks 1,x", "--sinks '1,x': entry 2 'x' is not a number");
    expect_input_error(args + " --sinks nosuch.npy", "nosuch.npy");
  }
}

TEST_CASE("attnrank scan") {
  const std::string inputs = ATTNRANK_SOURCE_DIR "/tests/cli/inputs/";
  SECTION("--jsonl: one JSON object per head, every head once, the document's heads as they are") {
    const Run lines = attnrank_cli("scan " + inputs + "stack.npy --dk 2 --epsilon 0.1 --jsonl --time-limit 0 --jobs 2");
    REQUIRE(lines.code == 0);
    const auto doc = nlohmann::json::parse(
        attnrank_cli("scan " + inputs + "stack.npy --dk 2 --epsilon 0.1 --json --time-limit 0").out);
    std::istringstream in(lines.out);
    std::set<std::vector<std::size_t>> seen;
    std::string line;
    while (std::getline(in, line)) {
      auto head = nlohmann::json::parse(line);
      seen.insert(head["index"].get<std::vector<std::size_t>>());
      for (auto d : doc["heads"])
        if (d["index"] == head["index"]) {
          d.erase("seconds");
          head.erase("seconds");
          CHECK(d == head);
        }
    }
    CHECK(seen.size() == 4);
    CHECK(doc["heads"].size() == 4);
  }
  SECTION("--svg: one heatmap cell per head") {
    const std::string svg = (scratch() / "scan.svg").string();
    REQUIRE(attnrank_cli("scan " + inputs + "stack.npy --epsilon 0.1 --svg " + svg).code == 0);
    const std::string s = slurp(svg);
    std::size_t cells = 0;
    for (std::size_t at = s.find("class=\"cell\""); at != std::string::npos; at = s.find("class=\"cell\"", at + 1)) ++cells;
    CHECK(cells == 4);
  }
  SECTION("bad input leaves stdout empty") {
    const Run r = attnrank_cli("scan " + inputs + "stack-nan.npy --jsonl");
    CHECK(r.code == 2);
    CHECK(r.out.empty());
  }
}

TEST_CASE("attnrank: the overflow audit's smaller findings") {
  const std::string inputs = ATTNRANK_SOURCE_DIR "/tests/cli/inputs/";
  SECTION("--max-dk 0 (and above n) is refused with the range, for width and scan") {
    expect_input_error("width diag:4:0.7 --epsilon 0.1 --max-dk 0", "1 <= max_dk <= n = 4");
    expect_input_error("width diag:4:0.7 --epsilon 0.1 --max-dk 5", "1 <= max_dk <= n = 4");
    expect_input_error("scan " + inputs + "stack.npy --epsilon 0.1 --max-dk 0", "1 <= max_dk <= n");
    const Run ok = attnrank_cli("width diag:4:0.7 --epsilon 0.1 --max-dk 4 --json");
    CHECK(ok.code == 0);
  }
  SECTION("a bad value of a real option says what it takes and suggests no other name") {
    const Run jobs = attnrank_cli("scan " + inputs + "stack.npy --jobs -1");
    CHECK(jobs.code == 2);
    CHECK(jobs.out.empty());
    CHECK_THAT(jobs.err, Catch::Contains("whole number >= 0"));
    CHECK_THAT(jobs.err, !Catch::Contains("did you mean"));
    const Run big = attnrank_cli("reach diag:3:0.8 --dk 99999999999999999999999");
    CHECK(big.code == 2);
    CHECK_THAT(big.err, Catch::Contains("'99999999999999999999999' is too large for a whole number"));
    const Run wide = attnrank_cli("scan " + inputs + "stack.npy --jobs 99999999999");  // past 32 bits
    CHECK(wide.code == 2);
    CHECK_THAT(wide.err, Catch::Contains("--jobs = 99999999999 is not a value this option takes"));
    CHECK_THAT(wide.err, !Catch::Contains("did you mean"));
    CHECK_THAT(big.err, !Catch::Contains("did you mean"));
    expect_input_error("reach diag:3:0.8 --d_k 2", "did you mean --dk instead of --d_k?");  // unknown names still do
  }
  SECTION("white space and tabs mixed in one text file") {
    const Run r = attnrank_cli("rank " + file("mixed.txt", "0.5 0.5\n0.001\t-250\n") + " --json");
    CHECK(r.code == 0);
    CHECK(nlohmann::json::parse(r.out)["rank_lower"] == 2);
  }
  SECTION("svd bounds as tight at 1e-200 and 1e200 as at 1 (an exact power-of-two scaling)") {
    for (const std::string scale : {"", "e-200", "e200", "e-300"}) {
      INFO("scale 1" << scale);
      const std::string m = file("scaled" + scale + ".csv", "3" + scale + ",1" + scale + "\n1" + scale + ",2" + scale + "\n");
      const Run r = attnrank_cli("svd " + m + " --json");
      REQUIRE(r.code == 0);
      const nlohmann::json doc = nlohmann::json::parse(r.out);  // alive through the loop
      for (const auto& v : doc["singular_values"]) {
        REQUIRE(v["lower"].is_string());  // null: no finite bound
        REQUIRE(v["upper"].is_string());
        const double lo = std::stod(v["lower"].get<std::string>()), hi = std::stod(v["upper"].get<std::string>());
        CHECK(lo > 0);
        CHECK(hi - lo <= 1e-13 * hi);
      }
    }
    // Doubles near DBL_MAX beside the smallest subnormal: no exact power-of-two scaling exists
    // (2^-1074 would vanish), so the subnormal's rounding is a ball; still tight, still true.
    std::string data;
    for (const double x : {1.5e308, 0x1p-1074, 0x1p-1074, 1.0e308}) {  // row-major 2 x 2
      std::uint64_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      data += raw_bytes(bits, 8);
    }
    const Run r = attnrank_cli("svd " + file("max-and-subnormal.npy", npy_bytes("<f8", false, {2, 2}, data)) + " --json");
    REQUIRE(r.code == 0);
    const auto values = nlohmann::json::parse(r.out)["singular_values"];
    CHECK(std::stod(values[0]["lower"].get<std::string>()) <= 1.5e308);
    CHECK(std::stod(values[0]["upper"].get<std::string>()) >= 1.5e308);
    CHECK(std::stod(values[0]["upper"].get<std::string>()) - std::stod(values[0]["lower"].get<std::string>()) <= 1e-13 * 1.5e308);
    CHECK(std::stod(values[1]["lower"].get<std::string>()) <= 1.0e308);
    CHECK(std::stod(values[1]["upper"].get<std::string>()) >= 1.0e308);
  }
}
