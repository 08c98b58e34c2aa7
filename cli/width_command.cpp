// attnrank width: the smallest head width that comes within epsilon, bracketed
// by certified bounds, with the error band per d_k.
#include "commands.hpp"
#include "run.hpp"
#include "svg.hpp"

#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/masked.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

namespace attnrank::cli {
namespace {

using nlohmann::json;

std::string lower_text(double x) { return format_lower_bound(x); }

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
             "d_k = " + std::to_string(e.dk) + ": " + lower_text(e.error_lower) + " <= E* <= " +
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

void add_width_command(CLI::App& app, std::string& out) {
  auto* cmd = app.add_subcommand("width", "The smallest head width within epsilon of a target, with certified bounds");
  struct Options {
    std::string target, svg, mask = "none";
    double epsilon = -1;
    long max_dk = 0;
    std::uint64_t seed = 1;
    bool json = false, no_search = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("TARGET", opt->target, "Target attention matrix: a matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or diag:N:P")->required();
  cmd->add_option("--epsilon", opt->epsilon, "Largest acceptable max |softmax(Q K^T / sqrt(d_k)) - A| entry, in [0, 1]")->required();
  cmd->add_option("--max-dk", opt->max_dk, "Largest width to try (default: min(n, 16))");
  cmd->add_option("--seed", opt->seed, "Seed of the optimiser's restarts (printed)");
  cmd->add_flag("--no-search", opt->no_search,
                "Skip the optimiser: the bracket from the log-domain starts alone (fast; the upper bounds may be looser)");
  cmd->add_option("--mask", opt->mask,
                  "causal, none, or a file of 0s and 1s (1: the query may attend): widths of a masked head (the target "
                  "must be 0 exactly at the masked positions)");
  cmd->add_option("--svg", opt->svg, "Also draw the certified error band against d_k (SVG file)");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &out] {
    const Matrix<Rational> A = read_input(opt->target);
    validate_target(A, opt->target);
    if (!(opt->epsilon >= 0 && opt->epsilon <= 1))
      throw input_error("--epsilon " + std::to_string(opt->epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
    const Eigen::Index n = A.rows();
    const Eigen::Index max_dk = opt->max_dk == 0 ? std::min<Eigen::Index>(n, 16) : opt->max_dk;
    if (max_dk < 1 || max_dk > n)
      throw input_error("--max-dk " + std::to_string(opt->max_dk) + " is out of range: 1 <= max d_k <= n = " + std::to_string(n));
    ApproxOptions o;
    o.seed = opt->seed;
    o.optimise = !opt->no_search;
    const std::optional<Mask> mask = read_mask_input(opt->mask, n, opt->target);
    if (mask) validate_masked_target(A, *mask, opt->target);
    const WidthResult w = mask ? approx_width(A, opt->epsilon, max_dk, *mask, o) : approx_width(A, opt->epsilon, max_dk, o);
    if (!opt->svg.empty()) write_text_file(opt->svg, width_svg(w, opt->target));
    if (opt->json) {
      json profile = json::array();
      for (const WidthProfileEntry& e : w.profile)
        profile.push_back({{"d_k", e.dk}, {"error_lower", lower_bound_json(e.error_lower)},
                           {"error_upper", upper_bound_json(e.error_upper)}});
      json j{{"n", n},
             {"epsilon", opt->epsilon},
             {"max_d_k", max_dk},
             {"mask", mask ? mask->name() : "none"},
             {"width_lower", w.width_lower},
             {"width_upper", w.width_upper == 0 ? json(nullptr) : json(w.width_upper)},
             {"seed", opt->seed},
             {"profile", profile}};
      out = json_document(j, "width");
      return;
    }
    std::ostringstream t;
    t << "target " << opt->target << " (n = " << n << ")" << (mask ? ", mask " + mask->name() + " (masked heads)" : "")
      << ", epsilon = " << opt->epsilon << " (max entrywise error)\n";
    if (w.width_upper != 0 && w.width_upper == w.width_lower)
      t << "smallest width within epsilon: d_k = " << w.width_upper << " (certified both ways)\n";
    else if (w.width_upper != 0)
      t << "smallest width within epsilon: " << w.width_lower << " <= d_k <= " << w.width_upper << " ("
        << (w.width_lower > 1 ? "every d_k below " + std::to_string(w.width_lower) + " is proven to miss"
                              : "no width is proven to miss")
        << "; a certified witness at " << w.width_upper << ")\n";
    else if (w.width_lower > max_dk)
      t << "no head of width <= " << max_dk << " comes within epsilon (every one is proven to miss)\n";
    else
      t << "smallest width within epsilon: >= " << w.width_lower << "; no certified witness within epsilon up to d_k = "
        << max_dk << " (raise --max-dk, or the gap between the bounds is the honest answer)\n";
    t << "  d_k   error_lower <= E* <= error_upper   (certified)\n";
    for (const WidthProfileEntry& e : w.profile)
      t << "  " << e.dk << (e.dk < 10 ? "     " : e.dk < 100 ? "    " : "   ") << lower_text(e.error_lower)
        << " <= E* <= " << format_upper_bound(e.error_upper) << "\n";
    if (opt->no_search)
      t << "  upper bounds from the " << (mask ? "masked completion's fit" : "log-domain starts") << " only (--no-search); the optimiser may lower them\n";
    else
      t << "  seed " << opt->seed << " (optimiser restarts, run only where the answer was open; the bounds are certified whatever the seed)\n";
    out = t.str();
  });
}

}  // namespace attnrank::cli
