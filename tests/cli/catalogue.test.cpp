// The bad-input catalogue (tests/cli/catalogue.txt) and the size limits: every bad
// input exits 2 with a message naming the problem and nothing on stdout; valid
// but unusual input gets its well-defined answer.
#include "cli_support.hpp"

#include <sstream>

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace attnrank::test;

struct Entry {
  int line = 0;
  std::string name, args, expected;
  int code = -1;
};

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string expand(std::string s) {
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"{in}", ATTNRANK_SOURCE_DIR "/tests/cli/inputs"},
                                   {"{data}", ATTNRANK_SOURCE_DIR "/examples/data"}})
    for (auto at = s.find(key); at != std::string::npos; at = s.find(key)) s.replace(at, key.size(), value);
  return s;
}

std::vector<Entry> catalogue() {
  std::ifstream f(ATTNRANK_SOURCE_DIR "/tests/cli/catalogue.txt");
  REQUIRE(f);
  std::vector<Entry> entries;
  std::string text;
  for (int line = 1; std::getline(f, text); ++line) {
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> fields;
    for (std::size_t at = 0;;) {
      const auto bar = text.find(" | ", at);
      fields.push_back(trimmed(text.substr(at, bar == std::string::npos ? std::string::npos : bar - at)));
      if (bar == std::string::npos) break;
      at = bar + 3;
    }
    INFO("catalogue.txt line " << line << ": " << text);
    REQUIRE(fields.size() == 4);
    entries.push_back({line, fields[0], expand(fields[1]), fields[3], std::stoi(fields[2])});
  }
  return entries;
}

}  // namespace

TEST_CASE("attnrank CLI: the bad-input catalogue") {
  const std::vector<Entry> entries = catalogue();
  CHECK(entries.size() >= 40);
  for (const Entry& e : entries) {
    INFO("catalogue.txt line " << e.line << " (" << e.name << "): attnrank " << e.args);
    const Run r = attnrank_cli(e.args);
    CHECK(r.code == e.code);
    if (e.code == 2) {
      CHECK(r.out.empty());
      CHECK_THAT(r.err, Catch::StartsWith("attnrank: "));
      CHECK_THAT(r.err, Catch::Contains(e.expected));
    } else {
      // On success stderr holds nothing but the readers' notes ("attnrank: note: a.tsv: tab-separated").
      std::istringstream lines(r.err);
      for (std::string line; std::getline(lines, line);) CHECK_THAT(line, Catch::StartsWith("attnrank: note: "));
      CHECK_THAT(r.out, Catch::Contains(e.expected));
    }
  }
}

TEST_CASE("attnrank CLI: size limits are enforced early") {
  SECTION("a 2 GB file is refused before it is read") {
    const fs::path big = scratch() / "two-gigabytes.csv";
    { std::ofstream(big) << "0.5,0.5\n"; }
    fs::resize_file(big, std::uintmax_t{2} << 30);  // sparse: no 2 GB of disk
    expect_input_error("rank " + big.string(), "two-gigabytes.csv: file is 2147483648 bytes, over the limit of 268435456");
    fs::remove(big);
  }
  SECTION("a device without a size is read only up to the cap") {
    expect_input_error("rank /dev/zero", "/dev/zero: more than 268435456 bytes (the file size limit, max_file_size, raises it); stopped reading there");
  }
  SECTION("--max-file-size sets the file cap, which the message names") {
    const std::string small = file("small.csv", "0.5,0.5\n0.25,0.75\n");
    expect_input_error("--max-file-size 10 rank " + small, "small.csv: file is 18 bytes, over the limit of 10 "
                                                            "(the file size limit, max_file_size, raises it)");
    CHECK(attnrank_cli("--max-file-size 1KiB rank " + small).code == 0);
  }
  SECTION("work that cannot fit in memory is refused before it starts (exit 2, not out of memory)") {
    expect_input_error("--max-size 200000 rank diag:200000:0.5",
                       "matrix spec 'diag:200000:0.5' (200000 x 200000 exact rationals): needs at least 1280.0 GB of memory");
  }
  SECTION("n is capped at 8192 unless --max-size raises it") {
    std::string column;
    for (int i = 0; i < 8193; ++i) column += "1\n";
    const std::string tall = file("tall.csv", column);
    expect_input_error("rank " + tall, "tall.csv: line 8193: more than 8192 rows (the size limit; max_size raises it)");
    const Run r = attnrank_cli("--max-size 9000 rank " + tall);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("rank = 1"));
    std::string wide = "1";
    for (int i = 0; i < 8192; ++i) wide += ",1";
    expect_input_error("rank " + file("wide.csv", wide + "\n"), "wide.csv: line 1 has more than 8192 columns");
  }
  SECTION("--max-size is itself bounded") {
    expect_input_error("--max-size 0 rank diag:3:0.8", "--max-size: Value 0 not in range");
    expect_input_error("--max-size 99999999 rank diag:3:0.8", "--max-size: Value 99999999 not in range");
  }
  SECTION("one number has at most 4096 digits") {
    expect_input_error("rank " + file("digits.csv", std::string(4097, '7') + "\n"), "more than 4096 digits");
  }
}
