// attnrank scan: every head of an attention tensor (analysis/scan_analysis.hpp),
// on all cores, as a table, one JSON document, or JSON lines streamed as heads finish.
#include "commands.hpp"
#include "svg.hpp"

#include <attnrank/analysis/scan_analysis.hpp>
#include <attnrank/io/double_tensor.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>

namespace attnrank::cli {
namespace {

/// The heads of every file, in order; several files add a leading file index.
HeadStack read_stack(const std::vector<std::string>& arguments, const ParseLimits& limits) {
  HeadStack stack;
  stack.name = arguments.size() == 1 ? arguments.front() : arguments.front() + " (and " +
                                                               std::to_string(arguments.size() - 1) + " more)";
  for (std::size_t f = 0; f < arguments.size(); ++f) {
    DoubleTensor t = read_matrix_stack(arguments[f], limits);
    if (f == 0) {
      stack.shape = t.shape;
      if (arguments.size() > 1) stack.shape.insert(stack.shape.begin(), arguments.size());
    }
    for (std::size_t k = 0; k < t.matrices.size(); ++k) {
      std::vector<std::size_t> index = t.leading_index(k);
      if (arguments.size() > 1) index.insert(index.begin(), f);
      stack.index.push_back(std::move(index));
      stack.patterns.push_back(std::move(t.matrices[k]));
    }
  }
  return stack;
}

/// What the heatmap shows of a head: the minimal width (its upper bound, else
/// its lower bound), or E* at d_k (its upper bound), or the floor.
double heat_value(const HeadScan& h, const ScanQuestion& q) {
  if (q.epsilon && h.width_lower) return static_cast<double>(h.width_upper.value_or(*h.width_lower));
  if (q.dk && h.error_upper) return *h.error_upper;
  return static_cast<double>(h.floor_upper);
}

/// Rows: every leading index but the last (layers); columns: the last (heads).
std::string scan_svg(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads) {
  std::size_t cols = 1;
  for (const HeadScan& h : heads)
    if (!h.index.empty()) cols = std::max(cols, h.index.back() + 1);
  const std::size_t rows = (heads.size() + cols - 1) / cols;
  Eigen::MatrixXd values = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
  std::vector<std::vector<std::string>> labels(rows, std::vector<std::string>(cols));
  double top = 0;
  for (const HeadScan& h : heads) top = std::max(top, heat_value(h, q));
  for (std::size_t t = 0; t < heads.size(); ++t) {
    const double v = heat_value(heads[t], q);
    values(static_cast<Eigen::Index>(t / cols), static_cast<Eigen::Index>(t % cols)) = top > 0 ? v / top : 0;
    std::ostringstream l;
    if (q.epsilon || !q.dk) l << v;
    else l << format_upper_bound(v, 2);
    labels[t / cols][t % cols] = l.str();
  }
  std::vector<std::string> row_labels, col_labels;
  for (std::size_t r = 0; r < rows; ++r) row_labels.push_back(std::to_string(r));
  for (std::size_t c = 0; c < cols; ++c) col_labels.push_back(std::to_string(c));
  const std::string what = q.epsilon ? "smallest width within epsilon (certified upper bound)"
                           : q.dk    ? "E* at d_k (certified upper bound)"
                                     : "floor of each head (upper bound)";
  const double cell = cols > 32 ? 14 : 28;
  Svg svg(std::max(560.0, 80 + cell * static_cast<double>(cols) + 40), 110 + cell * static_cast<double>(rows),
          "scan of " + stack.name);
  heatmap(svg, 60, 60, cell, values, labels, row_labels, col_labels, stack.name + ": " + what);
  return svg.str();
}

}  // namespace

void add_scan_command(CLI::App& app, Run& run) {
  auto* cmd = app.add_subcommand("scan", "Every head of an attention tensor (..., n, n): floors, verdicts, error and width bands");
  struct Options {
    std::vector<std::string> tensors;
    std::string mask = "none", svg;
    long dk = 0, max_dk = 0;
    double epsilon = -1;
    unsigned jobs = 0;
    std::uint64_t seed = 1;
    RefineFlags refine;
    bool json = false, jsonl = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("TENSOR", opt->tensors,
                  "Attention patterns: .npy of shape (..., n, n), F.safetensors:NAME, or several files (a leading file index)")
      ->required();
  CLI::Option* dk = cmd->add_option("--dk", opt->dk, "Also the verdict and the certified error band at this head width");
  CLI::Option* epsilon =
      cmd->add_option("--epsilon", opt->epsilon, "Also the certified band on the smallest width within this max error");
  CLI::Option* max_dk =
      cmd->add_option("--max-dk", opt->max_dk, "Largest width tried for --epsilon, 1 <= D <= n (default: min(n, 16))");
  cmd->add_option("--mask", opt->mask, "causal, none, or a 0/1 file: every head is masked so");
  cmd->add_option("--jobs", opt->jobs, "Heads computed at once (default: every core)");
  cmd->add_option("--seed", opt->seed, "Seed of the optimiser's restarts (printed)");
  add_refine_options(cmd, opt->refine);
  cmd->add_option("--svg", opt->svg, "Also draw a heatmap (rows: leading indices, columns: heads) of the minimal width or E*");
  auto* json = cmd->add_flag("--json", opt->json, "Print one JSON document");
  cmd->add_flag("--jsonl", opt->jsonl, "Print one JSON line per head as it finishes (a long scan can be followed)")
      ->excludes(json);
  cmd->callback([opt, dk, epsilon, max_dk, &run] {
    const HeadStack stack = read_stack(opt->tensors, run.limits);
    ScanQuestion q;
    if (dk->count() > 0) q.dk = opt->dk;
    if (epsilon->count() > 0) q.epsilon = opt->epsilon;
    if (max_dk->count() > 0) q.max_dk = opt->max_dk;
    q.jobs = opt->jobs;
    q.seed = opt->seed;
    q.refine = refine_options(opt->refine, RefinePolicy::automatic, run, "refining");
    q.refine.on_progress = {};  // one progress line per scan (heads done), not per search
    if (!stack.patterns.empty())
      q.mask = run.read_mask(opt->mask, stack.patterns.front().rows(), stack.name);
    validate(stack, q);
    const auto start = std::chrono::steady_clock::now();
    std::size_t done = 0;
    const std::size_t total = stack.patterns.size();
    const auto on_head = [&](const HeadScan& h) {
      ++done;
      if (opt->jsonl && run.stream) *run.stream << to_json(h).dump() << "\n" << std::flush;
      if (run.progress) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        *run.progress << "\rattnrank: scan: " << done << " / " << total << " heads, " << std::lround(elapsed)
                      << " s, about " << std::lround(elapsed / static_cast<double>(done) * static_cast<double>(total - done))
                      << " s to go   " << std::flush;
        run.progress_shown = true;
      }
    };
    const std::vector<HeadScan> heads = analyze_scan(stack, q, on_head);
    if (!opt->svg.empty()) write_text_file(opt->svg, scan_svg(stack, q, heads));
    if (opt->jsonl) return;  // every line is out already
    if (opt->json) run.print(scan_document(stack, q, heads));
    else run.print(scan_text(stack, q, heads));
  });
}

}  // namespace attnrank::cli
