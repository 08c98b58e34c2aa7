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
#include <tuple>

namespace attnrank::cli {
namespace {

/// The band error_lower..error_upper of each d_k on a log axis (E* = 0 at its foot),
/// epsilon dashed across as given, the widths proven to miss, the widths within
/// epsilon and the bracket between them marked; sized from its own texts, so that
/// nothing is clipped (tests/cli/svg_render.py renders it).
std::string width_svg(const WidthResult& w, const std::string& name) {
  const std::string eps = shortest_decimal(w.epsilon);
  const std::string title = name + ": certified max error E* of the best head of width d_k";
  const std::string bracket =
      w.width_upper == 0 ? "smallest width within epsilon \u2265 " + std::to_string(w.width_lower) +
                               " (none within epsilon up to d_k = " + std::to_string(w.max_dk) + ")"
      : w.width_upper == w.width_lower ? "smallest width within epsilon = " + std::to_string(w.width_upper)
                                       : "smallest width within epsilon in " + std::to_string(w.width_lower) + ".." +
                                             std::to_string(w.width_upper);
  const std::string key = "each band proven both ways: error_lower <= E* <= error_upper; red: proven above epsilon, "
                          "green: proven within, blue: undecided";
  // The axis: decades from below the smallest positive bound to above the largest.
  double low = w.epsilon > 0 ? w.epsilon : 1.0, high = std::max(w.epsilon, 1e-300);
  for (const WidthProfileEntry& e : w.profile) {
    if (e.error_lower > 0) low = std::min(low, e.error_lower);
    if (e.error_upper > 0 && std::isfinite(e.error_upper)) low = std::min(low, e.error_upper);
    if (std::isfinite(e.error_upper)) high = std::max(high, e.error_upper);
  }
  const double decade_low = std::floor(std::log10(std::max(low, 1e-300))) - (low > 0 ? 0 : 1);
  const double decade_high = std::max(std::ceil(std::log10(std::max(high, 1e-300))), decade_low + 1);
  const double left = 24 + text_width("1e-300", 10) + 8, top = 82, plot_h = 300;
  const double step = std::clamp(560.0 / static_cast<double>(std::max<std::size_t>(w.profile.size(), 1)), 8.0, 48.0);
  const double plot_w = step * static_cast<double>(std::max<std::size_t>(w.profile.size(), 1));
  const double epsilon_label_w = text_width("epsilon = " + eps, 11);
  double width = left + plot_w + 16 + epsilon_label_w + 16;
  for (const auto& [t, size, bold] : {std::tuple{title, 14.0, true}, {bracket, 12.0, false}, {key, 11.0, false}})
    width = std::max(width, 16 + text_width(t, size, bold) + 16);
  width = std::ceil(width);
  const double height = top + plot_h + 60;
  const double log_h = plot_h - 20;  // the decades; below them a strip for E* = 0
  const auto y_of_decade = [&](double d) { return top + log_h - (d - decade_low) / (decade_high - decade_low) * log_h; };
  const auto y_of = [&](double v) {
    if (!(v > 0)) return top + plot_h;  // E* = 0: the axis' foot
    return y_of_decade(std::clamp(std::log10(v), decade_low, decade_high));
  };
  Svg svg(width, height, "certified error band of " + name);
  svg.text(16, 22, title, 14, "start", true);
  svg.text(16, 42, bracket, 12);
  svg.text(16, 60, key, 11, "start", false, "#444444");
  // The bracket: the d_k columns from width_lower to width_upper (or to max_dk), shaded behind the bands.
  const Eigen::Index bracket_end = w.width_upper ? w.width_upper : w.max_dk;
  for (std::size_t i = 0; i < w.profile.size(); ++i) {
    const Eigen::Index dk = w.profile[i].dk;
    if (dk >= w.width_lower && dk <= bracket_end)
      svg.rect(left + step * static_cast<double>(i), top, step, plot_h, "#f2f2f2", "bracket");
  }
  const double every = std::ceil((decade_high - decade_low) / 10);  // at most about ten labelled decades
  for (double d = decade_high; d >= decade_low - 1e-9; d -= every) {
    const double y = y_of_decade(d);
    svg.line(left, y, left + plot_w, y, "#dddddd");
    svg.text(left - 6, y + 4, "1e" + std::to_string(static_cast<long>(d)), 10, "end");
  }
  svg.line(left, top, left, top + plot_h, "#333");
  svg.line(left, top + plot_h, left + plot_w, top + plot_h, "#333");
  for (std::size_t i = 0; i < w.profile.size(); ++i) {
    const WidthProfileEntry& e = w.profile[i];
    const double x = left + step * static_cast<double>(i);
    const double hi_y = std::isfinite(e.error_upper) ? y_of(e.error_upper) : top;
    const std::string colour = e.error_lower > w.epsilon ? "#e6550d" : e.error_upper <= w.epsilon ? "#31a354" : "#6baed6";
    svg.rect(x + step * 0.15, hi_y, step * 0.7, std::max(y_of(e.error_lower) - hi_y, 1.5), colour, "band",
             "d_k = " + std::to_string(e.dk) + ": " + format_lower_bound(e.error_lower) + " <= E* <= " +
                 format_upper_bound(e.error_upper));
    if (w.profile.size() <= 32 || (i + 1) % 8 == 0)
      svg.text(x + step / 2, top + plot_h + 16, std::to_string(e.dk), 10, "middle");
  }
  svg.line(left, y_of(w.epsilon), left + plot_w, y_of(w.epsilon), "#d62728", 1.5, true);
  svg.text(left + plot_w + 6, y_of(w.epsilon) + 4, "epsilon = " + eps, 11, "start", false, "#d62728");
  svg.text(left + plot_w / 2, top + plot_h + 36, "d_k (grey: the bracket)", 12, "middle");
  svg.text(left - 6, top + plot_h + 4, "0", 10, "end");  // E* = 0, at the foot
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
