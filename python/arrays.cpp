// NumPy arrays into the library's types (python/arrays.hpp).
#include "arrays.hpp"

#include <attnrank/io/parse.hpp>

namespace attnrank::python {
namespace {

/// The element type of a NumPy array, from its dtype (native byte order: NumPy
/// hands the buffer over as it is in memory).
ElementType element_type(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto bytes = static_cast<std::size_t>(dt.itemsize());
  ElementType t;
  t.bytes = bytes;
  t.big_endian = dt.byteorder() == '>';
  t.name = py::cast<std::string>(py::repr(dt));
  if (kind == 'f' && (bytes == 2 || bytes == 4 || bytes == 8)) t.kind = ElementType::Kind::floating;
  else if (kind == 'i' && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) t.kind = ElementType::Kind::signed_integer;
  else if (kind == 'u' && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) t.kind = ElementType::Kind::unsigned_integer;
  else if (kind == 'b' && bytes == 1) t.kind = ElementType::Kind::boolean;
  else
    throw input_error("dtype " + t.name +
                      " is not one attnrank reads exactly (float16/32/64, integers, bool; for exact rationals pass an "
                      "object array of fractions.Fraction or strings)");
  return t;
}

/// The (rows, columns) matrix of `a` that starts at byte `offset`.
BinaryMatrixView matrix_view(const py::array& a, std::ptrdiff_t offset) {
  const py::ssize_t d = a.ndim();
  BinaryMatrixView view;
  view.type = element_type(a.dtype());
  view.data = static_cast<const unsigned char*>(a.data()) + offset;
  view.rows = static_cast<long>(a.shape(d - 2));
  view.columns = static_cast<long>(a.shape(d - 1));
  view.row_stride = a.strides(d - 2);
  view.column_stride = a.strides(d - 1);
  return view;
}

}  // namespace

Matrix<Rational> from_array(const py::array& a, const std::string& name) {
  if (a.ndim() != 2)
    throw input_error(name + ": a 2-D array is needed, this one has " + std::to_string(a.ndim()) + " dimensions");
  const BinaryMatrixView view = matrix_view(a, 0);
  py::gil_scoped_release release;
  return decode_binary_matrix(view, name);
}

Eigen::MatrixXd doubles_from_array(const py::array& a, const std::string& name) {
  if (a.ndim() != 2)
    throw input_error(name + ": a 2-D array is needed, this one has " + std::to_string(a.ndim()) + " dimensions");
  const BinaryMatrixView view = matrix_view(a, 0);
  py::gil_scoped_release release;
  return decode_binary_matrix_as_doubles(view, name, {}, NonFiniteElements::refuse);
}

Matrix<Rational> from_rows(const std::vector<std::vector<std::string>>& rows, const std::string& name) {
  if (rows.empty() || rows.front().empty()) throw input_error(name + ": the matrix is empty");
  Matrix<Rational> m(static_cast<long>(rows.size()), static_cast<long>(rows.front().size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() != rows.front().size())
      throw input_error(name + ": row " + std::to_string(i) + " has " + std::to_string(rows[i].size()) +
                        " entries, row 0 has " + std::to_string(rows.front().size()));
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      try {
        m(static_cast<long>(i), static_cast<long>(j)) = parse_rational(rows[i][j]);
      } catch (const input_error& e) {
        throw input_error(name + "[" + std::to_string(i) + ", " + std::to_string(j) + "]: " + e.what());
      }
    }
  }
  return m;
}

NamedTensor tensor_from_array(const py::array& a, const std::string& name, bool keep_nonfinite,
                              const std::optional<std::string>& dtype) {
  if (a.ndim() < 2 || a.ndim() > 4)
    throw input_error(name + ": shape " + py::str(a.attr("shape")).cast<std::string>() +
                      ": (N, d), (H, N, d) or (B, H, N, d) is needed");
  NamedTensor t;
  t.name = name;
  for (py::ssize_t k = 0; k < a.ndim(); ++k) t.tensor.shape.push_back(static_cast<std::size_t>(a.shape(k)));
  t.tensor.dtype = dtype ? *dtype : py::cast<std::string>(py::str(a.dtype()));
  std::size_t count = 1;
  for (std::size_t k = 0; k + 2 < t.tensor.shape.size(); ++k) count *= t.tensor.shape[k];
  const NonFiniteElements nonfinite = keep_nonfinite ? NonFiniteElements::keep : NonFiniteElements::refuse;
  for (std::size_t m = 0; m < count; ++m) {
    const std::vector<std::size_t> lead = t.tensor.leading_index(m);
    std::ptrdiff_t offset = 0;
    std::string where = name;
    for (std::size_t k = 0; k < lead.size(); ++k) {
      offset += static_cast<std::ptrdiff_t>(lead[k]) * a.strides(static_cast<py::ssize_t>(k));
      where += k ? ',' : '[';  // one char at a time: GCC 12 misreads "," + std::string&& as an overflow
      where += std::to_string(lead[k]);
      if (k + 1 == lead.size()) where += ']';
    }
    t.tensor.matrices.push_back(decode_binary_matrix_as_doubles(matrix_view(a, offset), where, {}, nonfinite));
  }
  return t;
}

}  // namespace attnrank::python
