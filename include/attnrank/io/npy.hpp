#pragma once
// NumPy's .npy files, read exactly (format versions 1, 2 and 3; either byte order;
// C or Fortran order; float16/32/64, int8..int64, uint8..uint64, bool). Every
// element is the rational it stores (attnrank/io/binary_array.hpp). An array of
// more than two dimensions is read one matrix at a time, picked by leading
// indices ("attn.npy[0,3]": batch 0, head 3). Malformed headers, truncated data
// and unsupported dtypes are input_errors naming the file and the problem.

#include <attnrank/io/binary_array.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace attnrank {

/// What an .npy header says.
struct NpyHeader {
  int major_version = 1;
  ElementType type;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
  std::size_t data_offset = 0;  ///< bytes before the first element
};

/// True when `bytes` start with the .npy magic string "\x93NUMPY".
bool is_npy(std::string_view bytes);

/// Parses and checks the header of the .npy file in `bytes`: the magic string,
/// the version, the dictionary, and that the data that follows has exactly the
/// size the shape and dtype call for.
NpyHeader parse_npy_header(std::string_view bytes, const std::string& source);

/// The matrix `selection` picks out of the .npy file in `bytes` (see
/// select_matrix for the rules), read exactly.
Matrix<Rational> parse_npy(std::string_view bytes, const std::string& source, const ArraySelection& selection = {},
                           const ParseLimits& limits = {});

}  // namespace attnrank
