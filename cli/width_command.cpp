// attnrank width: the smallest head width that comes within epsilon, bracketed
// by certified bounds, with the error band per d_k.
#include "commands.hpp"
#include "svg.hpp"

#include <attnrank/numbers/decimal.hpp>
#include <attnrank/analysis/width_analysis.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

namespace attnrank::cli {
namespace {

/// The band error_lower..error_upper against d_k, epsilon dashed across.
std::string width_svg(const WidthResult& w, const std::string& name) {
  const double left = 60, top = 40, plot_w = 520, plot_h = 300;
  Svg svg(left + plot_w + 40, top + plot_h + 70, "certified error band of " + name);
  svg.text(left, 24, name + ": certified max error of the best head of width d_k (band: lower..upper)", 13, "start", true);
  double top_value = w.epsilon;
  for (const WidthProfileEntry& e : w.profile)
    if (std::isfinite(e.error_upper)) top_value = std::max(top_value, e.error_upper);
  top_value = std::max(top_value * 1.1, 1e-12);
  const auto y_of = [&](double v) { return top + plot_h - std::clamp(v / top_value, 0.0, 1.0) * plot_h; };
  const double step = plot_w / static_cast<double>(std::max<std::size_t>(w.profile.size(), 1));
  svg.line(left, top, left, top + plot_h, "#333");
  svg.line(left, top + plot_h, left + plot_w, top + plot_h, "#333");
  for (std::size_t i = 0; i < w.profile.size(); ++i) {
    const WidthProfileEntry& e = w.profile[i];
    const double x = left + step * static_cast<double>(i);
    const double hi = std::isfinite(e.error_upper) ? e.error_upper : top_value;
    svg.rect(x + step * 0.15, y_of(hi), step * 0.7, std::max(y_of(e.error_lower) - y_of(hi), 1.0), "#9ecae1", "band",
             "d_k = " + std::to_string(e.dk) + ": " + format_lower_bound(e.error_lower) + " <= E* <= " +
                 format_upper_bound(e.error_upper));
    if (w.profile.size() <= 32 || (i + 1) % 8 == 0)
      svg.text(x + step / 2, top + plot_h + 16, std::to_string(e.dk), 10, "middle");
  }
  svg.line(left, y_of(w.epsilon), left + plot_w, y_of(w.epsilon), "#d62728", 1.5, true);
  svg.text(left + plot_w, y_of(w.epsilon) - 4, "epsilon = " + format_upper_bound(w.epsilon), 11, "end", false, "#d62728");
  svg.text(left + plot_w / 2, top + plot_h + 36, "d_k", 12, "middle");
  svg.text(left - 8, top + 4, format_upper_bound(top_value), 10, "end");
  svg.text(left - 8, top + plot_h, "0", 10, "end");
  return svg.str();
}

}  // namespace

void add_width_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "width", "width");
  struct Options {
    std::string target, svg, mask = "none";
    WidthQuestion question;
    RefineFlags refine;
    long max_dk = 0;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  opt->question.epsilon = -1;
  cmd->add_option("TARGET", opt->target, option_help("width", "A") + matrix_source)->required();
  cmd->add_option("--epsilon", opt->question.epsilon, option_help("width", "epsilon"))->required();
  CLI::Option* max_dk = cmd->add_option("--max-dk", opt->max_dk, option_help("width", "max_dk"));
  cmd->add_option("--seed", opt->question.seed, option_help("width", "seed"));
  add_refine_options(cmd, opt->refine, "width");
  cmd->add_option("--mask", opt->mask,
                  option_help("width", "mask") + " (a matrix file)");
  cmd->add_option("--svg", opt->svg, "Also draw the certified error band against d_k (SVG file)");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, max_dk, &run] {
    const Matrix<Rational> A = run.read(opt->target);
    validate_target(A, opt->target);
    WidthQuestion q = opt->question;
    q.target_name = opt->target;
    if (max_dk->count() > 0) q.max_dk = opt->max_dk;
    q.refine = refine_options(opt->refine, run, "searching the open widths");
    q.mask = run.read_mask(opt->mask, A.rows(), opt->target);
    const WidthAnalysis w = analyze_width(A, q);
    if (!opt->svg.empty()) write_text_file(opt->svg, width_svg(w.result, opt->target));
    if (opt->json) run.print(to_json(w));
    else run.print(to_text(w));
  });
}

}  // namespace attnrank::cli
