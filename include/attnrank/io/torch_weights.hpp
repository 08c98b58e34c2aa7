#pragma once
// The weights of a PyTorch torch.nn.MultiheadAttention, in attnrank's layout.
//
// PyTorch stores a projection as nn.Linear does, out x in, and applies it as
// x W^T; attnrank's layer (the tutorial's convention) multiplies X W with W in x
// out. So attnrank's W^Q is the transpose of the first embed_dim rows of
// `in_proj_weight`, W^K of the next, W^V of the last, and W^O is the transpose of
// `out_proj.weight`. Heads are consecutive column blocks in both. Read exactly,
// from a safetensors file (torch.save's pickles are not read: they can run code).

#include <attnrank/io/parse.hpp>

#include <string>
#include <vector>

namespace attnrank {

/// W^Q, W^K, W^V, W^O as attnrank's MultiHeadAttention takes them.
struct AttentionWeights {
  Matrix<Rational> wq, wk, wv, wo;
};

/// The projections of an nn.MultiheadAttention saved with
/// `safetensors.torch.save_file(mha.state_dict(), path)`, each tensor's name
/// prefixed by `prefix` (e.g. "encoder.layers.0.self_attn", with or without the final dot; empty for the
/// module itself). Reads `in_proj_weight` or, for a module with kdim/vdim, the
/// three `q_proj_weight`, `k_proj_weight`, `v_proj_weight`; and
/// `out_proj.weight`. attnrank's layer has no biases: a bias tensor that is not
/// all zeros is an input_error (build the module with bias=False, or zero them).
AttentionWeights read_torch_attention(const std::string& safetensors_path, const std::string& prefix = "",
                                      const ParseLimits& limits = {});

/// Every nn.MultiheadAttention whose tensors lie under `prefix` in the file: the
/// module names ("layers.0.attn", "layers.1.attn", ...; those with an in_proj_weight
/// or q_proj_weight), digits compared as numbers so layer 2 comes before layer 10.
/// input_error naming the file when there is none.
std::vector<std::string> torch_attention_modules(const std::string& safetensors_path, const std::string& prefix = "",
                                                 const ParseLimits& limits = {});

/// PyTorch's out x in weight as attnrank's in x out (the transpose, exactly).
Matrix<Rational> from_torch_layout(const Matrix<Rational>& weight);

}  // namespace attnrank
