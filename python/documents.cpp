// JSON documents to Python objects and back (python/documents.hpp).
#include "documents.hpp"

#include <attnrank/error.hpp>

#include <pybind11/numpy.h>

#include <cstdint>
#include <string>

namespace attnrank::python {

using nlohmann::json;

namespace {

/// A matrix of JSON numbers (not booleans): a witness head or weights.
bool is_number_matrix(const json& j) {
  if (!j.is_array() || j.empty()) return false;
  const std::size_t columns = j.front().is_array() ? j.front().size() : 0;
  if (columns == 0) return false;
  for (const json& row : j) {
    if (!row.is_array() || row.size() != columns) return false;
    for (const json& v : row)
      if (!v.is_number()) return false;
  }
  return true;
}

/// Whether NumPy can be imported (it is then, once): without it, number matrices
/// come back as lists of floats (docs/python.md, "Getting it").
bool numpy_available() {
  static const bool available = [] {
    try {
      py::module_::import("numpy");
      return true;
    } catch (const py::error_already_set&) {
      return false;
    }
  }();
  return available;
}

}  // namespace

py::object to_python(const json& j, bool numeric) {
  switch (j.type()) {
    case json::value_t::null: return py::none();
    case json::value_t::boolean: return py::bool_(j.get<bool>());
    case json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case json::value_t::number_float: return py::float_(j.get<double>());
    case json::value_t::string: return py::str(j.get_ref<const std::string&>());
    case json::value_t::array: {
      if (numeric && is_number_matrix(j) && numpy_available()) {
        py::array_t<double> a({j.size(), j.front().size()});
        auto w = a.mutable_unchecked<2>();
        for (std::size_t i = 0; i < j.size(); ++i)
          for (std::size_t c = 0; c < j[i].size(); ++c) w(static_cast<py::ssize_t>(i), static_cast<py::ssize_t>(c)) = j[i][c].get<double>();
        return a;
      }
      py::list l;
      for (const json& v : j) l.append(to_python(v, numeric));
      return l;
    }
    case json::value_t::object: {
      py::dict d;
      for (const auto& [key, value] : j.items())
        d[py::str(key)] = to_python(value, numeric && key.rfind("certificate", 0) != 0);
      return d;
    }
    default: return py::none();  // binary and discarded values: no writer makes them
  }
}

json from_python(const py::handle& o) {
  if (o.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(o)) return o.cast<bool>();
  if (py::isinstance<py::int_>(o)) return o.cast<std::int64_t>();
  if (py::isinstance<py::float_>(o)) return o.cast<double>();
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  if (py::isinstance<py::dict>(o)) {
    json j = json::object();
    for (const auto& [k, v] : o.cast<py::dict>()) j[py::str(k).cast<std::string>()] = from_python(v);
    return j;
  }
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    json j = json::array();
    for (const py::handle& v : o) j.push_back(from_python(v));
    return j;
  }
  throw input_error("certificate: " + py::repr(o).cast<std::string>() + " is not JSON data (dict, list, str, number, bool, None)");
}

}  // namespace attnrank::python
