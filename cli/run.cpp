// The attnrank command line (run.hpp).
#include "run.hpp"

#include "commands.hpp"

#include <attnrank/error.hpp>

#include <string>

namespace attnrank::cli {
namespace {
ParseLimits current_limits;
}

const ParseLimits& input_limits() { return current_limits; }

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"attnrank: trustworthy numerics of multi-head attention (exact, certified, numeric)", "attnrank"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attnrank 0.1.0");
  current_limits = ParseLimits{};
  std::size_t max_size = default_max_dimension;
  app.add_option("--max-size", max_size,
                 "Largest n (rows, columns, spec size) a matrix may have; before the command (default 8192)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->each([](const std::string& v) { current_limits.max_rows = current_limits.max_columns = std::stoul(v); });
  std::string text;
  add_example_command(app, text);
  add_layer_command(app, text);
  add_rank_command(app, text);
  add_det_command(app, text);
  add_reach_command(app, text);
  add_sweep_command(app, text);
  add_appendix_command(app, text);
  try {
    if (argc > 1 && argv[1][0] != '-') {
      try {
        app.get_subcommand(argv[1]);
      } catch (const CLI::OptionNotFound&) {
        throw input_error("unknown command '" + std::string(argv[1]) + "' (commands: example, layer, rank, det, reach, sweep, appendix)");
      }
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help, --version: stdout, exit 0
    err << "attnrank: " << e.what() << "\nRun 'attnrank --help' for usage.\n";
    return 2;
  } catch (const input_error& e) {
    err << "attnrank: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "attnrank: internal error: " << e.what() << "\n";
    return 1;
  }
  out << text << std::flush;
  return 0;
}

}  // namespace attnrank::cli
