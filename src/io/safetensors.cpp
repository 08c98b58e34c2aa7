// safetensors files read exactly (attnrank/io/safetensors.hpp).
#include <attnrank/io/safetensors.hpp>

#include <nlohmann/json.hpp>

namespace attnrank {

std::optional<SafetensorsArgument> split_safetensors_argument(const std::string& argument) {
  const std::string marker = ".safetensors";
  if (const auto at = argument.find(marker + ":"); at != std::string::npos)
    return SafetensorsArgument{argument.substr(0, at + marker.size()), argument.substr(at + marker.size() + 1)};
  if (argument.size() >= marker.size() && argument.compare(argument.size() - marker.size(), marker.size(), marker) == 0)
    return SafetensorsArgument{argument, ""};
  return std::nullopt;
}

std::vector<SafetensorsEntry> safetensors_index(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8) throw input_error(source + ": not a safetensors file (shorter than its 8-byte header length)");
  std::uint64_t header_length = 0;
  for (int k = 0; k < 8; ++k) header_length |= std::uint64_t{static_cast<unsigned char>(bytes[k])} << (8 * k);
  if (header_length > bytes.size() - 8)
    throw input_error(source + ": not a safetensors file, or truncated (its header length " +
                      std::to_string(header_length) + " is past the end of the file)");
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(bytes.substr(8, header_length));
  } catch (const nlohmann::json::exception& e) {
    throw input_error(source + ": the safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw input_error(source + ": the safetensors header is not a JSON object");
  const std::size_t data_start = 8 + header_length, data_size = bytes.size() - data_start;
  std::vector<SafetensorsEntry> entries;
  for (auto item = header.begin(); item != header.end(); ++item) {
    // Not a structured binding: Clang 14 cannot capture one in the lambda below.
    const std::string& name = item.key();
    const nlohmann::ordered_json& info = item.value();
    if (name == "__metadata__") continue;
    const auto bad = [&](const std::string& why) {
      throw input_error(source + ": tensor '" + name + "': " + why);
    };
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() || !info.contains("shape") ||
        !info["shape"].is_array() || !info.contains("data_offsets") || !info["data_offsets"].is_array() ||
        info["data_offsets"].size() != 2)
      bad("its entry needs dtype, shape and data_offsets [begin, end]");
    SafetensorsEntry e;
    e.name = name;
    e.type = safetensors_element_type(info["dtype"].get<std::string>(), source + ":" + name);
    std::size_t elements = 1;
    for (const auto& n : info["shape"]) {
      if (!n.is_number_unsigned() || n.get<std::uint64_t>() > (std::uint64_t{1} << 40)) bad("a dimension is not a size");
      e.shape.push_back(n.get<std::size_t>());
      if (e.shape.size() > 32) bad("more than 32 dimensions");
      if (e.shape.back() != 0 && elements > (std::size_t{1} << 50) / e.shape.back()) bad("the shape is too large");
      elements *= e.shape.back();
    }
    const auto& offsets = info["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) bad("data_offsets are not sizes");
    const std::uint64_t begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
    if (begin > end || end > data_size)
      bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] lie outside the " +
          std::to_string(data_size) + " bytes of data");
    if (end - begin != elements * e.type.bytes)
      bad("shape " + shape_text(e.shape) + " of " + e.type.name + " needs " + std::to_string(elements * e.type.bytes) +
          " bytes, data_offsets give " + std::to_string(end - begin));
    e.begin = data_start + begin;
    e.end = data_start + end;
    entries.push_back(std::move(e));
  }
  return entries;
}

Matrix<Rational> parse_safetensors(std::string_view bytes, const std::string& source, const std::string& name,
                                   const ArraySelection& selection, const ParseLimits& limits) {
  const std::vector<SafetensorsEntry> entries = safetensors_index(bytes, source);
  const SafetensorsEntry* found = nullptr;
  for (const SafetensorsEntry& e : entries)
    if (e.name == name) found = &e;
  const std::string label = source + ":" + name;
  if (!found) {
    std::string names;
    for (std::size_t k = 0; k < entries.size() && k < 50; ++k)
      names += (k ? ", " : "") + entries[k].name + " " + shape_text(entries[k].shape);
    if (entries.size() > 50) names += ", ... (" + std::to_string(entries.size()) + " in all)";
    throw input_error(source + ": " + (name.empty() ? "no tensor named; write " + source + ":NAME"
                                                    : "no tensor '" + name + "'") +
                      (entries.empty() ? " (the file holds no tensors)" : "; the file holds: " + names));
  }
  for (std::size_t n : found->shape)
    if (n == 0) throw input_error(label + ": the tensor is empty (shape " + shape_text(found->shape) + ")");
  const std::vector<std::ptrdiff_t> strides = byte_strides(found->shape, found->type.bytes, false);
  BinaryMatrixView view;
  view.type = found->type;
  const std::ptrdiff_t offset = select_matrix(found->shape, strides, selection, label, view);
  view.data = reinterpret_cast<const unsigned char*>(bytes.data()) + found->begin + offset;
  return decode_binary_matrix(view, label, limits);
}

}  // namespace attnrank
