#pragma once
// Running the attnrank command from tests: exit code, stdout and stderr, scratch
// files, and the bad-input contract (exit 2, message on stderr, stdout empty).

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace attnrank::test {

namespace fs = std::filesystem;

struct Run {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline const fs::path& scratch() {
  static const fs::path dir = [] {
    auto d = fs::temp_directory_path() / ("attnrank-cli-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

inline Run attnrank_cli(const std::string& args) {
  const auto out = scratch() / "stdout", err = scratch() / "stderr";
  const std::string cmd = std::string(ATTNRANK_CLI) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

inline std::string file(const std::string& name, const std::string& content) {
  const auto p = scratch() / name;
  std::ofstream(p) << content;
  return p.string();
}

/// The worked example's inputs as files, the way a user would write them.
inline std::string worked_example_args() {
  return "--x " + file("x.csv", "# I, love, LLMs\n0,0,1,1\n0,1,0,1\n1,0,0,1\n") +
         " --wq " + file("wq.csv", "0,-1,1,1\n0,1,0,0\n1,0,0,-1\n1,1,0,1\n") +
         " --wk " + file("wk.csv", "0,-1,0,1\n-1,1,0,0\n1,-1,1,-1\n1,1,0,1\n") +
         " --wv " + file("wv.csv", "0,0,1,0\n1,0,0,1\n0,1,0,0\n1,0,0,0\n") +
         " --wo " + file("wo.csv", "0,0,1,1\n1,1,0,0\n0,1,-1,1\n1,0,0,0\n");
}

inline void expect_input_error(const std::string& args, const std::string& message) {
  INFO("attnrank " << args);
  const Run r = attnrank_cli(args);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains(message));
}


}  // namespace attnrank::test
