// attnrank._attnrank: the C++ analyses (attnrank/analysis.hpp) bound for Python
// (python/attnrank/__init__.py, docs/python.md). NumPy arrays in, read exactly
// (arrays.hpp); each analysis runs with the GIL released, so other Python threads
// run while it computes (and two analyses run side by side in two threads); its
// one JSON writer's document comes back as Python objects (documents.hpp); each
// question's docstring is the library's help (docstrings.hpp). input_error becomes
// ValueError with the library's message.
#include "arrays.hpp"
#include "docstrings.hpp"
#include "documents.hpp"
#include "run.hpp"  // the command line, for python -m attnrank

#include <attnrank/analysis.hpp>

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
using namespace attnrank::python;
using nlohmann::json;

namespace {

/// The scan of a (heads, n, n) array of T, each head read from the array when the
/// scan reaches it (`heads` outlives the scan).
template <class T, int Flags>
py::object scan_stack(const py::array_t<T, Flags>& heads, const std::vector<std::vector<std::size_t>>& index,
                      const std::vector<std::size_t>& shape, std::optional<Eigen::Index> dk,
                      std::optional<double> epsilon, std::optional<Mask> mask, std::optional<Eigen::Index> max_dk,
                      unsigned jobs, std::uint64_t seed, std::optional<bool> refine, std::optional<double> time_limit,
                      const std::string& name) {
  // The package's own call (attnrank.scan reshapes every stack): a mismatch is a bug, not bad input.
  if (heads.ndim() != 3) throw std::logic_error(name + ": heads must be stacked as (heads, n, n)");
  HeadStack stack;
  stack.name = name;
  stack.shape = shape;
  stack.index = index;
  const auto count = static_cast<std::size_t>(heads.shape(0));
  if (index.size() != count)
    throw std::logic_error(name + ": " + std::to_string(index.size()) + " indices for " + std::to_string(count) + " heads");
  const Eigen::Index rows = heads.shape(1), cols = heads.shape(2);
  const T* base = heads.data();
  stack.read = [base, rows, cols](std::size_t t) -> Eigen::MatrixXd {
    using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    return Eigen::Map<const RowMajor>(base + static_cast<Eigen::Index>(t) * rows * cols, rows, cols)
        .template cast<double>();  // exact: every float is a double
  };
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
}

}  // namespace

PYBIND11_MODULE(_attnrank, m) {
  m.doc() = "attnrank's C++ analyses: exact inputs from NumPy, each question answered with the GIL released";
  py::register_exception<input_error>(m, "InputError", PyExc_ValueError);
  m.attr("__version__") = ATTNRANK_VERSION;  // CMake's project version, as attnrank --version prints
  // With glibc's defaults a head at n = 1024 took twice as long here as in the
  // command (documents.hpp). At most 128 MiB of freed memory stays with the process.
  m.attr("keeps_freed_memory") = keep_freed_memory(kept_block_bytes);
  m.def(
      "main",
      [](const std::vector<std::string>& args) {
        std::vector<const char*> argv;
        for (const std::string& a : args) argv.push_back(a.c_str());
        const py::gil_scoped_release release;
        const FreedMemoryKept keep(kept_block_bytes);
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
  m.def(
      "from_array",
      [](const py::array& a, const std::string& name, std::optional<std::size_t> max_size) {
        return from_array(a, name, limits_of(max_size));
      },
      py::arg("array"), py::arg("name"), py::arg("max_size") = std::nullopt,
      "A NumPy array (1-D: one row) as an exact matrix, read as an .npy file of it; an object array value by value");
  m.def(
      "from_values",
      [](const py::handle& values, const std::string& name, std::optional<std::size_t> max_size) {
        return from_values(values, name, limits_of(max_size));
      },
      py::arg("values"), py::arg("name"), py::arg("max_size") = std::nullopt,
      "A list of rows (or one row) of exact values: str, int, Fraction, float, None (an empty cell)");

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
  m.def(
      "tensor_from_array",
      [](const py::array& a, const std::string& name, bool keep_nonfinite, const std::optional<std::string>& dtype,
         std::optional<std::size_t> max_size) {
        return tensor_from_array(a, name, keep_nonfinite, dtype, limits_of(max_size));
      },
      py::arg("array"), py::arg("name"), py::arg("keep_nonfinite") = false, py::arg("dtype") = std::nullopt,
      py::arg("max_size") = std::nullopt);

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
      [](const py::array& M, const std::string& mode, unsigned bits, std::optional<double> tol, Eigen::Index top,
         std::optional<std::size_t> max_size) {
        const Eigen::MatrixXd A = doubles_from_array(M, "M", limits_of(max_size));
        RankQuestion q{parse_rank_mode(mode), bits, tol, top, "M"};
        return released([&] { return to_json(analyze_rank(A, q)); });
      },
      "rank of a float array read straight into doubles (as the CLI reads a .npy)", py::arg("M"), py::arg("mode"),
      py::arg("bits"), py::arg("tol"), py::arg("top"), py::arg("max_size") = std::nullopt);
  m.def(
      "svd_doubles",
      [](const py::array& M, std::optional<Eigen::Index> top, bool gaps, std::optional<std::size_t> max_size) {
        const Eigen::MatrixXd A = doubles_from_array(M, "M", limits_of(max_size));
        SvdQuestion q{top, gaps, "M"};
        return released([&] { return to_json(analyze_svd(A, q)); });
      },
      "svd of a float array read straight into doubles", py::arg("M"), py::arg("top"), py::arg("gaps"),
      py::arg("max_size") = std::nullopt);
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
  m.attr("default_search_flops") = default_search_flops;
  m.attr("full_search_flops") = full_search_flops;
  m.attr("rows_not_normalised_note") = rows_not_normalised_note;
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
      "combined_verdict",
      [](const std::vector<std::string>& verdicts) {
        std::vector<ToleranceVerdict> all;
        for (const std::string& v : verdicts) all.push_back(tolerance_verdict_from_name(v));
        const std::optional<ToleranceVerdict> c = combined_verdict(all);
        return c ? std::string(to_string(*c)) : std::string();
      },
      py::arg("verdicts"), "The verdict over several (within, exceeded, undecided): exceeded over undecided over within");
  m.def(
      "default_tolerance",
      [](const std::string& dtype) -> std::optional<std::pair<double, double>> {
        const std::optional<ErrorTolerance> t = default_tolerance(dtype);
        if (!t) return std::nullopt;
        return std::pair{t->rtol, t->atol};
      },
      py::arg("dtype"), "torch.testing's default (rtol, atol) for a dtype name, applied to the max; None for others");
  m.def("stack_note", &stack_note, py::arg("shape"),
        "The note on a scanned stack as a whole, '' when none (attnrank/analysis/scan_analysis.hpp)");
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
  // float32 stacks are read as they are (a memory-mapped file stays on disk; no
  // float64 copy of the whole stack); other dtypes come as float64.
  const auto def_scan = [&](auto scan, const char* doc) {
    m.def("scan", scan, doc, py::arg("heads"), py::arg("index"), py::arg("shape"), py::arg("d_k"),
          py::arg("epsilon"), py::arg("mask"), py::arg("max_dk"), py::arg("jobs"), py::arg("seed"), py::arg("refine"),
          py::arg("time_limit"), py::arg("name"));
  };
  def_scan(&scan_stack<float, py::array::c_style>, doc_of("scan"));  // first: only a C-ordered float32 array
  def_scan(&scan_stack<double, py::array::c_style | py::array::forcecast>, "");  // pybind11 joins the docs
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
         const std::string& empty_rows, std::optional<std::string> profile, std::optional<double> max_ulps) {
        KernelQuestion kq;
        if (profile) kq.profile = profile_from_argument(*profile);
        kq.max_ulps = max_ulps;
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
      py::arg("empty_rows"), py::arg("profile"), py::arg("max_ulps"));
}
