#pragma once
// An array of 2, 3 or 4 dimensions -- (N, d), (H, N, d) or (B, H, N, d), as
// attention kernels store Q, K, V and their outputs -- read whole as a stack of
// double matrices, exactly: float16, bfloat16, float32 and float64 elements are
// doubles, integers of magnitude up to 2^53 too (binary_array.hpp). Sources: an
// .npy file, a safetensors tensor ("FILE.safetensors:NAME"), or a text matrix
// (2-D only) whose every entry is exactly a double. Anything that would have to
// be rounded is an input_error naming the entry, as are NaN and infinities
// unless the caller keeps them (a kernel's output under test; binary arrays
// only, since a text matrix is read as exact rationals).

#include <attnrank/io/binary_array.hpp>
#include <attnrank/io/parse.hpp>

#include <Eigen/Core>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

struct DoubleTensor {
  std::vector<std::size_t> shape;         ///< as the file states it (2 to 4 dimensions)
  std::string dtype;                      ///< the element type by NumPy's and torch's name ("float32", "bfloat16"; "text")
  std::vector<Eigen::MatrixXd> matrices;  ///< the trailing (N, d) matrices, leading indices in C order
  /// Read by read_packed_tensor: a (total, H, d) array as H matrices of total x d (head h's
  /// rows are the packed tokens), not as `total` matrices of H x d.
  bool heads_first = false;

  /// The leading indices of matrix t ({} for a 2-D array, {h} or {b, h}).
  std::vector<std::size_t> leading_index(std::size_t t) const;
};

/// Reads `argument` as above; messages name it as given ("-" is standard input).
/// The limits apply to each matrix and max_cells to the whole array. With
/// NonFiniteElements::keep, NaN and infinite floats of an .npy or safetensors
/// array are returned as they are.
DoubleTensor read_double_tensor(const std::string& argument, const ParseLimits& limits = {},
                                NonFiniteElements nonfinite = NonFiniteElements::refuse);

/// An array held in memory (a Python buffer): `shape`, byte `strides` and element
/// `type` at `data`, read as read_double_tensor reads an .npy file of that array,
/// with the same checks in the same words; `source` names it.
DoubleTensor array_double_tensor(const unsigned char* data, const ElementType& type, const std::vector<std::size_t>& shape,
                                 const std::vector<std::ptrdiff_t>& strides, const std::string& source,
                                 const ParseLimits& limits = {}, NonFiniteElements nonfinite = NonFiniteElements::refuse);

/// A packed (varlen) array of shape (total, H, d), FlashAttention's layout, read as H matrices of
/// total x d with heads_first set: a sequence's rows of a head are then a block of one matrix.
/// Arrays of another rank are read as read_double_tensor reads them. Otherwise as above.
DoubleTensor read_packed_tensor(const std::string& argument, const ParseLimits& limits = {},
                                NonFiniteElements nonfinite = NonFiniteElements::refuse);

/// A per-row statistic of an attention kernel (the logsumexp, FlashAttention's
/// softmax_lse): an array of shape (N), (H, N) or (B, H, N) read exactly as one
/// N x 1 matrix per head, heads in C order; `shape` is the file's. A text file
/// is read as (H, N). Otherwise as read_double_tensor.
inline constexpr std::size_t row_stack_dimensions = 3;
DoubleTensor read_row_stack(const std::string& argument, const ParseLimits& limits = {},
                            NonFiniteElements nonfinite = NonFiniteElements::refuse);

/// The rationals the doubles denote, exactly; input_error naming `name`, row
/// and column (1-based) of a NaN or infinite entry.
Matrix<Rational> exact_of_doubles(const Eigen::MatrixXd& A, const std::string& name);

/// input_error naming `name`, row and column (0-based, column by column) of the
/// first NaN or infinite entry of A, in exact_of_doubles' words.
void require_finite(const Eigen::MatrixXd& A, const std::string& name);

/// The same for a stack of matrices of any leading dimensions, (..., N, d) with
/// 2 to max_stack_dimensions dimensions (layer, head, batch, prompt...), as a scan
/// of a model's attention reads it.
inline constexpr std::size_t max_stack_dimensions = 8;
DoubleTensor read_matrix_stack(const std::string& argument, const ParseLimits& limits = {});

/// read_matrix_stack's matrices, one at a time: a regular .npy file (C order) or a
/// safetensors tensor is mapped, not read, and each matrix is decoded from its
/// bytes when asked for, those pages then handed back to the system -- a stack of
/// any size costs one matrix of memory per reader thread. Other arguments (text,
/// standard input, Fortran order) are read whole, as read_matrix_stack reads them.
/// The same checks and messages as read_matrix_stack, except that a mapped stack
/// is limited matrix by matrix (rows, columns, cells), not as a whole (file size,
/// cells of the whole array): it is never held. A matrix's own problems (a NaN, a
/// size over the limits) are reported when it is read. matrix() may be called
/// from several threads at once. The file must stay as it is while the stack is
/// read: a mapped file cut short under a reader is the system's SIGBUS.
class MatrixStackFile {
 public:
  explicit MatrixStackFile(const std::string& argument, const ParseLimits& limits = {});
  ~MatrixStackFile();
  MatrixStackFile(const MatrixStackFile&) = delete;
  MatrixStackFile& operator=(const MatrixStackFile&) = delete;

  const std::vector<std::size_t>& shape() const { return tensor_.shape; }
  std::size_t size() const { return count_; }
  std::vector<std::size_t> leading_index(std::size_t t) const { return tensor_.leading_index(t); }
  /// Matrix t, leading indices in C order (0 <= t < size()).
  Eigen::MatrixXd matrix(std::size_t t) const;
  /// Whether the matrices are decoded on demand (false: read whole).
  bool mapped() const { return map_ != nullptr; }

 private:
  DoubleTensor tensor_;  // the shape always; the matrices only when read whole
  std::size_t count_ = 0;
  const unsigned char* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const unsigned char* data_ = nullptr;  // the first element
  ElementType type_;
  std::vector<std::ptrdiff_t> strides_;
  std::string source_;
  ParseLimits limits_;
};

/// A matrix argument that names a 2-D binary array of finite floats or small
/// integers (an .npy file, a safetensors tensor) read straight into doubles,
/// each the exact real the file stores: the same numbers read_matrix gives as
/// rationals, without making them. Anything else (text, specs, selections,
/// other shapes, any input problem) gives nullopt: the exact reader then reads
/// it and reports what is wrong in its own words.
std::optional<Eigen::MatrixXd> read_binary_doubles(const std::string& argument, const ParseLimits& limits = {});

/// A matrix argument that names a text file of plain decimals, enclosed in
/// double balls (parse_plain_decimal_balls); nullopt for anything else. Notes
/// are appended only when it succeeds.
std::optional<BallMatrix> read_plain_decimal_balls(const std::string& argument, const ParseLimits& limits = {},
                                                   InputNotes* notes = nullptr);

}  // namespace attnrank
