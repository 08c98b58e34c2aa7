// nn.MultiheadAttention's weights in attnrank's layout (attnrank/io/torch_weights.hpp).
#include <attnrank/io/torch_weights.hpp>

#include <attnrank/io/safetensors.hpp>

#include <algorithm>
#include <cctype>

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

namespace {

/// a < b with runs of digits compared as numbers: "layers.2" before "layers.10".
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size()));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i2, j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace

std::vector<std::string> torch_attention_modules(const std::string& path, const std::string& module,
                                                 const ParseLimits& limits) {
  const std::string prefix = module.empty() || module.back() == '.' ? module : module + ".";
  const std::string bytes = read_text_file(path, limits);
  std::vector<std::string> out;
  for (const SafetensorsEntry& e : safetensors_index(bytes, path))
    for (const std::string leaf : {"in_proj_weight", "q_proj_weight"})
      if (e.name.size() >= leaf.size() && e.name.compare(e.name.size() - leaf.size(), leaf.size(), leaf) == 0 &&
          e.name.compare(0, prefix.size(), prefix) == 0) {
        std::string m = e.name.substr(0, e.name.size() - leaf.size());
        if (!m.empty() && m.back() == '.') m.pop_back();
        if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
      }
  std::sort(out.begin(), out.end(), natural_less);
  if (out.empty())
    throw input_error(path + ": no nn.MultiheadAttention (no in_proj_weight nor q_proj_weight)" +
                      (prefix.empty() ? std::string() : " under the prefix '" + prefix + "'"));
  return out;
}

}  // namespace attnrank
