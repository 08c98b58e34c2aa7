// The attnrank command line (run.hpp).
#include "run.hpp"

#include "commands.hpp"

#include <attnrank/error.hpp>
#include <attnrank/out_of_memory.hpp>

#include <new>
#include <string>

namespace attnrank::cli {
namespace {
ParseLimits current_limits;

/// Reads [+-]digits at `at`; returns how many digits it read.
std::size_t read_digits(const std::string& v, std::size_t& at, bool sign) {
  if (sign && at < v.size() && (v[at] == '+' || v[at] == '-')) ++at;
  const std::size_t from = at;
  while (at < v.size() && v[at] >= '0' && v[at] <= '9') ++at;
  return at - from;
}

/// Options are decimal only. CLI11 converts integers with strtoll in base 0, so
/// "010" would be 8 and "0x1" 1, and floats with strtold, which takes "nan",
/// "inf" and hex floats; these checks refuse all of that before conversion.
const CLI::Validator decimal_integer(
    [](std::string& v) -> std::string {
      std::size_t at = 0;
      if (!(read_digits(v, at, true) > 0 && at == v.size())) return "'" + v + "' is not a decimal integer (digits only, e.g. 3)";
      // Leading zeros are dropped, so that "010" is ten (strtoll would read octal).
      const std::size_t digits = (v[0] == '+' || v[0] == '-') ? 1 : 0;
      const std::size_t first = std::min(v.find_first_not_of('0', digits), v.size() - 1);
      v = (v[0] == '-' ? "-" : "") + v.substr(first);
      return "";
    },
    "", "decimal integer");
const CLI::Validator decimal_number(
    [](std::string& v) -> std::string {
      std::size_t at = 0;
      std::size_t digits = read_digits(v, at, true);
      if (at < v.size() && v[at] == '.') digits += read_digits(v, ++at, false);
      bool ok = digits > 0;
      if (ok && at < v.size() && (v[at] == 'e' || v[at] == 'E')) ok = read_digits(v, ++at, true) > 0;
      ok = ok && at == v.size();
      return ok ? "" : "'" + v + "' is not a finite decimal number (e.g. 0.5 or 1e-12)";
    },
    "", "decimal number");

/// Puts the decimal checks on every numeric option of `app` and its subcommands.
void require_decimal_options(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string full_type = o->get_type_name();  // "FLOAT:FLOAT in [0 - 1e+308]" once a range is set
    const std::string type = full_type.substr(0, full_type.find(':'));
    // transform(): first in line, before any range check reads the text.
    if (type == "INT" || type == "UINT") o->transform(decimal_integer);
    else if (type == "FLOAT") o->transform(decimal_number);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_decimal_options(*sub);
}
}  // namespace

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
  add_svd_command(app, text);
  add_width_command(app, text);
  add_sweep_command(app, text);
  add_appendix_command(app, text);
  require_decimal_options(app);
  std::string context = "attnrank";
  for (int i = 1; i < argc && context.size() < 200; ++i) context += std::string(" ") + argv[i];
  set_out_of_memory_context("while running '" + context.substr(0, 200) + "'");
  try {
    if (argc > 1 && argv[1][0] != '-') {
      try {
        app.get_subcommand(argv[1]);
      } catch (const CLI::OptionNotFound&) {
        throw input_error("unknown command '" + std::string(argv[1]) + "' (commands: example, layer, rank, det, reach, svd, width, sweep, appendix)");
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
  } catch (const std::bad_alloc&) {
    err << out_of_memory_message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "attnrank: internal error: " << e.what() << "\n";
    return 1;
  }
  out << text << std::flush;
  return 0;
}

}  // namespace attnrank::cli
