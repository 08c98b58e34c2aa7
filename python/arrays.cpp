// Python values into the library's types (python/arrays.hpp).
#include "arrays.hpp"

#include <attnrank/io/double_tensor.hpp>
#include <attnrank/io/parse.hpp>

#include <cstring>

namespace attnrank::python {
namespace {

std::vector<std::size_t> shape_of(const py::array& a) {
  std::vector<std::size_t> shape;
  for (py::ssize_t k = 0; k < a.ndim(); ++k) shape.push_back(static_cast<std::size_t>(a.shape(k)));
  return shape;
}

std::vector<std::ptrdiff_t> strides_of(const py::array& a) {
  std::vector<std::ptrdiff_t> strides;
  for (py::ssize_t k = 0; k < a.ndim(); ++k) strides.push_back(a.strides(k));
  return strides;
}

/// The element type of a NumPy array as an .npy file of it states it (dtype.str:
/// '<f8', '|b1', '<U3'), in the file reader's words when attnrank cannot read it.
ElementType element_type(const py::array& a, const std::string& name) {
  return numpy_element_type(py::cast<std::string>(a.dtype().attr("str")), name);
}

/// The one matrix of a 1-D or 2-D array, as the .npy reader selects it (a 1-D
/// array is one row; other shapes are refused in its words).
BinaryMatrixView matrix_view(const py::array& a, const ElementType& type, const std::string& name) {
  BinaryMatrixView view;
  view.type = type;
  const std::ptrdiff_t offset = select_matrix(shape_of(a), strides_of(a), {}, name, view);
  view.data = static_cast<const unsigned char*>(a.data()) + offset;
  return view;
}

/// One Python value as a cell (GIL held): text for what is exactly text (str, int,
/// a Fraction's p/q, a Decimal's digits), the double for a float, missing for None.
CellValue cell_of(const py::handle& v, const std::string& name, long i, long j) {
  PyObject* o = v.ptr();
  if (o == Py_None) return CellValue::missing_value();
  if (PyBool_Check(o)) return CellValue::of_text(o == Py_True ? "1" : "0");
  if (PyFloat_Check(o)) return CellValue::of_double(PyFloat_AS_DOUBLE(o));  // np.float64 too
  if (PyLong_Check(o)) return CellValue::of_text(py::cast<std::string>(py::str(v)));
  if (PyUnicode_Check(o)) return CellValue::of_text(py::cast<std::string>(v));
  const py::handle type = py::type::handle_of(v);
  if (py::hasattr(type, "__module__") && py::cast<std::string>(type.attr("__module__")) == "numpy" &&
      py::hasattr(v, "dtype")) {  // a NumPy scalar: its dtype decides, as an array's does
    const py::object dtype = v.attr("dtype");
    const std::string descr = py::cast<std::string>(dtype.attr("str"));
    const ElementType t = numpy_element_type(descr, entry_text(name, i, j));
    if (t.kind == ElementType::Kind::floating) return CellValue::of_double(py::cast<double>(v.attr("__float__")()));
    if (t.kind == ElementType::Kind::boolean) return CellValue::of_text(py::cast<bool>(v) ? "1" : "0");
    return CellValue::of_text(py::cast<std::string>(py::str(v.attr("__int__")())));
  }
  if (py::hasattr(v, "numerator") && py::hasattr(v, "denominator"))  // fractions.Fraction, any numbers.Rational
    return CellValue::of_text(py::cast<std::string>(py::str(v.attr("numerator"))) + "/" +
                              py::cast<std::string>(py::str(v.attr("denominator"))));
  return CellValue::of_text(py::cast<std::string>(py::str(v)));  // Decimal prints exactly; anything else is refused
}

bool is_row(const py::handle& v) { return PyList_Check(v.ptr()) || PyTuple_Check(v.ptr()); }

}  // namespace

ParseLimits limits_of(std::optional<std::size_t> max_size) {
  return max_size ? size_limits(*max_size) : ParseLimits{};
}

Matrix<Rational> from_values(const py::handle& values, const std::string& name, const ParseLimits& limits) {
  const py::sequence items = py::reinterpret_borrow<py::sequence>(values);
  bool rows_given = false;
  for (const py::handle item : items) rows_given = rows_given || is_row(item);
  // The size first, from the lengths alone: a list over the limits is refused before a
  // cell is converted (each would cost far more than the Python object it copies).
  const long height = rows_given ? static_cast<long>(py::len(items)) : 1;
  const long width = !rows_given           ? static_cast<long>(py::len(items))
                     : is_row(items[0])    ? static_cast<long>(py::len(items[0]))
                                           : 1;
  if (height > 0 && width > 0) require_matrix_size(height, width, name, limits);
  CellRows rows;
  if (!rows_given) {  // one row of values, as a 1-D array
    rows.emplace_back();
    long j = 0;
    for (const py::handle item : items) rows.back().push_back(cell_of(item, name, 0, j++));
    if (rows.back().empty()) rows.clear();
  } else {
    long i = 0;
    for (const py::handle item : items) {
      rows.emplace_back();
      if (is_row(item)) {
        long j = 0;
        for (const py::handle v : py::reinterpret_borrow<py::sequence>(item)) rows.back().push_back(cell_of(v, name, i, j++));
      } else {
        rows.back().push_back(cell_of(item, name, i, 0));  // a row of one: its length is then refused
      }
      ++i;
    }
  }
  const py::gil_scoped_release release;
  return read_cell_rows(rows, name, limits);
}

Matrix<Rational> from_array(const py::array& a, const std::string& name, const ParseLimits& limits) {
  if (a.dtype().kind() == 'O') {  // value by value, after the shape's checks
    BinaryMatrixView view;
    (void)select_matrix(shape_of(a), strides_of(a), {}, name, view);
    require_matrix_size(view.rows, view.columns, name, limits);
    CellRows rows(static_cast<std::size_t>(view.rows));
    const auto* base = static_cast<const unsigned char*>(a.data());
    for (long i = 0; i < view.rows; ++i)
      for (long j = 0; j < view.columns; ++j) {
        PyObject* o = nullptr;
        std::memcpy(&o, base + i * view.row_stride + j * view.column_stride, sizeof o);
        rows[static_cast<std::size_t>(i)].push_back(cell_of(py::handle(o ? o : Py_None), name, i, j));
      }
    const py::gil_scoped_release release;
    return read_cell_rows(rows, name, limits);
  }
  const BinaryMatrixView view = matrix_view(a, element_type(a, name), name);
  const py::gil_scoped_release release;
  return decode_binary_matrix(view, name, limits);
}

Eigen::MatrixXd doubles_from_array(const py::array& a, const std::string& name, const ParseLimits& limits) {
  const BinaryMatrixView view = matrix_view(a, element_type(a, name), name);
  const py::gil_scoped_release release;
  return decode_binary_matrix_as_doubles(view, name, limits, NonFiniteElements::refuse);
}

NamedTensor tensor_from_array(const py::array& a, const std::string& name, bool keep_nonfinite,
                              const std::optional<std::string>& dtype, const ParseLimits& limits) {
  const ElementType type = element_type(a, name);
  const std::vector<std::size_t> shape = shape_of(a);
  const std::vector<std::ptrdiff_t> strides = strides_of(a);
  const auto* data = static_cast<const unsigned char*>(a.data());
  NamedTensor t;
  t.name = name;
  {
    const py::gil_scoped_release release;
    t.tensor = array_double_tensor(data, type, shape, strides, name, limits,
                                   keep_nonfinite ? NonFiniteElements::keep : NonFiniteElements::refuse);
  }
  if (dtype) t.tensor.dtype = *dtype;
  return t;
}

}  // namespace attnrank::python
