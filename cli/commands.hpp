#pragma once
// Each command registers itself on the CLI11 app. Its callback puts everything
// it has to say into the run (run.hpp); run() prints it only when the command
// succeeded, so a failing command leaves stdout empty.

#include "run.hpp"

#include <attnrank/analysis/option_help.hpp>

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace attnrank::cli {

void add_example_command(CLI::App& app, Run& run);
void add_layer_command(CLI::App& app, Run& run);
void add_rank_command(CLI::App& app, Run& run);
void add_det_command(CLI::App& app, Run& run);
void add_reach_command(CLI::App& app, Run& run);
void add_svd_command(CLI::App& app, Run& run);
void add_width_command(CLI::App& app, Run& run);
void add_sweep_command(CLI::App& app, Run& run);
void add_appendix_command(CLI::App& app, Run& run);
void add_check_kernel_command(CLI::App& app, Run& run);
void add_scan_command(CLI::App& app, Run& run);

/// The subcommand of a library question: its title as the description and what a
/// result proves as the help's footer (analysis/option_help.hpp: Python prints the same).
CLI::App* add_question_command(CLI::App& app, const std::string& command, std::string_view question);

/// --refine and --time-limit S (0: none) on a command.
struct RefineFlags {
  bool refine = false;
  bool no_search = false;
  std::optional<double> time_limit;  ///< absent: the default's fixed work
};
void add_refine_options(CLI::App* cmd, RefineFlags& flags, std::string_view question);
/// The options the flags ask for (--refine: always, --no-search: never, else automatic), with
/// progress on the run's progress stream.
RefineOptions refine_options(const RefineFlags& flags, Run& run, const std::string& what);

/// Shared option limits (docs/cli.md).
inline constexpr int max_digits = max_printed_digits;

/// Where a MATRIX or TARGET argument comes from, after the library's text of it.
inline constexpr const char* matrix_source =
    ": a matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or a spec: diag:N:P, hilbert:N";

}  // namespace attnrank::cli
