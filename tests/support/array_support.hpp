#pragma once
// Builders of .npy and safetensors files in memory, written from the formats'
// specifications (not from attnrank's readers), for the io tests and the CLI tests.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace attnrank::test {

/// The bytes of an .npy file: `descr` like "<f8", the shape, the raw data (already
/// in the order and byte order the header says), format `version` 1, 2 or 3.
inline std::string npy_bytes(const std::string& descr, bool fortran_order, const std::vector<std::size_t>& shape,
                             const std::string& data, int version = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") + ", 'shape': (";
  for (std::size_t k = 0; k < shape.size(); ++k) dict += std::to_string(shape[k]) + (shape.size() == 1 || k + 1 < shape.size() ? ", " : "");
  dict += "), }";
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(version);
  out += '\0';
  const std::size_t n = dict.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (version != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + dict + data;
}

/// `value`'s `bytes` low-order bytes, little or big endian.
inline std::string raw_bytes(std::uint64_t value, std::size_t bytes, bool big_endian = false) {
  std::string out(bytes, '\0');
  for (std::size_t k = 0; k < bytes; ++k)
    out[big_endian ? bytes - 1 - k : k] = static_cast<char>((value >> (8 * k)) & 0xff);
  return out;
}

inline std::uint64_t double_bits(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct TensorSpec {
  std::string name, dtype;
  std::vector<std::size_t> shape;
  std::string data;  ///< little endian, C order
};

/// The bytes of a safetensors file holding `tensors` in that order.
inline std::string safetensors_bytes(const std::vector<TensorSpec>& tensors) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const TensorSpec& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data += t.data;
  }
  const std::string text = header.dump();
  return raw_bytes(text.size(), 8) + text + data;
}

}  // namespace attnrank::test
