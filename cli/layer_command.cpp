// attnrank layer: the forward pass on the user's own matrices, in any tier.
#include "commands.hpp"

#include <attnrank/analysis/layer_analysis.hpp>

#include <attnrank/attention/mask.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/io/safetensors.hpp>
#include <attnrank/io/torch_weights.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnrank::cli {
namespace {

/// The library names matrices by symbol (the error's subject: "W^O"); the user
/// needs the file too, so a message about one matrix gets that matrix's path.
[[noreturn]] void rethrow_with_file(const input_error& e, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [symbol, path] : files)
    if (e.subject() == symbol) throw input_error(path + ": " + e.what(), symbol);
  throw e;
}

}  // namespace

void add_layer_command(CLI::App& app, Run& run) {
  auto* cmd = add_question_command(app, "layer", "layer");
  struct Options {
    std::string x, wq, wk, wv, wo, state_dict, tier = "interval";
    bool torch_layout = false;
    long heads = 0;
    std::optional<int> digits, significant;
    unsigned bits = default_layer_bits;
    std::vector<std::string> masks;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("--x", opt->x, option_help("layer", "x") + " (a matrix file: text, .npy, F.safetensors:NAME)")->required();
  auto* wq = cmd->add_option("--wq", opt->wq, option_help("layer", "wq"));
  auto* wk = cmd->add_option("--wk", opt->wk, option_help("layer", "wk"));
  auto* wv = cmd->add_option("--wv", opt->wv, option_help("layer", "wv"));
  auto* wo = cmd->add_option("--wo", opt->wo, option_help("layer", "wo"));
  cmd->add_flag("--torch-layout", opt->torch_layout,
                "--wq, --wk, --wv, --wo are PyTorch's out x in (nn.Linear.weight): each is transposed on reading");
  cmd->add_option("--state-dict", opt->state_dict,
                  "FILE.safetensors[:PREFIX]: an nn.MultiheadAttention's state dict (in_proj_weight, out_proj.weight, "
                  "transposed to attnrank's layout) instead of --wq --wk --wv --wo")
      ->excludes(wq)
      ->excludes(wk)
      ->excludes(wv)
      ->excludes(wo)
      ->excludes("--torch-layout");  // a state dict is always in PyTorch's layout
  cmd->add_option("--heads", opt->heads, option_help("layer", "heads"))->required()->check(CLI::Range(1L, 1L << 20));
  cmd->add_option("--tier", opt->tier,
                  option_help("layer", "tier"))
      ->check(CLI::IsMember({"double", "certified-double", "mp", "interval"}));
  auto* digits = cmd->add_option("--digits", opt->digits,
                                 option_help("layer", "digits"))
                     ->check(CLI::Range(0, max_digits));
  cmd->add_option("--significant", opt->significant,
                  option_help("layer", "significant"))
      ->check(CLI::Range(1, max_digits))
      ->excludes(digits);
  cmd->add_option("--bits", opt->bits, option_help("layer", "bits"))
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--mask", opt->masks,
                  option_help("layer", "mask") + " (a matrix file; the flag repeated per head)");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &run] {
    const ParseLimits& limits = run.limits;
    const Matrix<Rational> X = run.read(opt->x);
    AttentionWeights w;
    if (!opt->state_dict.empty()) {
      const auto st = split_safetensors_argument(opt->state_dict);
      if (!st)
        throw input_error("--state-dict '" + opt->state_dict + "': expected FILE.safetensors or FILE.safetensors:PREFIX");
      w = read_torch_attention(st->path, st->rest, limits);
      opt->wq = opt->wk = opt->wv = opt->wo = st->path;  // messages about a weight name the file
    } else {
      if (opt->wq.empty() || opt->wk.empty() || opt->wv.empty() || opt->wo.empty())
        throw input_error("layer needs the weights: --wq, --wk, --wv and --wo, or --state-dict FILE.safetensors");
      w = {run.read(opt->wq), run.read(opt->wk), run.read(opt->wv), run.read(opt->wo)};
      if (opt->torch_layout)
        for (Matrix<Rational>* m : {&w.wq, &w.wk, &w.wv, &w.wo}) *m = from_torch_layout(*m);
    }
    const Matrix<Rational>&wq = w.wq, &wk = w.wk, &wv = w.wv, &wo = w.wo;
    LayerQuestion q{parse_layer_tier(opt->tier), layer_format(opt->digits, opt->significant), opt->bits, {}, opt->json};
    for (const std::string& m : opt->masks)
      if (auto mask = run.read_mask(m, X.rows(), opt->x + " (X)")) q.masks.push_back(std::move(*mask));
      else if (opt->masks.size() > 1) q.masks.push_back(Mask::full(X.rows()));
    try {
      const MultiHeadAttention<Rational> layer(wq, wk, wv, wo, opt->heads);
      const LayerAnalysis t = analyze_layer(layer, X, q);
      if (opt->json) run.print(to_json(t));
      else run.print(to_text(t));
    } catch (const input_error& e) {
      rethrow_with_file(e, {{"X", opt->x}, {"W^Q", opt->wq}, {"W^K", opt->wk}, {"W^V", opt->wv}, {"W^O", opt->wo}});
    }
  });
}

}  // namespace attnrank::cli
