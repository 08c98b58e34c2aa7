// The attnrank command. Exit codes: 0 on success (any verdict), 2 on bad input
// or usage (message on stderr, nothing on stdout), 1 on an internal error.
#include "commands.hpp"

#include <attnrank/error.hpp>

#include <iostream>

int main(int argc, char** argv) {
  using namespace attnrank::cli;
  CLI::App app{"attnrank: trustworthy numerics of multi-head attention (exact, certified, numeric)", "attnrank"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attnrank 0.1.0");
  std::string out;
  add_example_command(app, out);
  add_layer_command(app, out);
  add_rank_command(app, out);
  add_det_command(app, out);
  add_reach_command(app, out);
  add_sweep_command(app, out);
  add_appendix_command(app, out);
  try {
    if (argc > 1 && argv[1][0] != '-') {
      try {
        app.get_subcommand(argv[1]);
      } catch (const CLI::OptionNotFound&) {
        throw attnrank::input_error("unknown command '" + std::string(argv[1]) + "' (commands: example, layer, rank, det, reach, sweep, appendix)");
      }
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version: stdout, exit 0
    std::cerr << "attnrank: " << e.what() << "\nRun 'attnrank --help' for usage.\n";
    return 2;
  } catch (const attnrank::input_error& e) {
    std::cerr << "attnrank: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attnrank: internal error: " << e.what() << "\n";
    return 1;
  }
  std::cout << out << std::flush;
  return 0;
}
