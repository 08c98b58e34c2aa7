#pragma once
// NumPy arrays into the library's types, read exactly, as the CLI reads a .npy:
// every float is the dyadic rational it stores, integers up to 2^53 are doubles,
// and a dtype attnrank cannot read exactly is input_error naming it. Each reader
// releases the GIL while it decodes the buffer (the array keeps it alive).
#include <attnrank/analysis/kernel_analysis.hpp>
#include <attnrank/io/binary_array.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

namespace attnrank::python {

namespace py = pybind11;

/// A 2-D NumPy array of numbers, exactly (every float is the dyadic rational it stores).
Matrix<Rational> from_array(const py::array& a, const std::string& name);

/// A 2-D NumPy array of floats straight into doubles (exact: float16/32/64 are
/// doubles), for the analyses that work on doubles.
Eigen::MatrixXd doubles_from_array(const py::array& a, const std::string& name);

/// Rows of exact numbers written as text ("1/3", "0.8", "-2"), for Fractions and strings.
Matrix<Rational> from_rows(const std::vector<std::vector<std::string>>& rows, const std::string& name);

/// A (N, d), (H, N, d) or (B, H, N, d) float array as a stack of double matrices,
/// exactly. `dtype` names the element type in reports (torch's "bfloat16" arrives
/// here as its exact float32); `keep_nonfinite` reports NaN and infinities instead
/// of refusing them (a kernel's outputs).
NamedTensor tensor_from_array(const py::array& a, const std::string& name, bool keep_nonfinite,
                              const std::optional<std::string>& dtype);

}  // namespace attnrank::python
