// Fuzz target: the attnrank command line end to end (cli/run.hpp), on the same
// code path as the installed command.
//
// Input: arguments, one per line, then optionally a NUL byte and up to five
// files separated by NUL bytes; the arguments @0 .. @4 name those files.
// The harness refuses arguments containing '/' and puts the files that
// --certificate and --svg write into a scratch directory (no writes elsewhere);
// it refuses numbers of four or more digits (no minute-long precisions) and
// `appendix` (fixed input, a second a run; its options are tested in tests/);
// `--max-size 24` goes first so every matrix stays small. It does not change
// directory: libFuzzer reads corpus paths relative to where it was started.
//
// Oracle, the CLI contract: exit 0 or 2 (or 3, check-kernel's --max-error, with its
// report), never 1 (an internal error) or a crash;
// exit 2 prints one message starting "attnrank: " on stderr and nothing on stdout.
#include "fuzz_support.hpp"

#include "run.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool acceptable(const std::string& arg) {
  if (arg.find('/') != std::string::npos || arg.find("--max-size") != std::string::npos || arg == "appendix") return false;
  std::size_t run = 0;
  for (char c : arg) {
    run = std::isdigit(static_cast<unsigned char>(c)) ? run + 1 : 0;
    if (run >= 4) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / "attnrank-fuzz-cli";
    fs::create_directories(d);
    return d;
  }();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  std::vector<std::string> files;
  if (nul != std::string::npos)
    for (std::size_t at = nul + 1; files.size() < 5;) {
      const std::size_t next = input.find('\0', at);
      files.push_back(input.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos) break;
      at = next + 1;
    }
  for (std::size_t i = 0; i < files.size(); ++i) std::ofstream(dir / ("f" + std::to_string(i) + ".csv")) << files[i];

  std::vector<std::string> args{"attnrank", "--max-size", "24"};
  std::istringstream lines(input.substr(0, nul));
  bool output_path = false;  // the previous argument was --certificate or --svg
  for (std::string line; std::getline(lines, line);) {
    if (!acceptable(line)) return 0;
    if (line.size() == 2 && line[0] == '@' && line[1] >= '0' && line[1] <= '4')
      line = (dir / ("f" + line.substr(1) + ".csv")).string();
    else if (output_path)
      line = (dir / ("out-" + line)).string();
    for (const char* option : {"--certificate=", "--svg="})
      if (line.rfind(option, 0) == 0) line.insert(std::string(option).size(), (dir / "out-").string());
    output_path = line == "--certificate" || line == "--svg";
    args.push_back(line);
  }
  if (args.size() > 40) return 0;
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = attnrank::cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  attnrank::fuzz::require(code == 0 || code == 2 || code == 3, "exit code other than 0, 2 or 3 (1 is an internal error)");
  if (code == 3) attnrank::fuzz::require(!out.str().empty(), "exit 3 (check-kernel --max-error) without its report");
  if (code == 2) {
    attnrank::fuzz::require(out.str().empty(), "exit 2 with output on stdout");
    attnrank::fuzz::require(err.str().rfind("attnrank: ", 0) == 0, "exit 2 without a message");
  }
  return 0;
}
