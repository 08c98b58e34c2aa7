// The attnrank command line (run.hpp).
#include "run.hpp"

#include <unistd.h>

#include <iostream>

#include "commands.hpp"

#include <attnrank/error.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/out_of_memory.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cctype>
#include <new>
#include <vector>
#include <string>

namespace attnrank::cli {
namespace {

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
      // CLI11 saturates a value past 64 bits (d_k = 99999999999999999999999 would read as 2^63 - 1).
      const std::string magnitude = v[0] == '-' ? v.substr(1) : v, limit = "9223372036854775807";
      if (magnitude.size() > limit.size() || (magnitude.size() == limit.size() && magnitude > limit))
        return "'" + v + "' is too large for a whole number (at most " + limit + " in magnitude)";
      return "";
    },
    "", "decimal integer");
/// The same for options that take a count (UINT): no sign, so "-1" is refused with
/// the values allowed instead of CLI11's "Could not convert".
const CLI::Validator decimal_count(
    [](std::string& v) -> std::string {
      if (!v.empty() && v[0] == '-') return "'" + v + "' is negative; this option takes a whole number >= 0 (e.g. 2)";
      return decimal_integer(v);
    },
    "", "decimal count");
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

/// One line per command: what `attnrank` and `attnrank help` print.
std::string command_list(CLI::App& app) {
  std::string s = "attnrank: trustworthy numerics of multi-head attention (exact, certified, numeric)\n\n"
                  "usage: attnrank [--max-size N] [--max-file-size BYTES] COMMAND [options]   (attnrank COMMAND --help for its options)\n\n"
                  "commands:\n";
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    std::string name = sub->get_name();
    name.resize(std::max<std::size_t>(name.size() + 2, 10), ' ');
    s += "  " + name + sub->get_description() + "\n";
  }
  return s + "  help      this list; attnrank help COMMAND shows that command's options\n";
}

/// Edit distance of option names once case, dashes and underscores are set aside:
/// "--d_k" is "--dk", "--epsilom" is one edit from "--epsilon".
std::size_t name_distance(std::string a, std::string b) {
  const auto normal = [](std::string& s) {
    std::string t;
    for (char c : s)
      if (c != '-' && c != '_') t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    s = t;
  };
  normal(a);
  normal(b);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// " (did you mean --dk?)" for each unexpected option of `message` that is close
/// to a real option of the command that was given, or "". Only for options that
/// do not exist: a real option with a bad value gets no suggestion.
std::string suggestions(const std::string& message, CLI::App& app) {
  std::vector<std::string> names;
  const auto collect = [&](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options())
      for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  };
  collect(app);
  for (const CLI::App* sub : app.get_subcommands()) collect(*sub);
  std::string out;
  std::size_t at = message.find(": ");
  while (at != std::string::npos) {
    at = message.find("-", at);
    if (at == std::string::npos) break;
    const std::size_t end = message.find_first_of(" =", at);
    const std::string given = message.substr(at, end - at);
    at = end;
    if (given.size() < 2 || given[1] != '-') continue;
    std::string best;
    std::size_t best_distance = 3;
    for (const std::string& n : names)
      if (const std::size_t d = name_distance(given, n); d < best_distance) best = n, best_distance = d;
    if (!best.empty() && best != given) out += " (did you mean " + best + " instead of " + given + "?)";
  }
  return out;
}

/// CLI11's "Could not convert: --jobs = X" as what the option takes: its name, the
/// value given, and the values allowed (by the option's type).
std::string conversion_message(const std::string& message, CLI::App& app) {
  const std::size_t colon = message.find(": "), equals = message.find(" = ");
  if (colon == std::string::npos || equals == std::string::npos || equals < colon) return message;
  const std::string name = message.substr(colon + 2, equals - colon - 2), value = message.substr(equals + 3);
  std::string type;
  const auto find = [&](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options())
      for (const std::string& l : o->get_lnames())
        if ("--" + l == name) type = o->get_type_name().substr(0, o->get_type_name().find(':'));
  };
  find(app);
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) find(*sub);
  const std::string allowed = type == "UINT"  ? "a whole number >= 0 that fits its range"
                              : type == "INT" ? "a whole number that fits its range"
                              : type == "FLOAT" ? "a finite decimal number"
                                               : "a value of its type";
  return name + " = " + value + " is not a value this option takes (" + allowed + ")";
}

/// Puts the decimal checks on every numeric option of `app` and its subcommands.
void require_decimal_options(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string full_type = o->get_type_name();  // "FLOAT:FLOAT in [0 - 1e+308]" once a range is set
    const std::string type = full_type.substr(0, full_type.find(':'));
    // transform(): first in line, before any range check reads the text.
    if (type == "UINT") o->transform(decimal_count);
    else if (type == "INT") o->transform(decimal_integer);
    else if (type == "FLOAT") o->transform(decimal_number);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_decimal_options(*sub);
}
}  // namespace

Matrix<Rational> Run::read(const std::string& argument) { return read_matrix_argument(argument, limits, &notes); }

std::optional<Mask> Run::read_mask(const std::string& argument, Eigen::Index n, const std::string& what) {
  return read_mask_argument(argument, n, what, limits);
}

std::function<void(const SearchProgress&)> Run::search_progress(const std::string& what) {
  if (!progress) return {};
  return [this, what](const SearchProgress& p) {
    std::ostream* to = progress;
    progress_shown = true;
    *to << "\rattnrank: " << what << ": " << p.evaluations << " evaluations, best max error ~" << p.approx_best
        << " (uncertified), " << static_cast<long>(p.elapsed_seconds * 10) / 10.0 << " s";
    if (p.time_limit_seconds) *to << " of " << *p.time_limit_seconds << " s";
    *to << "   " << std::flush;
  };
}

CLI::App* add_question_command(CLI::App& app, const std::string& command, std::string_view question) {
  const QuestionHelp& h = question_help(question);
  CLI::App* cmd = app.add_subcommand(command, h.title);
  cmd->footer(h.details);
  return cmd;
}

void add_refine_options(CLI::App* cmd, RefineFlags& flags, std::string_view question) {
  // One library text says what refine means; the command line spells its three
  // values as two flags (neither: the default).
  CLI::Option* refine = cmd->add_flag("--refine", flags.refine, "Yes. " + option_help(question, "refine"));
  cmd->add_flag("--no-search", flags.no_search, "No: the cheap band only")
      ->excludes(refine);
  cmd->add_option("--time-limit", flags.time_limit, option_help(question, "time_limit"))
      ->type_name("SECONDS");
}

RefineOptions refine_options(const RefineFlags& flags, Run& run, const std::string& what) {
  RefineOptions o = attnrank::refine_options(flags.refine ? std::optional<bool>(true)
                                             : flags.no_search ? std::optional<bool>(false)
                                                               : std::nullopt,
                                             flags.time_limit);
  o.on_progress = run.search_progress(what);
  return o;
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Run state;
  if (&err == &std::cerr && isatty(2)) state.progress = &err;
  state.stream = &out;
  CLI::App app{"attnrank: trustworthy numerics of multi-head attention (exact, certified, numeric)", "attnrank"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("attnrank ") + ATTNRANK_VERSION);  // CMake's project version
  std::size_t max_size = default_max_dimension;
  app.add_option("--max-size", max_size,
                 "Largest n (rows, columns, spec size) a matrix may have; before the command (default 8192)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->each([&state](const std::string& v) { state.limits = size_limits(std::stoul(v), state.limits); });
  std::string max_file_size;  // text: "1GB" passes AsSizeValue, not the decimal-count check of UINT options
  app.add_option("--max-file-size", max_file_size,
                 "Largest file (bytes; 1GB, 512MiB...) attnrank reads; before the command (default 256MiB)")
      ->type_name("BYTES")
      ->transform(CLI::AsSizeValue(true))  // KB = 1000, KiB = 1024
      ->each([&state](const std::string& v) { state.limits.max_file_bytes = std::stoull(v); });
  add_example_command(app, state);
  add_layer_command(app, state);
  add_rank_command(app, state);
  add_det_command(app, state);
  add_reach_command(app, state);
  add_svd_command(app, state);
  add_width_command(app, state);
  add_sweep_command(app, state);
  add_appendix_command(app, state);
  add_check_kernel_command(app, state);
  add_scan_command(app, state);
  require_decimal_options(app);
  std::string context = "attnrank";
  for (int i = 1; i < argc && context.size() < 200; ++i) context += std::string(" ") + argv[i];
  set_out_of_memory_context("while running '" + context.substr(0, 200) + "'");
  if (argc == 1 || (argc == 2 && std::string(argv[1]) == "help")) {
    out << command_list(app) << std::flush;
    return 0;
  }
  std::vector<const char*> args(argv, argv + argc);
  if (argc == 3 && std::string(argv[1]) == "help") args = {argv[0], argv[2], "--help"};  // help COMMAND
  // A progress line is cleared before anything else goes to stderr.
  const auto clear_progress = [&] {
    if (state.progress_shown) err << "\r\033[K" << std::flush;
  };
  try {
    if (args.size() > 1 && args[1][0] != '-') {
      try {
        app.get_subcommand(args[1]);
      } catch (const CLI::OptionNotFound&) {
        throw input_error("unknown command '" + std::string(args[1]) + "' (commands: example, layer, rank, det, reach, svd, width, sweep, appendix, check-kernel, scan; attnrank help lists them)");
      }
    }
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ConversionError& e) {
    // "Could not convert: --jobs = 99999999999": say what the option takes instead.
    err << "attnrank: " << conversion_message(e.what(), app) << "\nRun 'attnrank --help' for usage.\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help, --version: stdout, exit 0
    const bool unknown = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
    const std::string hint = unknown ? suggestions(e.what(), app) : "";
    err << "attnrank: " << e.what() << hint << "\nRun 'attnrank --help' for usage.\n";
    return 2;
  } catch (const input_error& e) {
    clear_progress();
    err << "attnrank: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    clear_progress();
    err << out_of_memory_message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    clear_progress();
    err << "attnrank: internal error: " << e.what() << "\n";
    return 1;
  }
  clear_progress();
  for (const std::string& note : state.notes) err << "attnrank: note: " << note << "\n";
  out << state.out << std::flush;
  return state.exit_code;
}

}  // namespace attnrank::cli
