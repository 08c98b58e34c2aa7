#pragma once
// The attnrank command line as a function, so that main, the tests and the
// fuzzer run exactly the same code. Exit codes: 0 on success (any verdict), 2 on
// bad input or usage (message on `err`, nothing on `out`), 1 on an internal error,
// 3 when check-kernel's --max-error is proven exceeded (its report still printed).

#include <attnrank/attention/mask.hpp>
#include <attnrank/io/parse.hpp>

#include <nlohmann/json.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace attnrank::cli {

/// `matrices` are in-memory inputs (the Python module's arrays): while it runs, a
/// matrix argument "@k" is matrices[k], for targets, weights, embeddings and masks.
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
        const std::vector<Matrix<Rational>>& matrices = {});

/// A command whose result calls for another exit code on success (check-kernel's
/// --max-error: 3) asks for it here; its output is still printed.
void request_exit_code(int code);

/// The caps for reading matrices in the current run: ParseLimits' defaults, with
/// the dimensions raised or lowered by `attnrank --max-size N`.
const ParseLimits& input_limits();

/// A matrix argument of the current run in any form attnrank reads (a spec like
/// diag:3:0.8, text, .npy, a safetensors tensor, "-" for standard input), read
/// with input_limits(). What the reader noticed (a tab-separated file, a skipped
/// header) is printed on stderr as "attnrank: note: ..." once the command succeeds.
Matrix<Rational> read_input(const std::string& argument);

/// The JSON document a command prints: `j` with its "schema" key, the document
/// type and version ("attnrank/reach/1", docs/schema/reach.schema.json), as
/// indented text with a final newline.
std::string json_document(nlohmann::json j, const std::string& type);

/// A proven bound (a double) as JSON: a decimal string of 17 significant digits
/// rounded so that it is still the bound (an upper bound up, a lower bound down),
/// or null when the bound is infinite (nothing proven).
nlohmann::json upper_bound_json(double x);
nlohmann::json lower_bound_json(double x);

/// The mask a --mask argument names for n tokens (causal, none, a matrix file, or
/// an in-memory "@k"); `what` names the matrix it must match.
std::optional<Mask> read_mask_input(const std::string& argument, Eigen::Index n, const std::string& what);

}  // namespace attnrank::cli
