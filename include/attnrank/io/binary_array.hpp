#pragma once
// Binary arrays (NumPy's, safetensors', a Python buffer's) read exactly. Every
// element becomes the rational it stores: a float64, float32, float16 or bfloat16
// is a dyadic rational, an integer is itself. NaN and infinities are refused with
// the entry's index; nothing is rounded. Shared by the .npy and .safetensors
// readers and the Python module, so all three agree on every bit.

#include <attnrank/io/parse.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace attnrank {

/// What one element of a binary array is.
struct ElementType {
  /// fp8_e4m3: OCP FP8 E4M3 "fn" (PyTorch's float8_e4m3fn: bias 7, no infinities, NaN at
  /// S.1111.111, largest 448); fp8_e5m2: OCP FP8 E5M2 (float8_e5m2: bias 15, IEEE-like).
  enum class Kind { floating, bfloat, signed_integer, unsigned_integer, boolean, fp8_e4m3, fp8_e5m2 };
  Kind kind = Kind::floating;
  std::size_t bytes = 8;    ///< 1, 2, 4 or 8 (floating: 2, 4, 8; bfloat: 2; fp8: 1)
  bool big_endian = false;  ///< byte order in the data (ignored for one byte)
  std::string name;         ///< as the file spells it ("<f8", "BF16"), for messages
};

/// The element type by the name NumPy and torch give it ("float32", "bfloat16",
/// "float8_e4m3fn", "int8", "uint8", "bool"), whatever the file spells: what the
/// command line and Python both report of a tensor.
std::string element_type_name(const ElementType& t);

/// A matrix inside a binary array: `rows` x `columns` elements of `type`, the
/// first at `data`, element (i, j) at data + i * row_stride + j * column_stride
/// (strides in bytes, possibly negative, as NumPy's). The caller guarantees every
/// such element lies inside its buffer.
struct BinaryMatrixView {
  const unsigned char* data = nullptr;
  ElementType type;
  long rows = 0, columns = 0;
  std::ptrdiff_t row_stride = 0, column_stride = 0;
};

/// The exact matrix a view holds. `source` names it in messages, which give the
/// 0-based index of a bad entry as `where` spells it, e.g. "x.npy[1, 2]". Checks
/// limits.max_rows, max_columns and max_cells (the file size was checked when it
/// was read). Throws input_error on a non-finite element.
Matrix<Rational> decode_binary_matrix(const BinaryMatrixView& view, const std::string& source,
                                      const ParseLimits& limits = {});

/// input_error unless a rows x columns matrix is non-empty and within `limits`
/// (rows, columns, cells), in the words every array reader uses.
void require_matrix_size(long rows, long columns, const std::string& source, const ParseLimits& limits = {});

/// The input_error for the non-finite element d at (i, j), 0-based, of `source`
/// ("A[1, 2] (0-based) is nan: not a finite number"), as every reader of binary
/// floats refuses one.
[[noreturn]] void refuse_nonfinite_element(const std::string& source, long i, long j, double d);

/// What a reader of doubles does with NaN and infinite elements: refuse them
/// (inputs to a computation), or keep them (a kernel's output under test,
/// where a NaN is a finding, not bad input).
enum class NonFiniteElements { refuse, keep };

/// The same matrix as doubles, for callers that compute in doubles: floats
/// (float16, bfloat16, float32, float64) and integers of magnitude up to 2^53
/// are doubles exactly; a larger integer is an input_error naming the entry, as
/// is a non-finite element unless `nonfinite` keeps it. Nothing is rounded.
Eigen::MatrixXd decode_binary_matrix_as_doubles(const BinaryMatrixView& view, const std::string& source,
                                                const ParseLimits& limits = {},
                                                NonFiniteElements nonfinite = NonFiniteElements::refuse);

/// Byte strides of an array of `shape` stored in C order (last index fastest)
/// or Fortran order (first index fastest).
std::vector<std::ptrdiff_t> byte_strides(const std::vector<std::size_t>& shape, std::size_t element_bytes,
                                         bool fortran_order);

/// An element type from the letter codes of NumPy's `descr` ('<f8', '>i4', '|u1',
/// '|b1'), or input_error naming the code when attnrank cannot read it exactly
/// (complex, object, strings, long double, datetimes).
ElementType numpy_element_type(const std::string& descr, const std::string& source);

/// An element type from a safetensors dtype name (F64, F32, F16, BF16, F8_E4M3, F8_E5M2,
/// I8..I64, U8..U64, BOOL; always little endian), or input_error listing the ones it reads.
ElementType safetensors_element_type(const std::string& dtype, const std::string& source);

/// The FP8 format a name gives ("e4m3", "float8_e4m3fn", "F8_E4M3"; "e5m2", "float8_e5m2",
/// "F8_E5M2") as the element type of one-byte codes, or input_error naming it.
ElementType fp8_element_type(const std::string& format);

/// The value of the FP8 code `code` (0..255) of `kind` (fp8_e4m3 or fp8_e5m2), exactly.
double fp8_value(unsigned code, ElementType::Kind kind);

/// Leading indices that pick one matrix out of an array of more than two
/// dimensions: "x.npy[3]" picks x[3] of a 3-D array, "x.npy[0,2]" x[0, 2] of a
/// 4-D one. Negative indices count from the end, as in Python.
struct ArraySelection {
  std::vector<long> indices;
  bool given = false;  ///< "[...]" was written (even "[]")
};

/// Splits "path[i,j]" into the path and the selection; an argument without a
/// trailing "[...]" comes back whole with `given` false. Throws input_error on a
/// malformed selection ("x.npy[a]", "x.npy[1,,2]").
std::pair<std::string, ArraySelection> split_selection(const std::string& argument);

/// The byte offset of the selected matrix in an array of `shape` with byte
/// `strides`, after checking the selection fits the shape: an array of more than
/// two dimensions needs one index for each dimension but the last two; a 1-D
/// array is one row. The error for a missing selection shows the shape and the
/// syntax. Returns the offset and sets `view`'s rows, columns and strides.
std::ptrdiff_t select_matrix(const std::vector<std::size_t>& shape, const std::vector<std::ptrdiff_t>& strides,
                             const ArraySelection& selection, const std::string& source, BinaryMatrixView& view);

/// "(2, 8, 64, 64)", as Python prints a shape.
std::string shape_text(const std::vector<std::size_t>& shape);

}  // namespace attnrank
