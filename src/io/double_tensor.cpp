// Arrays read whole as stacks of double matrices (attnrank/io/double_tensor.hpp).
#include <attnrank/io/double_tensor.hpp>

#include <attnrank/io/binary_array.hpp>
#include <attnrank/io/npy.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/io/safetensors.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attnrank {
namespace {

/// How many matrices a stack of `shape` holds, after the size checks a reader that
/// holds the whole array makes (`whole`: the cells cap on the whole array; else each
/// matrix is checked as it is decoded).
std::size_t stack_count(const std::vector<std::size_t>& shape, const std::string& source, const ParseLimits& limits,
                        bool whole = true) {
  std::size_t count = 1, cells = 1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0) throw input_error(source + ": the array is empty (shape " + shape_text(shape) + ")");
    if (k + 2 < shape.size()) count *= shape[k];
    if (whole && cells > limits.max_cells / shape[k])
      throw input_error(source + ": shape " + shape_text(shape) + " has more than " + std::to_string(limits.max_cells) +
                        " entries (the size limit; max_size raises it)");
    cells *= shape[k];
  }
  return count;
}

/// input_error unless an array of `shape` is a stack of matrices of 2 to `max_dims` dimensions.
void require_stack_dimensions(const std::vector<std::size_t>& shape, const std::string& source, std::size_t max_dims) {
  if (shape.size() < 2 || shape.size() > max_dims)
    throw input_error(source + ": shape " + shape_text(shape) + " has " + std::to_string(shape.size()) +
                      (max_dims == 4 ? " dimensions; an attention tensor has 2 to 4: (N, d), (H, N, d) or (B, H, N, d)"
                                     : " dimensions; a stack of matrices has 2 to " + std::to_string(max_dims) +
                                           ": (..., N, N)"));
}

/// "source[0,3]": a matrix of a stack, as messages name it.
std::string matrix_name(const std::string& source, const ArraySelection& selection) {
  if (!selection.given) return source;
  std::string where = source + "[";
  for (std::size_t k = 0; k < selection.indices.size(); ++k) {
    if (k) where += ',';
    where += std::to_string(selection.indices[k]);
  }
  return where + "]";
}

/// Every matrix of an array of `shape` at `data` with `strides`.
void read_matrices(DoubleTensor& out, const unsigned char* data, const ElementType& type,
                   std::vector<std::ptrdiff_t> strides, const std::string& source, const ParseLimits& limits,
                   NonFiniteElements nonfinite, std::size_t max_dims, bool heads_first = false) {
  // Heads first: a (total, H, d) array as (H, total, d), its first two axes' strides swapped,
  // then the file's shape restored.
  const std::vector<std::size_t> file_shape = out.shape;
  heads_first = heads_first && out.shape.size() == 3;
  if (heads_first) {
    std::swap(out.shape[0], out.shape[1]);
    std::swap(strides[0], strides[1]);
  }
  struct Restore {
    DoubleTensor& t;
    const std::vector<std::size_t>& shape;
    bool heads_first;
    ~Restore() {
      if (heads_first) {
        t.shape = shape;
        t.heads_first = true;
      }
    }
  } restore{out, file_shape, heads_first};
  const std::vector<std::size_t>& shape = out.shape;
  if (max_dims == row_stack_dimensions) {  // (N), (H, N), (B, H, N): read as (1, N) when 1-D
    if (shape.empty() || shape.size() > max_dims)
      throw input_error(source + ": shape " + shape_text(shape) + " has " + std::to_string(shape.size()) +
                        " dimensions; a per-row tensor (the logsumexp) has 1 to 3: (N), (H, N) or (B, H, N)");
    if (shape.size() == 1) {
      DoubleTensor row;
      row.shape = {1, shape[0]};
      read_matrices(row, data, type, {static_cast<std::ptrdiff_t>(shape[0]) * strides[0], strides[0]}, source, limits,
                    nonfinite, 4);
      out.matrices = std::move(row.matrices);
      return;
    }
  } else {
    require_stack_dimensions(shape, source, max_dims);
  }
  const std::size_t count = stack_count(shape, source, limits);
  for (std::size_t t = 0; t < count; ++t) {
    ArraySelection selection;
    for (std::size_t index : out.leading_index(t)) selection.indices.push_back(static_cast<long>(index));
    selection.given = !selection.indices.empty();
    BinaryMatrixView view;
    view.type = type;
    const std::ptrdiff_t offset = select_matrix(shape, strides, selection, source, view);
    view.data = data + offset;
    const std::string where =
        heads_first ? source + "[:, " + std::to_string(t) + ", :] (head " + std::to_string(t) + ", a row per packed token)"
                    : matrix_name(source, selection);
    out.matrices.push_back(decode_binary_matrix_as_doubles(view, where, limits, nonfinite));
  }
}

}  // namespace

std::vector<std::size_t> DoubleTensor::leading_index(std::size_t t) const {
  std::vector<std::size_t> index(shape.size() > 2 ? shape.size() - 2 : 0);
  for (std::size_t k = index.size(); k-- > 0;) {
    index[k] = t % shape[k];
    t /= shape[k];
  }
  return index;
}

namespace {

DoubleTensor read_tensor(const std::string& argument, const ParseLimits& limits, NonFiniteElements nonfinite,
                         std::size_t max_dims, bool heads_first = false) {
  DoubleTensor out;
  if (const auto st = split_safetensors_argument(argument)) {
    const std::string bytes = read_text_file(st->path, limits);
    const auto entries = safetensors_index(bytes, st->path);
    for (const SafetensorsEntry& e : entries)
      if (e.name == st->rest) {
        out.shape = e.shape;
        out.dtype = element_type_name(e.type);
        read_matrices(out, reinterpret_cast<const unsigned char*>(bytes.data()) + e.begin, e.type,
                      byte_strides(e.shape, e.type.bytes, false), st->path + ":" + e.name, limits, nonfinite, max_dims,
                      heads_first);
        return out;
      }
    (void)parse_safetensors(bytes, st->path, st->rest, {}, limits);  // throws: lists the tensors the file has
    throw input_error(st->path + ": no tensor '" + st->rest + "'");
  }
  const std::string bytes = read_text_file(argument, limits);
  const std::string source = argument == "-" ? "<stdin>" : argument;
  if (is_npy(bytes)) {
    const NpyHeader h = parse_npy_header(bytes, source);
    out.shape = h.shape;
    out.dtype = element_type_name(h.type);
    read_matrices(out, reinterpret_cast<const unsigned char*>(bytes.data()) + h.data_offset, h.type,
                  byte_strides(h.shape, h.type.bytes, h.fortran_order), source, limits, nonfinite, max_dims, heads_first);
    return out;
  }
  const Matrix<Rational> m = parse_matrix(bytes, source, limits);
  out.shape = {static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
  out.dtype = "text";
  Eigen::MatrixXd d(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      d(i, j) = m(i, j).convert_to<double>();
      if (!std::isfinite(d(i, j)) || Rational(d(i, j)) != m(i, j))
        throw input_error(entry_text(source, static_cast<long>(i), static_cast<long>(j)) +
                              " is not exactly a double (write the array as .npy to keep its floats exact)",
                          source, i + 1, j + 1);
    }
  out.matrices.push_back(std::move(d));
  return out;
}

}  // namespace

DoubleTensor read_double_tensor(const std::string& argument, const ParseLimits& limits, NonFiniteElements nonfinite) {
  return read_tensor(argument, limits, nonfinite, 4);
}

DoubleTensor read_packed_tensor(const std::string& argument, const ParseLimits& limits, NonFiniteElements nonfinite) {
  return read_tensor(argument, limits, nonfinite, 4, true);
}

DoubleTensor array_double_tensor(const unsigned char* data, const ElementType& type, const std::vector<std::size_t>& shape,
                                 const std::vector<std::ptrdiff_t>& strides, const std::string& source,
                                 const ParseLimits& limits, NonFiniteElements nonfinite) {
  DoubleTensor out;
  out.shape = shape;
  out.dtype = element_type_name(type);
  read_matrices(out, data, type, strides, source, limits, nonfinite, 4);
  return out;
}

DoubleTensor read_row_stack(const std::string& argument, const ParseLimits& limits, NonFiniteElements nonfinite) {
  DoubleTensor t = read_tensor(argument, limits, nonfinite, row_stack_dimensions);
  std::vector<Eigen::MatrixXd> rows;
  for (const Eigen::MatrixXd& m : t.matrices)
    for (Eigen::Index i = 0; i < m.rows(); ++i) rows.emplace_back(m.row(i).transpose());
  t.matrices = std::move(rows);
  return t;
}

DoubleTensor read_matrix_stack(const std::string& argument, const ParseLimits& limits) {
  return read_tensor(argument, limits, NonFiniteElements::refuse, max_stack_dimensions);
}

namespace {

/// A regular file mapped read-only (nullptr when it cannot be: not a regular file,
/// empty, or mmap refused). No size limit: nothing is read until a matrix is asked
/// for, and then only its bytes.
const unsigned char* map_file(const std::string& path, std::size_t& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  const unsigned char* map = nullptr;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    bytes = static_cast<std::size_t>(st.st_size);
    void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) map = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  return map;
}

}  // namespace

MatrixStackFile::MatrixStackFile(const std::string& argument, const ParseLimits& limits) : limits_(limits) {
  const auto st = split_safetensors_argument(argument);
  const std::string path = st ? st->path : argument;
  if (path != "-" && argument.find('[') == std::string::npos) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) map_ = map_file(path, map_bytes_);
  }
  if (map_) {
    const std::string_view bytes(reinterpret_cast<const char*>(map_), map_bytes_);
    if (st) {
      for (const SafetensorsEntry& e : safetensors_index(bytes, st->path))
        if (e.name == st->rest) {
          tensor_.shape = e.shape;
          tensor_.dtype = element_type_name(e.type);
          type_ = e.type;
          data_ = map_ + e.begin;
          source_ = st->path + ":" + e.name;
        }
    } else if (is_npy(bytes)) {
      const NpyHeader h = parse_npy_header(bytes, path);
      if (!h.fortran_order) {  // Fortran order scatters a matrix over the file: read whole
        tensor_.shape = h.shape;
        tensor_.dtype = element_type_name(h.type);
        type_ = h.type;
        data_ = map_ + h.data_offset;
        source_ = path;
      }
    }
    if (data_) {
      require_stack_dimensions(tensor_.shape, source_, max_stack_dimensions);
      count_ = stack_count(tensor_.shape, source_, limits, false);
      strides_ = byte_strides(tensor_.shape, type_.bytes, false);
      return;
    }
    ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
    map_ = nullptr;
  }
  // Text, standard input, a selection, Fortran order, or a tensor the file lacks:
  // the whole reader reads it (and words its errors).
  tensor_ = read_matrix_stack(argument, limits);
  count_ = tensor_.matrices.size();
}

MatrixStackFile::~MatrixStackFile() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

Eigen::MatrixXd MatrixStackFile::matrix(std::size_t t) const {
  if (!map_) return tensor_.matrices.at(t);
  ArraySelection selection;
  for (std::size_t index : tensor_.leading_index(t)) selection.indices.push_back(static_cast<long>(index));
  selection.given = !selection.indices.empty();
  BinaryMatrixView view;
  view.type = type_;
  const std::ptrdiff_t offset = select_matrix(tensor_.shape, strides_, selection, source_, view);
  view.data = data_ + offset;
  Eigen::MatrixXd m = decode_binary_matrix_as_doubles(view, matrix_name(source_, selection), limits_);
  // C order: the matrix is one run of bytes. Hand its pages back (whole pages,
  // outward: a neighbour's page read again later is read from the file again).
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(view.data) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(view.data) +
                   static_cast<std::uintptr_t>(view.rows) * static_cast<std::uintptr_t>(view.columns) * type_.bytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  return m;
}

std::optional<Eigen::MatrixXd> read_binary_doubles(const std::string& argument, const ParseLimits& limits) {
  if (argument == "-" || argument.find('[') != std::string::npos) return std::nullopt;
  if (!split_safetensors_argument(argument)) {
    std::ifstream in(argument, std::ios::binary);
    char magic[6] = {};
    if (!in.read(magic, sizeof magic) || !is_npy(std::string_view(magic, sizeof magic))) return std::nullopt;
  }
  try {
    DoubleTensor t = read_double_tensor(argument, limits);
    if (t.shape.size() != 2 || t.matrices.size() != 1) return std::nullopt;
    return std::move(t.matrices.front());
  } catch (const input_error&) {
    return std::nullopt;
  }
}

std::optional<BallMatrix> read_plain_decimal_balls(const std::string& argument, const ParseLimits& limits,
                                                   InputNotes* notes) {
  if (argument == "-" || argument.find('[') != std::string::npos || split_safetensors_argument(argument))
    return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(argument, ec)) return std::nullopt;  // a spec, or the exact reader's error
  try {
    const std::string bytes = read_text_file(argument, limits);
    if (is_npy(bytes)) return std::nullopt;
    return parse_plain_decimal_balls(bytes, argument, limits, notes);
  } catch (const input_error&) {
    return std::nullopt;
  }
}

void require_finite(const Eigen::MatrixXd& A, const std::string& name) {
  for (Eigen::Index j = 0; j < A.cols(); ++j)
    for (Eigen::Index i = 0; i < A.rows(); ++i)
      if (!std::isfinite(A(i, j))) refuse_nonfinite_element(name, static_cast<long>(i), static_cast<long>(j), A(i, j));
}

Matrix<Rational> exact_of_doubles(const Eigen::MatrixXd& A, const std::string& name) {
  require_finite(A, name);
  Matrix<Rational> out(A.rows(), A.cols());
  // Columns on the cores: a million entries take a quarter of a second on one
  // (each is exact whatever thread makes it).
  detail::for_row_blocks(static_cast<long>(A.cols()), static_cast<double>(A.size()) / 20, [&](long begin, long end) {
    for (Eigen::Index j = begin; j < end; ++j)
      for (Eigen::Index i = 0; i < A.rows(); ++i) mpq_set_d(out(i, j).backend().data(), A(i, j));
  });
  return out;
}

}  // namespace attnrank
