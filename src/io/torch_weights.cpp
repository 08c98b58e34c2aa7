// nn.MultiheadAttention's weights in attnrank's layout (attnrank/io/torch_weights.hpp).
#include <attnrank/io/torch_weights.hpp>

#include <attnrank/io/safetensors.hpp>

#include <algorithm>

namespace attnrank {

Matrix<Rational> from_torch_layout(const Matrix<Rational>& weight) { return weight.transpose(); }

AttentionWeights read_torch_attention(const std::string& path, const std::string& module, const ParseLimits& limits) {
  // "layers.0.attn" names the module as PyTorch prints it; its tensors are "layers.0.attn.<name>".
  const std::string prefix = module.empty() || module.back() == '.' ? module : module + ".";
  const std::string bytes = read_text_file(path, limits);
  const std::vector<SafetensorsEntry> entries = safetensors_index(bytes, path);
  const auto has = [&](const std::string& name) {
    return std::any_of(entries.begin(), entries.end(), [&](const SafetensorsEntry& e) { return e.name == prefix + name; });
  };
  const auto tensor = [&](const std::string& name) { return parse_safetensors(bytes, path, prefix + name, {}, limits); };
  for (const char* bias : {"in_proj_bias", "out_proj.bias", "bias_k", "bias_v"})
    if (has(bias)) {
      const Matrix<Rational> b = tensor(bias);
      if (!b.isZero())
        throw input_error(path + ":" + prefix + bias +
                          " is not zero; attnrank's layer has no biases (build the module with bias=False, or zero the "
                          "biases, to compare with it)");
    }
  AttentionWeights w;
  if (has("in_proj_weight")) {
    const Matrix<Rational> in = tensor("in_proj_weight");
    if (in.rows() % 3 != 0)
      throw input_error(path + ":" + prefix + "in_proj_weight has " + std::to_string(in.rows()) +
                        " rows; nn.MultiheadAttention stacks W_q, W_k, W_v, so 3 embed_dim");
    const Eigen::Index e = in.rows() / 3;
    w.wq = from_torch_layout(in.topRows(e));
    w.wk = from_torch_layout(in.middleRows(e, e));
    w.wv = from_torch_layout(in.bottomRows(e));
  } else if (has("q_proj_weight") && has("k_proj_weight") && has("v_proj_weight")) {
    w.wq = from_torch_layout(tensor("q_proj_weight"));
    w.wk = from_torch_layout(tensor("k_proj_weight"));
    w.wv = from_torch_layout(tensor("v_proj_weight"));
  } else {
    std::string names;
    for (std::size_t k = 0; k < entries.size() && k < 20; ++k) names += (k ? ", " : "") + entries[k].name;
    throw input_error(path + ": no " + prefix + "in_proj_weight (nor q/k/v_proj_weight) of an nn.MultiheadAttention" +
                      (prefix.empty() ? "" : " under the prefix '" + prefix + "'") + "; the file holds: " + names);
  }
  if (!has("out_proj.weight"))
    throw input_error(path + ": no " + prefix + "out_proj.weight of an nn.MultiheadAttention");
  w.wo = from_torch_layout(tensor("out_proj.weight"));
  return w;
}

}  // namespace attnrank
