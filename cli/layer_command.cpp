// attnrank layer: the forward pass on the user's own matrices, in any tier.
#include "commands.hpp"
#include "layer_report.hpp"

#include <attnrank/parse.hpp>

namespace attnrank::cli {

void add_layer_command(CLI::App& app, std::string& out) {
  auto* cmd = app.add_subcommand("layer", "Multi-head attention on your matrices (CSV files), with every step");
  struct Options {
    std::string x, wq, wk, wv, wo, tier = "interval";
    long heads = 0;
    int digits = 6;
    unsigned bits = 128;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("--x", opt->x, "Embeddings X, n x d_model (CSV)")->required();
  cmd->add_option("--wq", opt->wq, "W^Q, d_model x h d_k (CSV)")->required();
  cmd->add_option("--wk", opt->wk, "W^K, d_model x h d_k (CSV)")->required();
  cmd->add_option("--wv", opt->wv, "W^V, d_model x h d_v (CSV)")->required();
  cmd->add_option("--wo", opt->wo, "W^O, h d_v x d_model (CSV)")->required();
  cmd->add_option("--heads", opt->heads, "Number of heads h")->required()->check(CLI::Range(1L, 1L << 20));
  cmd->add_option("--tier", opt->tier,
                  "interval (default: exact projections, then certified), mp (MPFR, uncertified) or double")
      ->check(CLI::IsMember({"double", "mp", "interval"}));
  cmd->add_option("--digits", opt->digits, "Decimals to print (default 6)")->check(CLI::Range(0, max_digits));
  cmd->add_option("--bits", opt->bits, "Working precision in bits for mp and interval (default 128)")
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &out] {
    const Matrix<Rational> X = read_matrix(opt->x);
    const MultiHeadAttention<Rational> layer(read_matrix(opt->wq), read_matrix(opt->wk), read_matrix(opt->wv),
                                             read_matrix(opt->wo), opt->heads);
    const FormattedTrace t = run_layer(layer, X, parse_tier(opt->tier), opt->digits, opt->bits);
    out = opt->json ? trace_json(t).dump(2) + "\n" : narrate(t, {});
  });
}

}  // namespace attnrank::cli
