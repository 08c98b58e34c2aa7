#pragma once
// The attnrank command line as a function, so that main, the tests and the
// fuzzer run exactly the same code. Exit codes: 0 on success (any verdict), 2 on
// bad input or usage (message on `err`, nothing on `out`), 1 on an internal error.

#include <attnrank/io/parse.hpp>

#include <ostream>

namespace attnrank::cli {

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

/// The caps for reading matrices in the current run: ParseLimits' defaults, with
/// the dimensions raised or lowered by `attnrank --max-size N`.
const ParseLimits& input_limits();

}  // namespace attnrank::cli
