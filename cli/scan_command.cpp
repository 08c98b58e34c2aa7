// attnrank scan: every head of an attention tensor (analysis/scan_analysis.hpp),
// on all cores, as a table, one JSON document, or JSON lines streamed as heads finish.
#include "commands.hpp"
#include "figures.hpp"
#include "svg.hpp"

#include <attnrank/analysis/scan_analysis.hpp>
#include <attnrank/io/double_tensor.hpp>
#include <attnrank/io/safetensors.hpp>
#include <attnrank/io/torch_weights.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>

namespace attnrank::cli {

/// The heads of every attention layer of a state dict on its input (--state-dict, --x, --heads).
template <class Options>
HeadStack model_stack(const Options& opt, Run& run) {
  if (opt.x.empty()) throw input_error("--state-dict needs --x: the layers' input (n x d_model)");
  if (opt.heads < 1) throw input_error("--state-dict needs --heads H (a state dict does not record the number of heads)");
  const auto st = split_safetensors_argument(opt.state_dict);
  if (!st) throw input_error("--state-dict '" + opt.state_dict + "': expected FILE.safetensors or FILE.safetensors:PREFIX");
  const std::vector<std::string> modules = torch_attention_modules(st->path, st->rest, run.limits);
  std::vector<AttentionWeights> layers;
  for (const std::string& m : modules) layers.push_back(read_torch_attention(st->path, m, run.limits));
  std::vector<Matrix<Rational>> inputs;
  const DoubleTensor x = read_matrix_stack(opt.x, run.limits);
  for (std::size_t k = 0; k < x.matrices.size(); ++k) inputs.push_back(exact_of_doubles(x.matrices[k], opt.x));
  std::optional<Mask> mask;
  if (!inputs.empty()) mask = run.read_mask(opt.mask, inputs.front().rows(), opt.x + " (X)");
  return attention_head_stack(layers, inputs, opt.heads, mask, modules, st->path);
}

void add_scan_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "scan", "scan");
  struct Options {
    std::vector<std::string> tensors;
    std::string mask = "none", svg, brackets_svg, state_dict, x;
    long heads = 0;
    long dk = 0, max_dk = 0;
    double epsilon = -1;
    unsigned jobs = 0;
    std::uint64_t seed = 1;
    RefineFlags refine;
    bool json = false, jsonl = false;
  };
  auto opt = std::make_shared<Options>();
  auto* tensors = cmd->add_option(
      "TENSOR", opt->tensors,
      option_help("scan", "tensor") + ": .npy, F.safetensors:NAME, or several files (a leading file index)");
  auto* state_dict = cmd->add_option(
      "--state-dict", opt->state_dict,
      "FILE.safetensors[:PREFIX]: scan the heads of every nn.MultiheadAttention under PREFIX instead of TENSOR "
      "(their patterns on --x, computed in double from the weights, under --mask)");
  state_dict->excludes(tensors);
  cmd->add_option("--x", opt->x,
                  "With --state-dict: each layer's input, n x d_model for every layer, or a (layers, n, d_model) "
                  ".npy / F.safetensors:NAME with each layer's own");
  cmd->add_option("--heads", opt->heads, "With --state-dict: heads per layer (a state dict does not record it)");
  CLI::Option* dk = cmd->add_option("--dk", opt->dk, option_help("scan", "d_k"));
  CLI::Option* epsilon =
      cmd->add_option("--epsilon", opt->epsilon, option_help("scan", "epsilon"));
  CLI::Option* max_dk =
      cmd->add_option("--max-dk", opt->max_dk, option_help("scan", "max_dk"));
  cmd->add_option("--mask", opt->mask, option_help("scan", "mask") + " (a matrix file)");
  cmd->add_option("--jobs", opt->jobs, option_help("scan", "jobs"));
  cmd->add_option("--seed", opt->seed, option_help("scan", "seed"));
  add_refine_options(cmd, opt->refine, "scan");
  cmd->add_option("--svg", opt->svg, "Also draw a heatmap (rows: leading indices, columns: heads) of the minimal width or E*");
  cmd->add_option("--brackets-svg", opt->brackets_svg,
                  "Also draw the width brackets (with --epsilon) as intervals, one per head");
  auto* json = cmd->add_flag("--json", opt->json, "Print one JSON document");
  cmd->add_flag("--jsonl", opt->jsonl, "Print one JSON line per head as it finishes (a long scan can be followed)")
      ->excludes(json);
  cmd->callback([opt, dk, epsilon, max_dk, &run] {
    if (opt->state_dict.empty() && opt->tensors.empty())
      throw input_error("scan needs attention patterns (TENSOR ...) or a model (--state-dict F.safetensors --x X --heads H)");
    if (!opt->brackets_svg.empty() && epsilon->count() == 0)
      throw input_error("--brackets-svg draws the width brackets of a scan with --epsilon");
    if (opt->state_dict.empty() && (!opt->x.empty() || opt->heads != 0))
      throw input_error("--x and --heads go with --state-dict (the patterns of a model's layers)");
    const HeadStack stack = opt->state_dict.empty() ? read_head_stack(opt->tensors, run.limits) : model_stack(*opt, run);
    ScanQuestion q;
    if (dk->count() > 0) q.dk = opt->dk;
    if (epsilon->count() > 0) q.epsilon = opt->epsilon;
    if (max_dk->count() > 0) q.max_dk = opt->max_dk;
    q.jobs = opt->jobs;
    q.seed = opt->seed;
    q.refine = refine_options(opt->refine, run, "refining");
    q.refine.on_progress = {};  // one progress line per scan (heads done), not per search
    if (stack.size() > 0) q.mask = run.read_mask(opt->mask, stack.pattern(0).rows(), stack.name);
    if (const std::string note = stack_note(stack.shape); !note.empty()) run.notes.push_back(stack.name + ": " + note);
    const auto start = std::chrono::steady_clock::now();
    std::size_t done = 0;
    const std::size_t total = stack.size();
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
    if (!opt->svg.empty()) write_text_file(opt->svg, scan_figure(stack, q, heads));
    if (!opt->brackets_svg.empty()) write_text_file(opt->brackets_svg, scan_brackets_figure(stack, q, heads));
    if (opt->jsonl) return;  // every line is out already
    if (opt->json) run.print(scan_document(stack, q, heads));
    else run.print(scan_text(stack, q, heads));
  });
}

}  // namespace attnrank::cli
