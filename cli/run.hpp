#pragma once
// The attnrank command line as a function, so that main, the tests and the
// fuzzer run exactly the same code. Exit codes: 0 on success (any verdict), 2 on
// bad input or usage (message on `err`, nothing on `out`), 1 on an internal error,
// 3 when check-kernel's --max-error is proven exceeded (its report still printed).
// The command line only parses, calls the library's analyses (attnrank/analysis.hpp)
// and prints their one text or JSON writer.

#include <attnrank/analysis/refinement.hpp>
#include <attnrank/attention/mask.hpp>
#include <attnrank/io/parse.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <ostream>
#include <string>

namespace attnrank::cli {

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

/// One run of the command line: what it reads with, what it has to say, and how
/// it ends. Each run has its own, so runs in two threads do not meet.
struct Run {
  std::string out;      ///< printed on stdout only when the command succeeds
  ParseLimits limits;   ///< ParseLimits' defaults, the dimensions set by --max-size N
  InputNotes notes;     ///< what the readers noticed, printed on stderr as "attnrank: note: ..."
  int exit_code = 0;    ///< 3: check-kernel's --max-error proven exceeded
  /// Where progress lines of long work go: stderr when it is a terminal, else nowhere.
  std::ostream* progress = nullptr;
  /// stdout itself, for output streamed while the command runs (scan --jsonl);
  /// everything else goes through `out`.
  std::ostream* stream = nullptr;
  bool progress_shown = false;  ///< a progress line is on the terminal (cleared before the output)

  /// A matrix argument in any form attnrank reads (a spec like diag:3:0.8,
  /// text, .npy, a safetensors tensor, "-" for standard input).
  Matrix<Rational> read(const std::string& argument);
  /// The mask a --mask argument names for n tokens (causal, none, a matrix
  /// file); `what` names the matrix it must match.
  std::optional<Mask> read_mask(const std::string& argument, Eigen::Index n, const std::string& what);
  /// A document of an analysis, as indented JSON text with a final newline.
  void print(const nlohmann::json& document) { out = document.dump(2) + "\n"; }
  void print(std::string text) { out = std::move(text); }
  /// The optimiser's progress callback for `what` (empty when no progress is shown).
  std::function<void(const SearchProgress&)> search_progress(const std::string& what);
};

}  // namespace attnrank::cli
