#pragma once
// The analyses' JSON documents as Python objects and back, built directly (no
// JSON text): dicts, lists, ints, floats, strings, and float64 NumPy arrays for the
// numeric matrices (witness heads and weights; lists of floats without NumPy).
// Certificates stay plain JSON data, so that they can be written out and checked.
#include <attnrank/freed_memory.hpp>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace attnrank::python {

namespace py = pybind11;

/// The document as Python objects; `numeric` turns number matrices into arrays
/// (off inside certificates).
py::object to_python(const nlohmann::json& j, bool numeric = true);

/// A Python object (dict, list, tuple, str, number, bool, None) as JSON: a
/// certificate handed back; input_error for anything else.
nlohmann::json from_python(const py::handle& o);

/// Freed blocks of up to 64 MiB (an interval matrix at n = 2048) are kept for
/// reuse in a Python process (attnrank/freed_memory.hpp): set at import, and kept
/// during each analysis where the environment chose otherwise (a Dask worker).
inline constexpr std::size_t kept_block_bytes = std::size_t{64} << 20;

/// Runs an analysis and its JSON writer with the GIL released and freed memory
/// kept, then builds the Python result with the GIL held.
template <class Analyse>
py::object released(Analyse&& analyse) {
  nlohmann::json document;
  {
    py::gil_scoped_release release;
    const FreedMemoryKept keep(kept_block_bytes);
    document = analyse();
  }
  return to_python(document);
}

}  // namespace attnrank::python
