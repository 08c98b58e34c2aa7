#pragma once
// safetensors files (the format of Hugging Face's safetensors library), read exactly: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape
// and byte range, then the raw little-endian data. A tensor is named on the
// command line as "model.safetensors:NAME", one matrix of a larger tensor as
// "model.safetensors:NAME[i]" or "[i,j]" (leading indices, as for .npy).

#include <attnrank/io/binary_array.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnrank {

/// "m.safetensors:NAME" split at the first ':' after ".safetensors": the file and
/// what follows (a tensor name, or a --state-dict prefix; empty for a bare
/// "m.safetensors"). Nothing when the argument names no .safetensors file.
struct SafetensorsArgument {
  std::string path, rest;
};
std::optional<SafetensorsArgument> split_safetensors_argument(const std::string& argument);

/// One tensor of a safetensors file.
struct SafetensorsEntry {
  std::string name;
  ElementType type;
  std::vector<std::size_t> shape;
  std::size_t begin = 0, end = 0;  ///< byte range in the file (the data offsets plus the header)
};

/// The tensors the header of `bytes` lists, in file order, after checking that
/// the header is valid JSON, that every tensor's byte range lies inside the file
/// and matches its shape and dtype. `__metadata__` is skipped.
std::vector<SafetensorsEntry> safetensors_index(std::string_view bytes, const std::string& source);

/// Tensor `name` of the safetensors file in `bytes`, one matrix of it chosen by
/// `selection`. A name the file lacks is an input_error listing the names it has.
Matrix<Rational> parse_safetensors(std::string_view bytes, const std::string& source, const std::string& name,
                                   const ArraySelection& selection = {}, const ParseLimits& limits = {});

}  // namespace attnrank
