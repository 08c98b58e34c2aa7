// attnrank._attnrank: the C++ analyses (attnrank/analysis.hpp) bound for Python
// (python/attnrank/__init__.py, docs/python.md). NumPy arrays in, read exactly;
// each analysis runs with the GIL released, so other Python threads run while it
// computes (and two analyses run side by side in two threads); its one JSON
// writer's document comes back as Python objects built here (no JSON text):
// dicts, lists, ints, floats, strings, and float64 NumPy arrays for the numeric
// matrices (witness heads and weights). Certificates stay plain JSON data, so
// that they can be written out and checked. input_error becomes ValueError with
// the library's message.
#include <attnrank/analysis.hpp>
#include <attnrank/io/binary_array.hpp>

#include "run.hpp"  // the command line, for python -m attnrank

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace attnrank;
using nlohmann::json;

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

/// A 2-D NumPy array of numbers, exactly (every float is the dyadic rational it stores).
/// The GIL is released while the buffer is read: `a` keeps it alive.
Matrix<Rational> from_array(const py::array& a, const std::string& name) {
  if (a.ndim() != 2)
    throw input_error(name + ": a 2-D array is needed, this one has " + std::to_string(a.ndim()) + " dimensions");
  const BinaryMatrixView view = matrix_view(a, 0);
  py::gil_scoped_release release;
  return decode_binary_matrix(view, name);
}

/// A 2-D NumPy array of floats straight into doubles, as the CLI reads a .npy (exact:
/// float16/32/64 are doubles), for the analyses that work on doubles; GIL released.
Eigen::MatrixXd doubles_from_array(const py::array& a, const std::string& name) {
  if (a.ndim() != 2)
    throw input_error(name + ": a 2-D array is needed, this one has " + std::to_string(a.ndim()) + " dimensions");
  const BinaryMatrixView view = matrix_view(a, 0);
  py::gil_scoped_release release;
  return decode_binary_matrix_as_doubles(view, name, {}, NonFiniteElements::refuse);
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

/// A (N, d), (H, N, d) or (B, H, N, d) float array as a stack of double matrices,
/// exactly (float16/32/64 are doubles; integers up to 2^53). `dtype` names the
/// element type in reports (torch's "bfloat16" arrives here as its exact float32).
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

/// The document as Python objects; `numeric` turns number matrices into arrays
/// (off inside certificates, which stay plain JSON data).
py::object to_python(const json& j, bool numeric = true) {
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

/// A Python object (dict, list, str, number, bool, None) as JSON: a certificate handed back.
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

/// Runs an analysis and its JSON writer with the GIL released, then builds the
/// Python result with the GIL held.
template <class Analyse>
py::object released(Analyse&& analyse) {
  json document;
  {
    py::gil_scoped_release release;
    document = analyse();
  }
  return to_python(document);
}

/// `text` broken into lines of at most 88 columns, each indented by `indent`.
std::string wrapped(const std::string& text, std::size_t indent) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > 88) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
  return out;
}

/// A question's docstring, from the library's help (analysis/option_help.hpp), which
/// the command line's --help prints too: the title, what a result proves, and each
/// option's text under its name.
std::string docstring(std::string_view question) {
  const QuestionHelp& h = question_help(question);
  std::string s = h.title + ".\n\n" + wrapped(h.details, 0) + "\nParameters\n----------\n";
  for (const OptionHelp& o : h.options) s += o.name + "\n" + wrapped(o.text, 4);
  return s;
}

/// docstring(question), kept for the life of the module (pybind11 keeps the pointer).
const char* doc_of(std::string_view question) {
  static std::map<std::string, std::string, std::less<>> docs;
  auto it = docs.find(question);
  if (it == docs.end()) it = docs.emplace(std::string(question), docstring(question)).first;
  return it->second.c_str();
}

}  // namespace

PYBIND11_MODULE(_attnrank, m) {
  m.doc() = "attnrank's C++ analyses: exact inputs from NumPy, each question answered with the GIL released";
  py::register_exception<input_error>(m, "InputError", PyExc_ValueError);
  m.attr("__version__") = ATTNRANK_VERSION;  // CMake's project version, as attnrank --version prints
  m.def(
      "main",
      [](const std::vector<std::string>& args) {
        std::vector<const char*> argv;
        for (const std::string& a : args) argv.push_back(a.c_str());
        const py::gil_scoped_release release;
        const int code = cli::run(static_cast<int>(argv.size()), argv.data(), std::cout, std::cerr);
        std::cout.flush();
        return code;
      },
      py::arg("argv"), "Runs the attnrank command line on argv (argv[0] the program name); returns its exit code");

  py::class_<Matrix<Rational>>(m, "ExactMatrix", "An exact rational matrix, as attnrank reads it")
      .def_property_readonly("shape", [](const Matrix<Rational>& a) { return py::make_tuple(a.rows(), a.cols()); })
      .def(
          "entry",
          [](const Matrix<Rational>& a, long i, long j) {
            if (i < 0 || j < 0 || i >= a.rows() || j >= a.cols()) throw py::index_error("entry out of range");
            return a(i, j).str();
          },
          "Entry (i, j) as the exact fraction 'p/q' (or an integer)");
  m.def("from_array", &from_array, py::arg("array"), py::arg("name"), "A 2-D float or integer NumPy array as an exact matrix");
  m.def("from_rows", &from_rows, py::arg("rows"), py::arg("name"), "Rows of exact numbers written as text");

  py::class_<Mask>(m, "Mask", "Which keys each query may attend to (masked scores are -inf)")
      .def_property_readonly("size", &Mask::size)
      .def_property_readonly("name", &Mask::name);
  m.def("causal_mask", &Mask::causal, py::arg("n"), "The causal mask on n tokens");
  m.def("named_mask", &named_mask, py::arg("name"), py::arg("n"), "The mask 'none' (None) or 'causal' names, on n tokens");
  m.def("full_mask", &Mask::full, py::arg("n"), "The mask that allows every key (for one head of a per-head list)");
  m.def(
      "mask_from_matrix",
      [](const Matrix<Rational>& M, bool rectangular, const std::string& empty_rows) {
        return Mask::from_matrix(M, "mask", rectangular, empty_rows_from_name(empty_rows));
      },
      py::arg("matrix"), py::arg("rectangular") = false, py::arg("empty_rows") = "refuse",
      "A 0/1 matrix as a mask (1: the query may attend); N_q x N_k with rectangular, whose rows may allow no "
      "key with empty_rows='zero'");

  py::class_<NamedTensor>(m, "Tensor", "A stack of double matrices (N, d) .. (B, H, N, d), read exactly")
      .def_property_readonly("shape", [](const NamedTensor& t) { return t.tensor.shape; });
  m.def("tensor_from_array", &tensor_from_array, py::arg("array"), py::arg("name"), py::arg("keep_nonfinite") = false,
        py::arg("dtype") = std::nullopt);

  // The questions' docstrings are the library's help alone (the public wrappers in
  // __init__.py take them over; their signatures are the wrappers' own).
  py::options question_docs;
  question_docs.disable_function_signatures();
  m.def(
      "reach",
      [](const Matrix<Rational>& A, Eigen::Index dk, std::optional<double> epsilon, std::optional<Mask> mask,
         std::optional<Matrix<Rational>> x, unsigned bits, std::uint64_t seed, bool full_floor, std::optional<bool> refine,
         std::optional<double> time_limit) {
        ReachQuestion q;
        q.refine = refine_options(refine, time_limit);
        q.dk = dk;
        q.epsilon = epsilon;
        q.mask = std::move(mask);
        q.x = std::move(x);
        q.bits = bits;
        q.seed = seed;
        q.full_floor = full_floor;
        q.target_name = "A";
        q.x_name = "x";
        return released([&] { return to_json(analyze_reach(A, q)); });
      },
      doc_of("reach"), py::arg("A"), py::arg("d_k"), py::arg("epsilon"), py::arg("mask"), py::arg("x"), py::arg("bits"), py::arg("seed"),
      py::arg("full_floor"), py::arg("refine"), py::arg("time_limit"));
  m.def(
      "check_certificate",
      [](const Matrix<Rational>& A, const py::object& certificate, std::optional<Mask> mask,
         std::optional<Matrix<Rational>> x) {
        const json c = from_python(certificate);
        return released([&] { return to_json(analyze_certificate(A, c, mask, x, "certificate", "A")); });
      },
      doc_of("check_certificate"), py::arg("A"), py::arg("certificate"), py::arg("mask"), py::arg("x"));
  m.def(
      "width",
      [](const Matrix<Rational>& A, double epsilon, std::optional<Eigen::Index> max_dk, std::optional<Mask> mask, std::uint64_t seed,
         std::optional<bool> refine, std::optional<double> time_limit) {
        WidthQuestion q{epsilon, max_dk, std::move(mask), seed, refine_options(refine, time_limit), "A"};
        return released([&] { return to_json(analyze_width(A, q)); });
      },
      doc_of("width"), py::arg("A"), py::arg("epsilon"), py::arg("max_dk"), py::arg("mask"), py::arg("seed"), py::arg("refine"),
      py::arg("time_limit"));
  m.def(
      "rank",
      [](const Matrix<Rational>& M, const std::string& mode, unsigned bits, std::optional<double> tol, Eigen::Index top) {
        RankQuestion q{parse_rank_mode(mode), bits, tol, top, "M"};
        return released([&] { return to_json(analyze_rank(M, q)); });
      },
      doc_of("rank"), py::arg("M"), py::arg("mode"), py::arg("bits"), py::arg("tol"), py::arg("top"));
  m.def(
      "rank_doubles",
      [](const py::array& M, const std::string& mode, unsigned bits, std::optional<double> tol, Eigen::Index top) {
        const Eigen::MatrixXd A = doubles_from_array(M, "M");
        RankQuestion q{parse_rank_mode(mode), bits, tol, top, "M"};
        return released([&] { return to_json(analyze_rank(A, q)); });
      },
      "rank of a float array read straight into doubles (as the CLI reads a .npy)", py::arg("M"), py::arg("mode"),
      py::arg("bits"), py::arg("tol"), py::arg("top"));
  m.def(
      "svd_doubles",
      [](const py::array& M, std::optional<Eigen::Index> top, bool gaps) {
        const Eigen::MatrixXd A = doubles_from_array(M, "M");
        SvdQuestion q{top, gaps, "M"};
        return released([&] { return to_json(analyze_svd(A, q)); });
      },
      "svd of a float array read straight into doubles", py::arg("M"), py::arg("top"), py::arg("gaps"));
  m.def(
      "det",
      [](const Matrix<Rational>& M, const std::string& mode, unsigned bits, int digits) {
        DetQuestion q{det_mode_is_certified(mode), bits, digits, "M"};
        return released([&] { return to_json(analyze_det(M, q)); });
      },
      doc_of("det"), py::arg("M"), py::arg("mode"), py::arg("bits"), py::arg("digits"));
  m.def(
      "svd",
      [](const Matrix<Rational>& M, std::optional<Eigen::Index> top, bool gaps) {
        SvdQuestion q{top, gaps, "M"};
        return released([&] { return to_json(analyze_svd(M, q)); });
      },
      doc_of("svd"), py::arg("M"), py::arg("top"), py::arg("gaps"));
  m.def(
      "layer",
      [](const Matrix<Rational>& x, const Matrix<Rational>& wq, const Matrix<Rational>& wk, const Matrix<Rational>& wv,
         const Matrix<Rational>& wo, Eigen::Index heads, const std::string& tier, std::optional<int> digits,
         std::optional<int> significant, unsigned bits, std::vector<Mask> masks) {
        LayerQuestion q{parse_layer_tier(tier), layer_format(digits, significant), bits, std::move(masks), true};
        return released([&] { return to_json(analyze_layer(MultiHeadAttention<Rational>(wq, wk, wv, wo, heads), x, q)); });
      },
      doc_of("layer"), py::arg("x"), py::arg("wq"), py::arg("wk"), py::arg("wv"), py::arg("wo"), py::arg("heads"), py::arg("tier"),
      py::arg("digits"), py::arg("significant"), py::arg("bits"), py::arg("masks"));
  m.attr("default_time_limit") = default_time_limit;
  m.attr("default_layer_bits") = default_layer_bits;
  m.attr("default_fallback_bits") = default_fallback_bits;
  m.def(
      "question_helps",
      [] {
        py::list all;
        for (const QuestionHelp& h : question_helps()) {
          py::list options;
          for (const OptionHelp& o : h.options) options.append(py::make_tuple(o.name, o.text));
          all.append(py::dict(py::arg("name") = h.name, py::arg("title") = h.title, py::arg("details") = h.details,
                              py::arg("options") = options));
        }
        return all;
      },
      "Every question's help (name, title, details, options as (name, text)): what --help and the docstrings print");
  m.def(
      "check_scan_options",
      [](std::optional<double> epsilon, std::optional<bool> refine, std::optional<double> time_limit) {
        ScanQuestion q;
        q.epsilon = epsilon;
        q.refine = refine_options(refine, time_limit);
        validate(q);
      },
      "input_error (ValueError) when scan's options are invalid, as the scan itself would raise it",
      py::arg("epsilon"), py::arg("refine"), py::arg("time_limit"));
  m.def(
      "scan",
      [](const py::array_t<double, py::array::c_style | py::array::forcecast>& heads,
         const std::vector<std::vector<std::size_t>>& index, const std::vector<std::size_t>& shape,
         std::optional<Eigen::Index> dk, std::optional<double> epsilon, std::optional<Mask> mask,
         std::optional<Eigen::Index> max_dk,
         unsigned jobs, std::uint64_t seed, std::optional<bool> refine, std::optional<double> time_limit,
         const std::string& name) {
        if (heads.ndim() != 3) throw input_error(name + ": heads must be stacked as (heads, n, n)");
        HeadStack stack;
        stack.name = name;
        stack.shape = shape;
        stack.index = index;
        const auto count = static_cast<std::size_t>(heads.shape(0));
        const Eigen::Index rows = heads.shape(1), cols = heads.shape(2);
        using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        for (std::size_t t = 0; t < count; ++t)
          stack.patterns.emplace_back(Eigen::Map<const RowMajor>(heads.data(static_cast<py::ssize_t>(t), 0, 0), rows, cols));
        ScanQuestion q;
        q.dk = dk;
        q.epsilon = epsilon;
        q.mask = std::move(mask);
        q.max_dk = max_dk;
        q.jobs = jobs;
        q.seed = seed;
        q.refine = refine_options(refine, time_limit);
        return released([&] {
          const std::vector<HeadScan> done = analyze_scan(stack, q);
          json list = json::array();
          for (const HeadScan& h : done) list.push_back(to_json(h));
          return list;
        });
      },
      doc_of("scan"), py::arg("heads"), py::arg("index"), py::arg("shape"), py::arg("d_k"), py::arg("epsilon"), py::arg("mask"),
      py::arg("max_dk"), py::arg("jobs"), py::arg("seed"), py::arg("refine"), py::arg("time_limit"), py::arg("name"));
  m.def(
      "check_kernel",
      [](NamedTensor q, NamedTensor k, NamedTensor v, std::optional<NamedTensor> candidate,
         std::optional<NamedTensor> reference, std::optional<NamedTensor> dout,
         std::map<std::string, NamedTensor> gradients, std::map<std::string, NamedTensor> reference_gradients,
         std::optional<Mask> mask, std::optional<double> scale, const std::string& fallback, unsigned bits,
         std::optional<double> max_error, std::optional<double> rtol, std::optional<double> max_ratio,
         std::optional<double> ratio_atol, bool causal, std::optional<std::pair<long, long>> window,
         const std::string& alignment, double softcap, std::optional<NamedTensor> alibi_slopes,
         std::optional<NamedTensor> sinks, std::optional<NamedTensor> masks, std::optional<NamedTensor> bias,
         const std::string& fp8_format, std::optional<NamedTensor> q_descale, std::optional<NamedTensor> k_descale,
         std::optional<NamedTensor> v_descale, std::optional<NamedTensor> dropout_mask, double dropout_p,
         std::optional<NamedTensor> cu_seqlens_q, std::optional<NamedTensor> cu_seqlens_k,
         std::optional<std::size_t> max_seqlen_q, std::optional<std::size_t> max_seqlen_k,
         const std::string& empty_rows) {
        KernelQuestion kq;
        kq.cu_seqlens_q = std::move(cu_seqlens_q);
        kq.cu_seqlens_k = std::move(cu_seqlens_k);
        kq.max_seqlen_q = max_seqlen_q;
        kq.max_seqlen_k = max_seqlen_k;
        kq.dropout_mask = std::move(dropout_mask);
        kq.dropout_p = dropout_p;
        kq.fp8_format = fp8_format;
        kq.q_descale = std::move(q_descale);
        kq.k_descale = std::move(k_descale);
        kq.v_descale = std::move(v_descale);
        kq.masks = std::move(masks);
        kq.bias = std::move(bias);
        kq.options.softcap = softcap;
        kq.alibi_slopes = std::move(alibi_slopes);
        kq.sinks = std::move(sinks);
        kq.causal = causal;
        kq.window = window;
        kq.alignment = mask_alignment_from_name(alignment);
        kq.options.empty_rows = empty_rows_from_name(empty_rows);
        kq.q = std::move(q);
        kq.k = std::move(k);
        kq.v = std::move(v);
        kq.candidate = std::move(candidate);
        kq.reference = std::move(reference);
        kq.dout = std::move(dout);
        const auto take = [](std::map<std::string, NamedTensor>& from, const char* name, std::optional<NamedTensor>& to) {
          if (auto it = from.find(name); it != from.end()) to = std::move(it->second);
        };
        take(gradients, "dq", kq.dq);
        take(gradients, "dk", kq.dk);
        take(gradients, "dv", kq.dv);
        take(gradients, "lse", kq.lse);
        take(gradients, "dsinks", kq.dsinks);
        take(reference_gradients, "dq", kq.reference_dq);
        take(reference_gradients, "dk", kq.reference_dk);
        take(reference_gradients, "dv", kq.reference_dv);
        take(reference_gradients, "lse", kq.reference_lse);
        take(reference_gradients, "dsinks", kq.reference_dsinks);
        kq.max_error = max_error;
        kq.rtol = rtol;
        kq.max_ratio = max_ratio;
        kq.ratio_atol = ratio_atol;
        kq.options.scale = scale;
        kq.options.mask = std::move(mask);
        kq.options.fallback = fallback_policy_from_name(fallback);
        kq.options.fallback_bits = bits;
        return released([&] { return to_json(analyze_kernel(std::move(kq))); });
      },
      doc_of("check_kernel"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("candidate"), py::arg("reference"), py::arg("dout"),
      py::arg("gradients"), py::arg("reference_gradients"), py::arg("mask"), py::arg("scale"), py::arg("fallback"),
      py::arg("bits"), py::arg("max_error"), py::arg("rtol"), py::arg("max_ratio"), py::arg("ratio_atol"),
      py::arg("causal"), py::arg("window"), py::arg("alignment"), py::arg("softcap"), py::arg("alibi_slopes"),
      py::arg("sinks"), py::arg("masks"), py::arg("bias"), py::arg("fp8_format"), py::arg("q_descale"),
      py::arg("k_descale"), py::arg("v_descale"), py::arg("dropout_mask"), py::arg("dropout_p"),
      py::arg("cu_seqlens_q"), py::arg("cu_seqlens_k"), py::arg("max_seqlen_q"), py::arg("max_seqlen_k"),
      py::arg("empty_rows"));
}
