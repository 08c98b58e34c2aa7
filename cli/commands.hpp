#pragma once
// Each command registers itself on the CLI11 app. Its callback puts everything
// it has to say into the run (run.hpp); run() prints it only when the command
// succeeded, so a failing command leaves stdout empty.

#include "run.hpp"

#include <CLI/CLI.hpp>

#include <string>

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

/// --refine and --time-limit S (0: none) on a command.
struct RefineFlags {
  bool refine = false;
  bool no_search = false;
  double time_limit = default_time_limit;
};
void add_refine_options(CLI::App* cmd, RefineFlags& flags);
/// The options the flags ask for (--refine: always, --no-search: never, else automatic), with
/// progress on the run's progress stream.
RefineOptions refine_options(const RefineFlags& flags, Run& run, const std::string& what);

/// Shared option limits (docs/cli.md).
inline constexpr int max_digits = 1000;

/// The help of every MATRIX argument.
inline constexpr const char* matrix_help =
    "Matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or a spec: diag:N:P, hilbert:N";

}  // namespace attnrank::cli
