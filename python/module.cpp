// attnrank._attnrank: the C extension behind the attnrank Python package
// (python/attnrank/__init__.py, docs/python.md). Two functions: NumPy arrays (or
// rows of exact numbers as text) in, exact matrices out; and the attnrank command
// line run in this process on such matrices, so Python gets the same answers, the
// same JSON keys and the same error messages as the CLI.
#include "run.hpp"

#include <attnrank/io/binary_array.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>

namespace py = pybind11;
using namespace attnrank;

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

/// A 2-D NumPy array of numbers, exactly (every float is the dyadic rational it stores).
Matrix<Rational> from_array(const py::array& a, const std::string& name) {
  if (a.ndim() != 2)
    throw input_error(name + ": a 2-D array is needed, this one has " + std::to_string(a.ndim()) + " dimensions");
  BinaryMatrixView view;
  view.type = element_type(a.dtype());
  view.data = static_cast<const unsigned char*>(a.data());
  view.rows = static_cast<long>(a.shape(0));
  view.columns = static_cast<long>(a.shape(1));
  view.row_stride = a.strides(0);
  view.column_stride = a.strides(1);
  return decode_binary_matrix(view, name);
}

/// Rows of exact numbers written as text ("1/3", "0.8", "-2"), for Fractions and strings.
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

}  // namespace

PYBIND11_MODULE(_attnrank, m) {
  m.doc() = "attnrank's C++ core: exact matrices from NumPy, and the attnrank command run in process";
  py::class_<Matrix<Rational>>(m, "ExactMatrix", "An exact rational matrix, as attnrank reads it")
      .def_property_readonly("shape", [](const Matrix<Rational>& a) { return py::make_tuple(a.rows(), a.cols()); })
      .def("entry", [](const Matrix<Rational>& a, long i, long j) {
        if (i < 0 || j < 0 || i >= a.rows() || j >= a.cols()) throw py::index_error("entry out of range");
        return a(i, j).str();
      }, "Entry (i, j) as the exact fraction 'p/q' (or an integer)");
  m.def("from_array", &from_array, py::arg("array"), py::arg("name"),
        "A 2-D float or integer NumPy array as an exact matrix");
  m.def("from_rows", &from_rows, py::arg("rows"), py::arg("name"), "Rows of exact numbers written as text");
  m.def(
      "run",
      [](const std::vector<std::string>& args, const std::vector<Matrix<Rational>>& matrices) {
        std::vector<const char*> argv{"attnrank"};
        for (const std::string& a : args) argv.push_back(a.c_str());
        std::ostringstream out, err;
        // The GIL stays held: the command line keeps its limits and notes in globals.
        const int code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err, matrices);
        return py::make_tuple(code, out.str(), err.str());
      },
      py::arg("args"), py::arg("matrices"),
      "Runs `attnrank ARGS` in this process; '@k' arguments are matrices[k]. Returns (exit code, stdout, stderr).");
  py::register_exception<input_error>(m, "InputError", PyExc_ValueError);
}
