#pragma once
// Python values into the library's types, read exactly and refused in the library's
// words, as the command line reads the same numbers from a file: a NumPy array as an
// .npy file of it (attnrank/io/binary_array.hpp: every float the dyadic rational it
// stores, a dtype attnrank cannot read exactly named as the file's, a 1-D array one
// row), a list of rows or an object array value by value (attnrank/io/value_cells.hpp:
// a str, int or Fraction as a text cell, a float as an array's element, None as an
// empty cell). The binding checks nothing itself. Each reader releases the GIL while
// it decodes (the array keeps its buffer alive); a list's values are taken from
// Python with the GIL held, then read without it.
#include <attnrank/analysis/kernel_analysis.hpp>
#include <attnrank/io/binary_array.hpp>
#include <attnrank/io/value_cells.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

namespace attnrank::python {

namespace py = pybind11;

/// The limits of the readers with a Python call's max_size (None: the default).
ParseLimits limits_of(std::optional<std::size_t> max_size);

/// A NumPy array of numbers, exactly; an object array value by value.
Matrix<Rational> from_array(const py::array& a, const std::string& name, const ParseLimits& limits);

/// A NumPy array of floats or integers straight into doubles (exact: float16/32/64
/// are doubles, integers up to 2^53 too), for the analyses that work on doubles.
Eigen::MatrixXd doubles_from_array(const py::array& a, const std::string& name, const ParseLimits& limits);

/// A list (or tuple) of rows, or a single row of values, exactly.
Matrix<Rational> from_values(const py::handle& values, const std::string& name, const ParseLimits& limits);

/// A (N, d), (H, N, d) or (B, H, N, d) array as a stack of double matrices, exactly, as
/// the command line reads an .npy file of it. `dtype` names the element type in
/// reports when the array is not what the caller had (torch's bfloat16 arrives here as
/// its exact float32); `keep_nonfinite` reports NaN and infinities instead of refusing
/// them (a kernel's outputs).
NamedTensor tensor_from_array(const py::array& a, const std::string& name, bool keep_nonfinite,
                              const std::optional<std::string>& dtype, const ParseLimits& limits);

}  // namespace attnrank::python
