// The kernel check as an analysis and its writers (analysis/kernel_analysis.hpp).
#include <attnrank/analysis/kernel_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/io/binary_array.hpp>
#include <attnrank/io/safetensors.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace attnrank {
namespace {

using nlohmann::json;

/// Every tensor has Q's leading dimensions (one matrix per head).
void require_same_heads(const NamedTensor& q, const NamedTensor& other, const std::string& role,
                        const char* base = "Q") {
  const auto leading = [](const DoubleTensor& t) { return std::vector<std::size_t>(t.shape.begin(), t.shape.end() - 2); };
  if (leading(q.tensor) != leading(other.tensor))
    throw input_error(other.name + " (" + role + ") has shape " + shape_text(other.tensor.shape) + " but " + base +
                      " has " + shape_text(q.tensor.shape) +
                      ": the dimensions before the last two (batch, heads) must agree");
}

/// K's leading dimensions against Q's: equal, or (grouped queries) the same batches with a
/// number of K/V heads that divides Q's heads. Returns the options' kv_heads (empty when equal).
std::vector<std::size_t> kv_heads_from_shapes(const NamedTensor& q, const NamedTensor& k) {
  const auto leading = [](const DoubleTensor& t) { return std::vector<std::size_t>(t.shape.begin(), t.shape.end() - 2); };
  const std::vector<std::size_t> lq = leading(q.tensor), lk = leading(k.tensor);
  if (lq == lk) return {};
  const bool same_rank = lq.size() == lk.size() && !lq.empty();
  const bool same_batch = same_rank && (lq.size() == 1 || lq[0] == lk[0]);
  if (!same_batch || lk.back() == 0 || lq.back() % lk.back() != 0)
    throw input_error(k.name + " (K) has shape " + shape_text(k.tensor.shape) + " but Q has " +
                      shape_text(q.tensor.shape) + ": the batch dimensions must agree, and K and V may have fewer " +
                      "heads than Q only when their number divides Q's (grouped-query attention)");
  return grouped_kv_heads(lq.size() == 2 ? lq[0] : 1, lq.back(), lk.back());
}

json place_json(const DoubleTensor& q, const OutputError& e) {
  const std::vector<std::size_t> lead = q.leading_index(e.worst_matrix);
  json j;
  if (lead.size() == 2) j["batch"] = lead[0];
  if (!lead.empty()) j["head"] = lead.back();
  j["row"] = e.worst_row;
  j["column"] = e.worst_column;
  return j;
}

std::string place_text(const DoubleTensor& q, const OutputError& e) {
  const std::vector<std::size_t> lead = q.leading_index(e.worst_matrix);
  std::string s;
  if (lead.size() == 2) s += "batch " + std::to_string(lead[0]) + ", ";
  if (!lead.empty()) s += "head " + std::to_string(lead.back()) + ", ";
  return s + "row " + std::to_string(e.worst_row) + ", column " + std::to_string(e.worst_column) + " (0-based)";
}

std::string lower_text(double x) { return std::isfinite(x) ? format_lower_bound(x, 4) : "inf"; }
std::string upper_text(double x) { return std::isfinite(x) ? format_upper_bound(x, 4) : "inf"; }

json error_json(const DoubleTensor& q, const OutputError& e, const std::string& name, const std::string& dtype) {
  return {{"file", name},
          {"dtype", dtype},
          {"max_abs_error_lower", lower_text(e.max_abs_error_lower)},
          {"max_abs_error_upper", upper_text(e.max_abs_error_upper)},
          {"max_rel_error_lower", lower_text(e.max_rel_error_lower)},
          {"max_rel_error_upper", upper_text(e.max_rel_error_upper)},
          {"mean_abs_error_lower", lower_text(e.mean_abs_error_lower)},
          {"mean_abs_error_upper", upper_text(e.mean_abs_error_upper)},
          {"rms_error_lower", lower_text(e.rms_error_lower)},
          {"rms_error_upper", upper_text(e.rms_error_upper)},
          {"worst", place_json(q, e)},
          {"nonfinite", e.nonfinite}};
}

std::string error_text(const DoubleTensor& q, const OutputError& e, const std::string& label, const std::string& name,
                       const std::string& dtype, const std::string& symbol = "O") {
  const auto pad = [&](std::string text) {  // the columns stay aligned for every symbol
    text.resize(std::max<std::size_t>(text.size(), 31), ' ');
    return text;
  };
  std::ostringstream s;
  s << label << " (" << name << ", " << dtype << "):\n";
  if (e.nonfinite > 0) s << "  " << e.nonfinite << " entries are NaN or infinite; the first at " << place_text(q, e) << "\n";
  s << "  " << pad("max |" + symbol + " - exact|") << " in [" << lower_text(e.max_abs_error_lower) << ", "
    << upper_text(e.max_abs_error_upper) << "]\n";
  s << "  " << pad("max |" + symbol + " - exact| / max |exact|") << " in [" << lower_text(e.max_rel_error_lower) << ", "
    << upper_text(e.max_rel_error_upper) << "]\n";
  s << "  " << pad("mean |" + symbol + " - exact|") << " in [" << lower_text(e.mean_abs_error_lower) << ", "
    << upper_text(e.mean_abs_error_upper) << "]\n";
  s << "  " << pad("RMS of " + symbol + " - exact") << " in [" << lower_text(e.rms_error_lower) << ", "
    << upper_text(e.rms_error_upper) << "]\n";
  if (e.nonfinite == 0) s << "  largest proven error at " << place_text(q, e) << "\n";
  return s.str();
}

/// The shortest decimal that reads back as x (a tolerance as the user wrote it, usually).
std::string shortest_text(double x) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, x).ptr;
  return std::string(buffer, end);
}

std::string tolerance_text(ToleranceVerdict v, const char* what) {
  switch (v) {
    case ToleranceVerdict::within: return std::string("within (") + what + " is proven at most the tolerance)";
    case ToleranceVerdict::exceeded: return std::string("exceeded (") + what + " is proven larger): exit 3";
    case ToleranceVerdict::undecided: break;
  }
  return std::string("undecided (the bounds straddle the tolerance; --fallback always or more --bits narrow them)");
}

}  // namespace


namespace {

constexpr const char* roles[] = {"dq", "dk", "dv", "lse"};
constexpr const char* symbols[] = {"dQ", "dK", "dV", "lse"};

/// The lse tensor has Q's shape without its last dimension (or with a last dimension of 1).
void require_lse_shape(const NamedTensor& q, const NamedTensor& lse, const std::string& role) {
  std::vector<std::size_t> want(q.tensor.shape.begin(), q.tensor.shape.end() - 1);
  std::vector<std::size_t> with_one = want;
  with_one.push_back(1);
  if (lse.tensor.shape != want && lse.tensor.shape != with_one)
    throw input_error(lse.name + " (" + role + ") has shape " + shape_text(lse.tensor.shape) + " but Q has " +
                          shape_text(q.tensor.shape) + ": the logsumexp has one entry per query row, shape " +
                          shape_text(want),
                      lse.name);
  if (lse.tensor.matrices.size() != q.tensor.matrices.size())
    throw input_error(lse.name + " (" + role + ") holds " + std::to_string(lse.tensor.matrices.size()) +
                          " rows of values for " + std::to_string(q.tensor.matrices.size()) + " heads",
                      lse.name);
}

void require_tolerance_value(const std::optional<double>& x, const char* flag) {
  if (x && !(std::isfinite(*x) && *x >= 0))
    throw input_error(std::string(flag) + " " + std::to_string(*x) + " is not a non-negative number");
}

}  // namespace

void read_kernel_tensors(KernelQuestion& q, const std::string& path, bool as_reference, const ParseLimits& limits) {
  const std::vector<SafetensorsEntry> entries = safetensors_index(read_text_file(path, limits), path);
  const auto read = [&](const std::string& name, bool lse) {
    const std::string argument = path + ":" + name;
    return NamedTensor{lse ? read_row_stack(argument, limits, NonFiniteElements::keep)
                           : read_double_tensor(argument, limits, name == "q" || name == "k" || name == "v" || name == "dout"
                                                                      ? NonFiniteElements::refuse
                                                                      : NonFiniteElements::keep),
                       argument};
  };
  std::size_t found = 0;
  for (const SafetensorsEntry& e : entries) {
    const std::string& n = e.name;
    const auto fill = [&](std::optional<NamedTensor>& slot, bool lse = false) {
      ++found;
      if (!slot) slot = read(n, lse);
    };
    if (as_reference) {
      if (n == "out") fill(q.reference);
      else if (n == "dq") fill(q.reference_dq);
      else if (n == "dk") fill(q.reference_dk);
      else if (n == "dv") fill(q.reference_dv);
      else if (n == "lse") fill(q.reference_lse, true);
      continue;
    }
    NamedTensor* point = n == "q" ? &q.q : n == "k" ? &q.k : n == "v" ? &q.v : nullptr;
    if (point) {
      ++found;
      if (point->name.empty()) *point = read(n, false);
    } else if (n == "out") fill(q.candidate);
    else if (n == "dout") fill(q.dout);
    else if (n == "dq") fill(q.dq);
    else if (n == "dk") fill(q.dk);
    else if (n == "dv") fill(q.dv);
    else if (n == "lse") fill(q.lse, true);
  }
  if (found == 0)
    throw input_error(path + ": no tensor named " +
                          (as_reference ? std::string("out, dq, dk, dv or lse") : std::string("q, k, v, out, dout, dq, dk, dv or lse")) +
                          " (the names check-kernel reads from a file)",
                      path);
}

void read_kernel_mask_argument(KernelQuestion& q, const std::string& argument, const ParseLimits& limits) {
  if (argument == "causal") {
    q.causal = true;  // analyze_kernel builds it for N_q x N_k, aligned as asked
    return;
  }
  if (argument == "none" || argument.empty()) return;
  const bool binary = argument.ends_with(".npy") || argument.find(".safetensors:") != std::string::npos;
  if (binary) {
    DoubleTensor t = read_double_tensor(argument, limits);
    if (t.shape.size() > 2) {
      q.masks = NamedTensor{std::move(t), argument};
      return;
    }
  }
  q.options.mask = read_mask_argument(argument, q.q.tensor.matrices.at(0).rows(), q.q.name + " (Q) and " + q.k.name + " (K)",
                                      limits, q.k.tensor.matrices.at(0).rows());
}

NamedTensor read_per_head_argument(const std::string& argument, const std::string& what, const ParseLimits& limits) {
  // A list when it has a comma or is one number; a file otherwise.
  std::vector<double> values;
  bool list = !argument.empty();
  for (std::size_t begin = 0, entry = 1; list && begin <= argument.size(); ++entry) {
    const std::size_t end = std::min(argument.find(',', begin), argument.size());
    const char* first = argument.data() + begin;
    const char* last = argument.data() + end;
    while (first < last && *first == ' ') ++first;
    while (last > first && last[-1] == ' ') --last;
    double x = 0;
    const auto [ptr, ec] = std::from_chars(first, last, x);
    const bool number = ec == std::errc() && ptr == last && first < last;
    if (!number && argument.find(',') != std::string::npos)
      throw input_error(what + " '" + argument + "': entry " + std::to_string(entry) + " '" + std::string(first, last) +
                        "' is not a number (a comma-separated list of numbers, or a file)");
    if (number && !std::isfinite(x))
      throw input_error(what + " '" + argument + "': entry " + std::to_string(entry) + " is not finite");
    list = number;
    values.push_back(x);
    begin = end + 1;
  }
  if (list) {
    NamedTensor t;
    t.name = what;
    t.tensor.shape = {values.size()};
    t.tensor.dtype = "text";
    t.tensor.matrices = {Eigen::Map<const Eigen::VectorXd>(values.data(), static_cast<Eigen::Index>(values.size()))};
    return t;
  }
  return NamedTensor{read_row_stack(argument, limits), argument};
}

namespace {

/// The value of each head (t = b H + h) of `q` (Q, or K for K/V heads, named `base`) from a
/// per-head tensor of shape (H,) or, with `per_batch`, (B, H), for leading shape (B, H), (H) or ().
std::vector<double> per_query_head(const NamedTensor& values, const NamedTensor& q, const std::string& what,
                                   bool per_batch, const char* base = "Q") {
  const std::vector<std::size_t> leading(q.tensor.shape.begin(), q.tensor.shape.end() - 2);
  const std::size_t heads = leading.empty() ? 1 : leading.back();
  const std::size_t batches = leading.size() == 2 ? leading[0] : 1;
  std::vector<double> flat;
  for (const Eigen::MatrixXd& m : values.tensor.matrices) flat.insert(flat.end(), m.data(), m.data() + m.size());
  // A row stack: (H,) is one H x 1 matrix, (B, H) B of them (a trailing 1 in the shape from Python).
  const std::vector<std::size_t>& shape = values.tensor.shape;
  const std::size_t stacks = values.tensor.matrices.size();
  const bool columns = std::all_of(values.tensor.matrices.begin(), values.tensor.matrices.end(),
                                   [&](const Eigen::MatrixXd& m) { return m.cols() == 1 && m.rows() == Eigen::Index(heads); });
  const bool by_head = columns && stacks == 1 && shape.size() <= 2;
  const bool by_batch_and_head = per_batch && columns && stacks == batches && shape.size() <= 3;
  if (!by_head && !by_batch_and_head)
    throw input_error(what + " (" + values.name + ") has shape " + shape_text(shape) + " but " + base + " " +
                      shape_text(q.tensor.shape) +
                      " has H = " + std::to_string(heads) +
                      (per_batch ? " and B = " + std::to_string(batches) + ": give (H,) or (B, H)" : ": give (H,)"));
  for (std::size_t i = 0; i < flat.size(); ++i)
    if (!std::isfinite(flat[i]))
      throw input_error(what + " (" + values.name + ") entry " + std::to_string(i) + " is not finite");
  std::vector<double> out;
  for (std::size_t b = 0; b < batches; ++b)
    for (std::size_t h = 0; h < heads; ++h) out.push_back(by_head ? flat[h] : flat[b * heads + h]);
  return out;
}

/// Which matrix of an (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, N_k) tensor each query head reads
/// (t = b H + h), every matrix N_q x N_k; input_error naming `what` otherwise.
std::vector<std::size_t> per_head_matrix_index(const NamedTensor& t, const NamedTensor& q, const NamedTensor& k,
                                               const std::string& what) {
  const std::vector<std::size_t> lq(q.tensor.shape.begin(), q.tensor.shape.end() - 2);
  const std::vector<std::size_t> lt(t.tensor.shape.begin(), t.tensor.shape.end() - 2);
  const std::size_t heads = lq.empty() ? 1 : lq.back(), batches = lq.size() == 2 ? lq[0] : 1;
  const bool shared = lt.empty(), by_head = lt.size() == 1 && lt[0] == heads, by_both = lt == lq && lq.size() == 2;
  if (!shared && !by_head && !by_both)
    throw input_error(what + " " + t.name + " has shape " + shape_text(t.tensor.shape) + " but Q is " +
                      shape_text(q.tensor.shape) + ": give (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, N_k)");
  for (const Eigen::MatrixXd& m : t.tensor.matrices)
    if (m.rows() != q.tensor.matrices.at(0).rows() || m.cols() != k.tensor.matrices.at(0).rows())
      throw input_error(what + " " + t.name + " is " + std::to_string(m.rows()) + " x " + std::to_string(m.cols()) +
                        " per head but Q has " + std::to_string(q.tensor.matrices.at(0).rows()) + " queries and K " +
                        std::to_string(k.tensor.matrices.at(0).rows()) + " keys");
  std::vector<std::size_t> index;
  for (std::size_t b = 0; b < batches; ++b)
    for (std::size_t h = 0; h < heads; ++h) index.push_back(shared ? 0 : by_head ? h : b * heads + h);
  return index;
}

/// One mask per query head from 0/1 matrices of shape (N_q, N_k), (H, ...) or (B, H, ...).
std::vector<Mask> per_head_masks(const NamedTensor& masks, const NamedTensor& q, const NamedTensor& k) {
  std::vector<Mask> out;
  for (std::size_t i : per_head_matrix_index(masks, q, k, "the per-head masks")) {
    std::string where = masks.name;
    for (std::size_t x : masks.tensor.leading_index(i)) {  // a char at a time: GCC 12 misreads "[" + std::string&&
      where += '[';
      where += std::to_string(x);
      where += ']';
    }
    out.push_back(Mask::from_matrix(exact_of_doubles(masks.tensor.matrices[i], where), where, true));
  }
  return out;
}

/// The additive bias of each query head, and the masks its -inf entries make (with the
/// options' own mask or masks) in options.masks.
void apply_bias(const NamedTensor& bias, const NamedTensor& q, const NamedTensor& k, KernelCheckOptions& options) {
  const std::vector<std::size_t> index = per_head_matrix_index(bias, q, k, "the bias");
  bool masked = false;
  for (const Eigen::MatrixXd& m : bias.tensor.matrices) {
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < m.rows(); ++i) {
        const double x = m(i, j);
        if (std::isnan(x) || x == INFINITY)
          throw input_error("the bias " + bias.name + " has " + shortest_text(x) + " at row " + std::to_string(i) +
                            ", column " + std::to_string(j) + " (0-based): only -inf (a masked key) is allowed "
                            "besides finite values");
        masked = masked || x == -INFINITY;
      }
  }
  std::vector<Mask> masks;  // each head's mask with the bias's -inf entries taken out
  for (std::size_t t = 0; t < index.size(); ++t) {
    const Eigen::MatrixXd& m = bias.tensor.matrices[index[t]];
    options.biases.push_back((m.array() == -INFINITY).select(0.0, m));
    if (!masked) continue;
    masks.push_back(Mask::from_pattern(
        m.rows(), m.cols(), [&](Eigen::Index r, Eigen::Index c) { return m(r, c) != -INFINITY; }, mask_of(options, t),
        "the bias " + bias.name + " (its -inf entries) with the mask, head " + std::to_string(t)));
  }
  if (masked) {
    options.masks = std::move(masks);
    options.mask.reset();
  }
}

/// One-byte unsigned codes: .npy "|u1", NumPy "uint8", safetensors "U8".
bool holds_byte_codes(const NamedTensor& t) {
  return t.tensor.dtype == "|u1" || t.tensor.dtype == "uint8" || t.tensor.dtype == "U8";
}

/// The tensor's matrices with uint8 codes read as FP8 values of `format`.
std::vector<Eigen::MatrixXd> fp8_decoded(const NamedTensor& t, const std::string& format) {
  const ElementType type = fp8_element_type(format);
  std::vector<Eigen::MatrixXd> out = t.tensor.matrices;
  for (Eigen::MatrixXd& m : out)
    for (double& x : m.reshaped()) {
      if (!(x >= 0 && x <= 255 && x == std::floor(x)))
        throw input_error(t.name + " holds " + shortest_text(x) + ", not a one-byte FP8 code (0..255)");
      x = fp8_value(static_cast<unsigned>(x), type.kind);
      if (!std::isfinite(x))
        throw input_error(t.name + " holds an FP8 code that is NaN or infinite in " + format);
    }
  return out;
}

/// Matrix t times factor[t], exactly, or input_error naming `what`.
void descale(std::vector<Eigen::MatrixXd>& matrices, const std::vector<double>& factor, const std::string& what) {
  for (std::size_t t = 0; t < matrices.size(); ++t) {
    const double f = factor[t];
    if (!(f > 0)) throw input_error(what + " " + shortest_text(f) + " is not a positive number");
    for (double& x : matrices[t].reshaped()) {
      const double p = x * f;
      if (!std::isfinite(p) || std::fma(x, f, -p) != 0)
        throw input_error(what + " " + shortest_text(f) + " times " + shortest_text(x) +
                          " is not exactly a double (give float32 descales with FP8 or bfloat16 inputs)");
      x = p;
    }
  }
}

}  // namespace

KernelAnalysis analyze_kernel(const KernelQuestion& q) {
  for (const NamedTensor* t : {&q.q, &q.k, &q.v})
    if (t->tensor.matrices.empty())
      throw input_error(std::string("check-kernel needs ") + (t == &q.q ? "Q" : t == &q.k ? "K" : "V") +
                        " (--q, --k, --v, or a tensor named q, k, v in --from)");
  KernelCheckOptions options = q.options;
  options.kv_heads = kv_heads_from_shapes(q.q, q.k);
  // Q, K, V as checked: FP8 codes decoded, descale factors applied (copies only then). A
  // descale factor belongs to a K/V head (B, H_kv); query head t reads its K/V head's.
  std::vector<Eigen::MatrixXd> qd, kd, vd;
  const std::vector<Eigen::MatrixXd>*qs = &q.q.tensor.matrices, *ks = &q.k.tensor.matrices, *vs = &q.v.tensor.matrices;
  if (!q.fp8_format.empty() && !holds_byte_codes(q.q) && !holds_byte_codes(q.k) && !holds_byte_codes(q.v)) {
    (void)fp8_element_type(q.fp8_format);  // a bad name first
    throw input_error("FP8 format " + q.fp8_format + " given, but Q, K and V are " + q.q.tensor.dtype + ", " +
                      q.k.tensor.dtype + ", " + q.v.tensor.dtype + ", not uint8 codes (safetensors F8_E4M3 / F8_E5M2 "
                      "tensors need no format)");
  }
  const auto transformed = [&](const NamedTensor& t, std::vector<Eigen::MatrixXd>& into,
                               const std::optional<NamedTensor>& factors, const char* what, bool query) {
    const bool codes = !q.fp8_format.empty() && holds_byte_codes(t);
    if (!codes && !factors) return false;
    into = codes ? fp8_decoded(t, q.fp8_format) : t.tensor.matrices;
    if (factors) {
      const std::vector<double> per_kv = per_query_head(*factors, q.k, what, true, "K");
      std::vector<double> f(into.size());
      for (std::size_t i = 0; i < f.size(); ++i) f[i] = per_kv[query ? kv_head_of(options, i) : i];
      descale(into, f, what);
    }
    return true;
  };
  if (transformed(q.q, qd, q.q_descale, "q_descale", true)) qs = &qd;
  if (transformed(q.k, kd, q.k_descale, "k_descale", false)) ks = &kd;
  if (transformed(q.v, vd, q.v_descale, "v_descale", false)) vs = &vd;
  options.alignment = q.alignment;
  if (q.alibi_slopes) options.alibi_slopes = per_query_head(*q.alibi_slopes, q.q, "the ALiBi slopes", true);
  if (q.sinks) options.sinks = per_query_head(*q.sinks, q.q, "the sinks", false);
  require_same_heads(q.k, q.v, "V", "K");
  const std::optional<NamedTensor>* candidates[] = {&q.dq, &q.dk, &q.dv, &q.lse};
  const std::optional<NamedTensor>* references[] = {&q.reference_dq, &q.reference_dk, &q.reference_dv,
                                                    &q.reference_lse};
  bool backward = false;
  for (std::size_t r = 0; r < 4; ++r) {
    for (const auto* t : {candidates[r], references[r]}) {
      if (!*t) continue;
      const std::string role = (t == references[r] ? std::string("the reference ") : std::string("the candidate ")) + roles[r];
      if (r == 3) require_lse_shape(q.q, **t, role);
      else if (r == 0) require_same_heads(q.q, **t, role);
      else require_same_heads(q.k, **t, role, "K");  // dK and dV: one per K/V head
    }
    if (*references[r] && !*candidates[r])
      throw input_error(std::string("a reference ") + roles[r] + " needs the candidate's " + roles[r] +
                        " (--" + roles[r] + "): the reference's error is what the candidate's is compared with");
    backward = backward || *candidates[r];
  }
  if (!q.candidate && !backward)
    throw input_error("nothing to check: give the kernel's output (--candidate) or its backward results "
                      "(--dq, --dk, --dv, --lse)");
  if (q.reference && !q.candidate)
    throw input_error("--reference needs --candidate (the reference's error is what the candidate's is compared with)");
  if (q.candidate) require_same_heads(q.q, *q.candidate, "the candidate");
  if (q.reference) require_same_heads(q.q, *q.reference, "the reference");
  const bool gradients = q.dq || q.dk || q.dv;
  if (gradients && !q.dout)
    throw input_error("--dq, --dk and --dv need --dout (the upstream gradient the backward pass was run with)");
  if (q.dout) require_same_heads(q.q, *q.dout, "dout");
  if (q.max_error && !(std::isfinite(*q.max_error) && *q.max_error >= 0))
    throw input_error("--max-error '" + q.max_error_text + "' is not a non-negative number");
  require_tolerance_value(q.rtol, "--rtol");
  if (q.rtol && !q.max_error) throw input_error("--rtol needs --max-error (the tolerance is max_error + rtol max |exact|)");
  require_tolerance_value(q.max_ratio, "--max-ratio");
  require_tolerance_value(q.ratio_atol, "--ratio-atol");
  if (q.ratio_atol && !q.max_ratio)
    throw input_error("--ratio-atol needs --max-ratio (the rule is candidate error <= max_ratio x reference error + "
                      "ratio_atol)");
  bool any_reference = q.reference.has_value();
  for (const auto* t : references) any_reference = any_reference || t->has_value();
  if (q.max_ratio && !any_reference)
    throw input_error("--max-ratio needs a reference (--reference, --reference-dq, ...): it bounds the candidate's "
                      "error by a multiple of the reference's");
  const Eigen::Index n = q.q.tensor.matrices.at(0).rows(), keys = q.k.tensor.matrices.at(0).rows();
  std::string window_name;
  if (q.causal || q.window) {
    if (q.options.mask)
      throw input_error("give a mask file or causal / window_size, not both (a file is the whole pattern)");
    long left = q.window ? q.window->first : -1, right = q.window ? q.window->second : -1;
    if (q.causal) right = 0;  // FlashAttention: causal is window_size (left, 0)
    const Mask mask = Mask::window(n, keys, left, right, q.alignment);
    if (!mask.is_full()) options.mask = mask;
    window_name = left < 0 && right == 0 ? "causal"
                                         : "window(" + std::to_string(left) + ", " + std::to_string(right) + ")";
    if (n != keys) window_name += q.alignment == MaskAlignment::bottom_right ? " bottom-right" : " top-left";
    if (mask.is_full()) window_name = "none";
  }
  if (options.mask) options.mask->require_shape(n, keys, q.q.name + " (Q) and " + q.k.name + " (K)");
  if (q.masks) {
    if (options.mask || q.causal || q.window)
      throw input_error("give per-head masks or one mask (causal, window_size, a file), not both");
    options.masks = per_head_masks(*q.masks, q.q, q.k);
  }
  std::string mask_name = q.masks ? "per-head" : !window_name.empty() ? window_name
                                               : options.mask        ? options.mask->name()
                                                                     : "none";
  if (q.dropout_mask) {
    for (std::size_t i : per_head_matrix_index(*q.dropout_mask, q.q, q.k, "the dropout mask"))
      options.dropout_keep.push_back(q.dropout_mask->tensor.matrices[i]);
    options.dropout_p = q.dropout_p;
  } else if (q.dropout_p != 0) {
    throw input_error("dropout_p " + shortest_text(q.dropout_p) + " needs the kernel's dropout mask (which entries it "
                      "kept: FlashAttention returns it with return_attn_probs)");
  }
  if (q.bias) {
    apply_bias(*q.bias, q.q, q.k, options);
    if (!q.masks && !options.masks.empty())
      mask_name = mask_name == "none" ? "the bias's -inf entries" : mask_name + " and the bias's -inf entries";
  }
  KernelAnalysis out;
  const double ratio_atol = q.ratio_atol.value_or(0);
  const auto judge = [&](const std::string& role, const OutputError& c, const std::optional<OutputError>& r,
                         std::optional<ToleranceVerdict>& error_verdict, std::optional<ToleranceVerdict>& ratio_verdict) {
    if (q.max_error) error_verdict = judge_error(c, {*q.max_error, q.rtol.value_or(0)});
    if (q.max_ratio && r) ratio_verdict = judge_ratio(c, *r, *q.max_ratio, ratio_atol);
    if (error_verdict == ToleranceVerdict::exceeded) out.max_error_exceeded = true;
    if (error_verdict == ToleranceVerdict::exceeded || ratio_verdict == ToleranceVerdict::exceeded)
      out.exceeded.push_back(role);
  };
  try {
    if (q.candidate) {
      out.result = check_kernel(*qs, *ks, *vs,
                                q.candidate->tensor.matrices, q.reference ? &q.reference->tensor.matrices : nullptr,
                                options);
      out.candidate_name = q.candidate->name;
      out.candidate_dtype = q.candidate->tensor.dtype;
      judge("out", out.result->candidate, out.result->reference, out.error_verdict, out.ratio_verdict);
    }
    if (backward) {
      KernelGradients c, r;
      std::vector<Eigen::MatrixXd>* c_lists[] = {&c.dq, &c.dk, &c.dv, &c.lse};
      std::vector<Eigen::MatrixXd>* r_lists[] = {&r.dq, &r.dk, &r.dv, &r.lse};
      for (std::size_t i = 0; i < 4; ++i) {
        if (*candidates[i]) *c_lists[i] = (*candidates[i])->tensor.matrices;
        if (*references[i]) *r_lists[i] = (*references[i])->tensor.matrices;
      }
      static const std::vector<Eigen::MatrixXd> none;
      out.backward = check_kernel_gradients(*qs, *ks, *vs,
                                            q.dout ? q.dout->tensor.matrices : none, c, &r, options);
      const std::optional<TensorCheck>* checks[] = {&out.backward->dq, &out.backward->dk, &out.backward->dv,
                                                    &out.backward->lse};
      for (std::size_t i = 0; i < 4; ++i) {
        if (!*checks[i]) continue;
        GradientReport g;
        g.role = roles[i];
        g.check = **checks[i];
        g.candidate_name = (*candidates[i])->name;
        g.candidate_dtype = (*candidates[i])->tensor.dtype;
        if (*references[i]) {
          g.reference_name = (*references[i])->name;
          g.reference_dtype = (*references[i])->tensor.dtype;
        }
        judge(g.role, g.check.candidate, g.check.reference, g.error_verdict, g.ratio_verdict);
        out.gradients.push_back(std::move(g));
      }
    }
  } catch (const input_error& e) {
    throw input_error(std::string("check-kernel: ") + e.what(), e.subject());
  }
  out.q_shape = q.q.tensor.shape;
  out.k_shape = q.k.tensor.shape;
  out.v_shape = q.v.tensor.shape;
  out.q_dtype = q.q.tensor.dtype;
  out.heads = q.q.tensor.matrices.size();
  out.layout.shape = q.q.tensor.shape;
  out.kv_layout.shape = q.k.tensor.shape;
  if (q.reference) {
    out.reference_name = q.reference->name;
    out.reference_dtype = q.reference->tensor.dtype;
  }
  if (q.dout) {
    out.dout_name = q.dout->name;
    out.dout_dtype = q.dout->tensor.dtype;
  }
  out.scale_text = q.options.scale ? format_significant(Rational(*q.options.scale), 17)
                                   : "1/sqrt(" + std::to_string(q.q.tensor.matrices[0].cols()) + ")";
  out.mask_name = mask_name;
  if (q.bias) out.bias_name = q.bias->name;
  out.fp8_format = q.fp8_format;
  if (q.dropout_mask) out.dropout_p = q.dropout_p;
  for (const auto& [f, name] : {std::pair{&q.q_descale, "q"}, std::pair{&q.k_descale, "k"}, std::pair{&q.v_descale, "v"}})
    if (*f) out.descaled.push_back(name);
  out.softcap = options.softcap;
  out.alibi_slopes = options.alibi_slopes;
  out.sinks = options.sinks;
  if (!options.alibi_slopes.empty())
    out.alibi_alignment = options.alignment == MaskAlignment::bottom_right ? "bottom-right" : "top-left";
  out.max_error = q.max_error;
  out.max_error_text = q.max_error_text;
  out.rtol = q.rtol;
  out.max_ratio = q.max_ratio;
  if (q.max_ratio) out.ratio_atol = ratio_atol;
  guard_result(out);
  return out;
}

namespace {

/// The tolerance verdicts of one tensor, as JSON keys of its object.
void verdicts_json(json& j, const KernelAnalysis& k, const std::optional<ToleranceVerdict>& error_verdict,
                   const std::optional<ToleranceVerdict>& ratio_verdict) {
  if (error_verdict) j["max_error_verdict"] = to_string(*error_verdict);
  if (ratio_verdict) j["max_ratio_verdict"] = to_string(*ratio_verdict);
  (void)k;
}

/// The layout whose leading indices name a result's worst entry: K's for dK and dV (one per K/V head), Q's otherwise.
const DoubleTensor& layout_of(const KernelAnalysis& k, const std::string& role) {
  return role == "dk" || role == "dv" ? k.kv_layout : k.layout;
}

json gradient_json(const KernelAnalysis& k, const GradientReport& g) {
  const DoubleTensor& layout = layout_of(k, g.role);
  json j = {{"candidate", error_json(layout, g.check.candidate, g.candidate_name, g.candidate_dtype)}};
  if (g.check.reference) {
    j["reference"] = error_json(layout, *g.check.reference, g.reference_name, g.reference_dtype);
    j["ratio_lower"] = lower_text(g.check.ratio_lower);
    j["ratio_upper"] = upper_text(g.check.ratio_upper);
  }
  verdicts_json(j, k, g.error_verdict, g.ratio_verdict);
  return j;
}

}  // namespace

json to_json(const KernelAnalysis& k) {
  json j = {{"shape", k.q_shape}, {"heads", k.heads}, {"mask", k.mask_name}, {"scale", k.scale_text}};
  if (k.softcap > 0) j["softcap"] = shortest_text(k.softcap);
  if (!k.alibi_slopes.empty()) {
    j["alibi_slopes"] = k.alibi_slopes;
    j["alibi_alignment"] = k.alibi_alignment;
  }
  if (!k.sinks.empty()) j["sinks"] = k.sinks;
  if (!k.bias_name.empty()) j["bias"] = k.bias_name;
  if (!k.fp8_format.empty()) j["fp8_format"] = k.fp8_format;
  if (k.dropout_p) j["dropout_p"] = shortest_text(*k.dropout_p);
  if (!k.descaled.empty()) j["descaled"] = k.descaled;
  if (k.result) {
    const KernelCheck& r = *k.result;
    j["method"] = r.method;
    j["products"] = r.products.empty() ? json(nullptr) : json(r.products);
    j["bits"] = r.bits;
    j["enclosure_width"] = upper_text(r.enclosure_width);
    j["candidate"] = error_json(k.layout, r.candidate, k.candidate_name, k.candidate_dtype);
    if (r.reference) {
      j["reference"] = error_json(k.layout, *r.reference, k.reference_name, k.reference_dtype);
      j["ratio_lower"] = lower_text(r.ratio_lower);
      j["ratio_upper"] = upper_text(r.ratio_upper);
    }
    if (!r.fallback_skipped.empty()) j["fallback_skipped"] = r.fallback_skipped;
  }
  if (k.backward) {
    const GradientCheck& b = *k.backward;
    json meta = {{"method", b.method},
                 {"products", b.products.empty() ? json(nullptr) : json(b.products)},
                 {"bits", b.bits},
                 {"enclosure_width", upper_text(b.enclosure_width)}};
    if (!k.dout_name.empty()) meta["dout"] = {{"file", k.dout_name}, {"dtype", k.dout_dtype}};
    if (!b.fallback_skipped.empty()) meta["fallback_skipped"] = b.fallback_skipped;
    j["backward"] = meta;
    for (const GradientReport& g : k.gradients) j[g.role] = gradient_json(k, g);
  }
  if (k.max_error) {
    j["max_error"] = k.max_error_text;
    j["max_error_exceeded"] = k.max_error_exceeded;
    if (k.error_verdict) j["max_error_verdict"] = to_string(*k.error_verdict);
    if (k.rtol) j["rtol"] = shortest_text(*k.rtol);
  }
  if (k.max_ratio) {
    j["max_ratio"] = shortest_text(*k.max_ratio);
    j["ratio_atol"] = shortest_text(k.ratio_atol.value_or(0));
    if (k.ratio_verdict) j["max_ratio_verdict"] = to_string(*k.ratio_verdict);
  }
  if (k.max_error || k.max_ratio) j["exceeded"] = k.exceeded;
  return json_document(j, "check-kernel");
}

namespace {

void tolerances_text(std::ostringstream& s, const KernelAnalysis& k, const std::string& label,
                     const std::optional<ToleranceVerdict>& error_verdict,
                     const std::optional<ToleranceVerdict>& ratio_verdict, const std::optional<OutputError>& reference) {
  if (error_verdict) {
    s << label << "--max-error " << k.max_error_text;
    if (k.rtol) s << " --rtol " << shortest_text(*k.rtol) << " (max_error + rtol max |exact|)";
    s << ": " << tolerance_text(*error_verdict, "the error") << "\n";
  }
  if (k.max_ratio && reference) {
    s << label << "--max-ratio " << shortest_text(*k.max_ratio);
    if (k.ratio_atol && *k.ratio_atol > 0) s << " --ratio-atol " << shortest_text(*k.ratio_atol);
    s << ": ";
    if (reference->nonfinite > 0) s << "not judged: the reference has NaN or infinite entries\n";
    else if (ratio_verdict) s << tolerance_text(*ratio_verdict, "the candidate's error against the rule") << "\n";
  }
}

std::string method_text(const std::string& method, const std::string& products, unsigned bits) {
  return method != "double"          ? "MPFI at " + std::to_string(bits) + " bits (the double enclosures were too wide)"
         : products == "directed" ? std::string("the certified double tier (directed rounding)")
                                  : std::string("the certified double tier (a priori bounded products)");
}

}  // namespace

std::string to_text(const KernelAnalysis& k) {
  std::ostringstream s;
  s << "Attention: " << k.heads << (k.heads == 1 ? " head" : " heads") << ", Q " << shape_text(k.q_shape) << " "
    << k.q_dtype << ", K " << shape_text(k.k_shape) << ", V " << shape_text(k.v_shape) << "; scale " << k.scale_text
    << "; mask " << k.mask_name;
  if (k.softcap > 0) s << "; softcap " << shortest_text(k.softcap);
  if (!k.alibi_slopes.empty()) s << "; ALiBi (" << k.alibi_alignment << ")";
  if (!k.sinks.empty()) s << "; sinks";
  if (!k.bias_name.empty()) s << "; bias " << k.bias_name;
  if (!k.fp8_format.empty()) s << "; FP8 codes read as " << k.fp8_format;
  if (k.dropout_p) s << "; dropout p = " << shortest_text(*k.dropout_p) << " with its keep-mask";
  for (const std::string& d : k.descaled) s << "; " << d << "_descale";
  s << "\n";
  if (k.result) {
    const KernelCheck& r = *k.result;
    s << "Exact output enclosed by " << method_text(r.method, r.products, r.bits) << ", widths <= "
      << upper_text(r.enclosure_width) << "\n\n";
    s << error_text(k.layout, r.candidate, "candidate", k.candidate_name, k.candidate_dtype);
    if (r.reference) {
      s << error_text(k.layout, *r.reference, "reference", k.reference_name, k.reference_dtype);
      s << "\ncandidate error / reference error in [" << lower_text(r.ratio_lower) << ", " << upper_text(r.ratio_upper)
        << "]" << (r.reference->nonfinite > 0 ? " (the reference is not finite: its error is infinite)" : "") << "\n";
    }
    if (!r.fallback_skipped.empty()) s << "\nNote: " << r.fallback_skipped << "\n";
  }
  if (k.backward) {
    const GradientCheck& b = *k.backward;
    s << (k.result ? "\n" : "") << "Exact backward pass"
      << (k.dout_name.empty() ? std::string() : " (dout " + k.dout_name + ", " + k.dout_dtype + ")")
      << " enclosed by " << method_text(b.method, b.products, b.bits) << ", widths <= " << upper_text(b.enclosure_width)
      << "\n";
    for (const GradientReport& g : k.gradients) {
      const std::size_t i = static_cast<std::size_t>(std::find(std::begin(roles), std::end(roles), g.role) - std::begin(roles));
      const DoubleTensor& layout = layout_of(k, g.role);
      s << "\n" << error_text(layout, g.check.candidate, g.role + " candidate", g.candidate_name, g.candidate_dtype, symbols[i]);
      if (g.check.reference) {
        s << error_text(layout, *g.check.reference, g.role + " reference", g.reference_name, g.reference_dtype,
                        symbols[i]);
        s << g.role << ": candidate error / reference error in [" << lower_text(g.check.ratio_lower) << ", "
          << upper_text(g.check.ratio_upper) << "]\n";
      }
    }
    if (!b.fallback_skipped.empty()) s << "\nNote: " << b.fallback_skipped << "\n";
  }
  if (k.max_error || k.max_ratio) {
    s << "\n";
    if (k.result) tolerances_text(s, k, "", k.error_verdict, k.ratio_verdict, k.result->reference);
    for (const GradientReport& g : k.gradients)
      tolerances_text(s, k, g.role + ": ", g.error_verdict, g.ratio_verdict, g.check.reference);
  }
  return s.str();
}

}  // namespace attnrank
