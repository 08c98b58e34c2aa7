// attnrank appendix: Section 2.5.4 and Appendix A, in the order of the tutorial's
// argument, every number computed and certified (analysis/appendix_analysis.hpp,
// docs/tutorial.md).
#include "commands.hpp"
#include "figures.hpp"

#include <attnrank/analysis/appendix_analysis.hpp>

#include <memory>
#include <string>
#include <vector>

namespace attnrank::cli {

void add_appendix_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand("appendix", "Section 2.5.4 and Appendix A: every number of the tutorial's argument, certified");
  struct Options {
    int digits = -1;
    bool json = false;
    std::string svg;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("--digits", opt->digits, "Certified decimals for every number (default: as the tutorial prints them)")
      ->check(CLI::Range(1, max_digits));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->add_option("--svg", opt->svg, "Also write the figures (SVG) into this directory");
  cmd->callback([opt, &run] {
    AppendixAnalysis a = analyze_appendix(AppendixQuestion{opt->digits});
    if (!opt->svg.empty()) a.figures = write_appendix_figures(appendix_figure_data(a.appendix), opt->svg);
    if (opt->json) run.print(to_json(a));
    else run.print(to_text(a));
  });
}

}  // namespace attnrank::cli
