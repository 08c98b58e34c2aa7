#pragma once
// Each command registers itself on the CLI11 app. Its callback writes everything
// it has to say into `out`; main prints `out` only when the command succeeded, so
// a failing command leaves stdout empty.

#include <CLI/CLI.hpp>

#include <string>

namespace attnrank::cli {

void add_example_command(CLI::App& app, std::string& out);
void add_layer_command(CLI::App& app, std::string& out);
void add_rank_command(CLI::App& app, std::string& out);
void add_det_command(CLI::App& app, std::string& out);
void add_reach_command(CLI::App& app, std::string& out);
void add_svd_command(CLI::App& app, std::string& out);
void add_width_command(CLI::App& app, std::string& out);
void add_sweep_command(CLI::App& app, std::string& out);
void add_appendix_command(CLI::App& app, std::string& out);
void add_check_kernel_command(CLI::App& app, std::string& out);

/// Shared option limits (docs/cli.md).
inline constexpr int max_digits = 1000;

}  // namespace attnrank::cli
