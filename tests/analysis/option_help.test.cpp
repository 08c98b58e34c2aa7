// The library's help texts, which the CLI's --help and the Python docstrings both
// print (tests/python/test_binding.py checks the two adapters against them): each
// question has one, every option one text, no text names a flag, and a default a
// text states is the library's constant.
#include "support.hpp"

#include <attnrank/analysis.hpp>

#include <regex>
#include <set>
#include <stdexcept>
#include <string>

using namespace attnrank;

TEST_CASE("attnrank::question_helps", "[unit]") {
  const std::set<std::string> expected{"reach", "check_certificate", "width", "rank",        "det",
                                       "svd",   "layer",             "scan",  "check_kernel"};
  std::set<std::string> seen;
  for (const QuestionHelp& q : question_helps()) {
    INFO(q.name);
    CHECK(seen.insert(q.name).second);  // one help per question
    CHECK_FALSE(q.title.empty());
    CHECK_FALSE(q.details.empty());
    CHECK_FALSE(q.options.empty());
    std::set<std::string> options;
    for (const OptionHelp& o : q.options) {
      INFO(o.name);
      CHECK(options.insert(o.name).second);  // one text per option
      CHECK(std::regex_match(o.name, std::regex("[A-Za-z][a-z0-9_]*")));  // a Python parameter's name
      CHECK_FALSE(o.text.empty());
      // the question's words: no command-line flag, no trailing period (the CLI appends to texts)
      CHECK_FALSE(std::regex_search(o.text, std::regex("--[a-z]")));
      CHECK(o.text.back() != '.');
      CHECK(&option_help(q.name, o.name) == &o.text);
    }
    CHECK_FALSE(std::regex_search(q.title + q.details, std::regex("--[a-z]")));
  }
  CHECK(seen == expected);
}

TEST_CASE("attnrank::option_help", "[unit]") {
  SECTION("the defaults stated are the library's constants") {
    std::string times("(");  // appended in steps: GCC 12 misreads "(" + std::string&& under -Werror
    times += shortest_decimal(full_search_flops / default_search_flops);
    times += " times the default's";
    for (const char* question : {"reach", "width", "scan"})
      CHECK_THAT(option_help(question, "time_limit"), Catch::Contains(times));
    CHECK_THAT(option_help("check_kernel", "bits"), Catch::Contains("default " + std::to_string(default_fallback_bits)));
    CHECK_THAT(option_help("layer", "bits"), Catch::Contains("default " + std::to_string(default_layer_bits)));
    CHECK_THAT(option_help("reach", "bits"), Catch::Contains("default " + std::to_string(ReachQuestion{}.bits)));
    CHECK_THAT(option_help("det", "digits"), Catch::Contains("default " + std::to_string(DetQuestion{}.digits)));
    CHECK_THAT(option_help("det", "bits"), Catch::Contains("default " + std::to_string(DetQuestion{}.bits)));
    CHECK_THAT(option_help("rank", "bits"), Catch::Contains("default " + std::to_string(RankQuestion{}.bits)));
  }
  SECTION("the options shared by questions read the same") {
    for (const char* option : {"refine", "seed"})
      for (const char* question : {"width", "scan"})
        CHECK(option_help(question, option) == option_help("reach", option));
    CHECK(option_help("width", "A") == option_help("reach", "A"));
    CHECK(option_help("det", "M") == option_help("rank", "M"));
  }
  SECTION("an unknown question or option is a programming error, not bad input") {
    CHECK_THROWS_AS(question_help("nonsense"), std::invalid_argument);
    CHECK_THROWS_AS(option_help("reach", "nonsense"), std::invalid_argument);
    CHECK_THROWS_AS(option_help("nonsense", "d_k"), std::invalid_argument);
  }
}
