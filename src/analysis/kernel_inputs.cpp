// A kernel question as the checks read it (attnrank/analysis/detail/kernel_inputs.hpp):
// the dense question's validation; packed sequences are in kernel_varlen.cpp.
#include <attnrank/analysis/detail/kernel_inputs.hpp>

#include <attnrank/io/binary_array.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

namespace attnrank::detail {
namespace {


/// Every tensor has Q's leading dimensions (one matrix per head).
void require_same_heads(const NamedTensor& q, const NamedTensor& other, const std::string& role,
                        const char* base = "Q") {
  const auto leading = [](const DoubleTensor& t) { return std::vector<std::size_t>(t.shape.begin(), t.shape.end() - 2); };
  if (leading(q.tensor) != leading(other.tensor))
    throw input_error(other.name + " (" + role + ") has shape " + attnrank::shape_text(other.tensor.shape) + " but " + base +
                      " has " + attnrank::shape_text(q.tensor.shape) +
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
    throw input_error(k.name + " (K) has shape " + attnrank::shape_text(k.tensor.shape) + " but Q has " +
                      attnrank::shape_text(q.tensor.shape) + ": the batch dimensions must agree, and K and V may have fewer " +
                      "heads than Q only when their number divides Q's (grouped-query attention)");
  return grouped_kv_heads(lq.size() == 2 ? lq[0] : 1, lq.back(), lk.back());
}

/// The lse tensor has Q's shape without its last dimension (or with a last dimension of 1).
void require_lse_shape(const NamedTensor& q, const NamedTensor& lse, const std::string& role) {
  std::vector<std::size_t> want(q.tensor.shape.begin(), q.tensor.shape.end() - 1);
  std::vector<std::size_t> with_one = want;
  with_one.push_back(1);
  if (lse.tensor.shape != want && lse.tensor.shape != with_one)
    throw input_error(lse.name + " (" + role + ") has shape " + attnrank::shape_text(lse.tensor.shape) + " but Q has " +
                          attnrank::shape_text(q.tensor.shape) + ": the logsumexp has one entry per query row, shape " +
                          attnrank::shape_text(want),
                      lse.name);
  if (lse.tensor.matrices.size() != q.tensor.matrices.size())
    throw input_error(lse.name + " (" + role + ") holds " + std::to_string(lse.tensor.matrices.size()) +
                          " rows of values for " + std::to_string(q.tensor.matrices.size()) + " heads",
                      lse.name);
}

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
    throw input_error(what + " (" + values.name + ") has shape " + attnrank::shape_text(shape) + " but " + base + " " +
                      attnrank::shape_text(q.tensor.shape) +
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
    throw input_error(what + " " + t.name + " has shape " + attnrank::shape_text(t.tensor.shape) + " but Q is " +
                      attnrank::shape_text(q.tensor.shape) + ": give (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, N_k)");
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
std::vector<Mask> per_head_masks(const NamedTensor& masks, const NamedTensor& q, const NamedTensor& k,
                                 EmptyRows empty_rows) {
  std::vector<Mask> out;
  for (std::size_t i : per_head_matrix_index(masks, q, k, "the per-head masks")) {
    std::string where = masks.name;
    for (std::size_t x : masks.tensor.leading_index(i)) {  // a char at a time: GCC 12 misreads "[" + std::string&&
      where += '[';
      where += std::to_string(x);
      where += ']';
    }
    out.push_back(Mask::from_matrix(exact_of_doubles(masks.tensor.matrices[i], where), where, true, empty_rows));
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
          throw input_error("the bias " + entry_text(bias.name, static_cast<long>(i), static_cast<long>(j)) + " is " +
                            shortest_decimal(x) + ": only -inf (a masked key) is allowed "
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
        "the bias " + bias.name + " (its -inf entries) with the mask, head " + std::to_string(t), options.empty_rows));
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
  std::array<double, 256> value;  // every code's value, once (fp8_value per entry costs ~20 ns)
  for (unsigned code = 0; code < 256; ++code) value[code] = fp8_value(code, type.kind);
  std::vector<Eigen::MatrixXd> out = t.tensor.matrices;
  for (Eigen::MatrixXd& m : out)
    for (double& x : m.reshaped()) {
      if (!(x >= 0 && x <= 255 && x == std::floor(x)))
        throw input_error(t.name + " holds " + shortest_decimal(x) + ", not a one-byte FP8 code (0..255)");
      x = value[static_cast<unsigned>(x)];
      if (!std::isfinite(x))
        throw input_error(t.name + " holds an FP8 code that is NaN or infinite in " + format);
    }
  return out;
}

/// Matrix t times factor[t], exactly, or input_error naming `what`.
void descale(std::vector<Eigen::MatrixXd>& matrices, const std::vector<double>& factor, const std::string& what) {
  for (std::size_t t = 0; t < matrices.size(); ++t) {
    const double f = factor[t];
    if (!(f > 0)) throw input_error(what + " " + shortest_decimal(f) + " is not a positive number");
    for (double& x : matrices[t].reshaped()) {
      const double p = x * f;
      if (!std::isfinite(p) || std::fma(x, f, -p) != 0)
        throw input_error(what + " " + shortest_decimal(f) + " times " + shortest_decimal(x) +
                          " is not exactly a double (give float32 descales with FP8 or bfloat16 inputs)");
      x = p;
    }
  }
}

}  // namespace

void add_sink_gradients(const KernelQuestion& q, std::size_t heads, KernelInputs& in) {
  if (!q.dsinks && !q.reference_dsinks) return;
  if (!q.sinks) throw input_error("dsinks needs the sinks (the gradient of each head's sink logit)", "dsinks");
  for (const auto& [t, role, slot] : {std::tuple{&q.dsinks, "the candidate dsinks", &in.gradients[4]},
                                      std::tuple{&q.reference_dsinks, "the reference dsinks", &in.reference_gradients[4]}}) {
    if (!*t) continue;
    const DoubleTensor& d = (*t)->tensor;
    std::vector<double> flat;
    for (const Eigen::MatrixXd& m : d.matrices) flat.insert(flat.end(), m.data(), m.data() + m.size());
    const bool vector = d.shape.size() == 1 || (d.shape.size() == 2 && (d.shape[0] == 1 || d.shape[1] == 1));
    if (!vector || flat.size() != heads)
      throw input_error((*t)->name + " (" + role + ") holds " + std::to_string(flat.size()) + " values (shape " +
                            attnrank::shape_text(d.shape) + ") but Q " +
                            attnrank::shape_text(q.q.tensor.shape) + " has H = " + std::to_string(heads) +
                            ": give (H,), one gradient per head's sink (summed over batches and sequences)",
                        "dsinks");
    *slot = HeadList::own({Eigen::Map<const Eigen::VectorXd>(flat.data(), static_cast<Eigen::Index>(flat.size()))});
  }
  in.backward = in.backward || q.dsinks;
  in.options.sink_params.resize(in.options.sinks.size());
  for (std::size_t t = 0; t < in.options.sink_params.size(); ++t) in.options.sink_params[t] = t % heads;
}

std::string window_mask_name(long left, long right) {
  return left < 0 && right == 0 ? "causal" : "window(" + std::to_string(left) + ", " + std::to_string(right) + ")";
}

KernelInputs dense_kernel_inputs(const KernelQuestion& q) {
  KernelInputs in;
  KernelCheckOptions& options = in.options;
  options = q.options;
  options.kv_heads = kv_heads_from_shapes(q.q, q.k);
  in.q = HeadList::borrow(q.q.tensor.matrices);
  in.k = HeadList::borrow(q.k.tensor.matrices);
  in.v = HeadList::borrow(q.v.tensor.matrices);
  // Q, K, V as checked: FP8 codes decoded, descale factors applied (copies only then). A
  // descale factor belongs to a K/V head (B, H_kv); query head t reads its K/V head's.
  if (!q.fp8_format.empty() && !holds_byte_codes(q.q) && !holds_byte_codes(q.k) && !holds_byte_codes(q.v)) {
    (void)fp8_element_type(q.fp8_format);  // a bad name first
    throw input_error("FP8 format " + q.fp8_format + " given, but Q, K and V are " + q.q.tensor.dtype + ", " +
                      q.k.tensor.dtype + ", " + q.v.tensor.dtype + ", not uint8 codes (safetensors F8_E4M3 / F8_E5M2 "
                      "tensors need no format)");
  }
  const auto transformed = [&](const NamedTensor& t, HeadList& into, const std::optional<NamedTensor>& factors,
                               const char* what, bool query) {
    const bool codes = !q.fp8_format.empty() && holds_byte_codes(t);
    if (!codes && !factors) return;
    std::vector<Eigen::MatrixXd> m = codes ? fp8_decoded(t, q.fp8_format) : t.tensor.matrices;
    if (factors) {
      const std::vector<double> per_kv = per_query_head(*factors, q.k, what, true, "K");
      std::vector<double> f(m.size());
      for (std::size_t i = 0; i < f.size(); ++i) f[i] = per_kv[query ? kv_head_of(options, i) : i];
      descale(m, f, what);
    }
    into = HeadList::own(std::move(m));
  };
  transformed(q.q, in.q, q.q_descale, "q_descale", true);
  transformed(q.k, in.k, q.k_descale, "k_descale", false);
  transformed(q.v, in.v, q.v_descale, "v_descale", false);
  options.alignment = q.alignment;
  if (q.alibi_slopes) options.alibi_slopes = per_query_head(*q.alibi_slopes, q.q, "the ALiBi slopes", true);
  if (q.sinks) options.sinks = per_query_head(*q.sinks, q.q, "the sinks", false);
  require_same_heads(q.k, q.v, "V", "K");
  {
    const std::vector<std::size_t> leading(q.q.tensor.shape.begin(), q.q.tensor.shape.end() - 2);
    add_sink_gradients(q, leading.empty() ? 1 : leading.back(), in);
  }
  const std::optional<NamedTensor>* candidates[] = {&q.dq, &q.dk, &q.dv, &q.lse};
  const std::optional<NamedTensor>* references[] = {&q.reference_dq, &q.reference_dk, &q.reference_dv,
                                                    &q.reference_lse};
  for (std::size_t r = 0; r < 4; ++r) {
    for (const auto* t : {candidates[r], references[r]}) {
      if (!*t) continue;
      const std::string role = (t == references[r] ? std::string("the reference ") : std::string("the candidate ")) + kernel_roles[r];
      if (r == 3) require_lse_shape(q.q, **t, role);
      else if (r == 0) require_same_heads(q.q, **t, role);
      else require_same_heads(q.k, **t, role, "K");  // dK and dV: one per K/V head
    }
    if (*candidates[r]) in.gradients[r] = HeadList::borrow((*candidates[r])->tensor.matrices);
    if (*references[r]) in.reference_gradients[r] = HeadList::borrow((*references[r])->tensor.matrices);
    in.backward = in.backward || *candidates[r];
  }
  if (q.candidate) {
    require_same_heads(q.q, *q.candidate, "the candidate");
    in.candidate = HeadList::borrow(q.candidate->tensor.matrices);
  }
  if (q.reference) {
    require_same_heads(q.q, *q.reference, "the reference");
    in.reference = HeadList::borrow(q.reference->tensor.matrices);
  }
  if (q.dout) {
    require_same_heads(q.q, *q.dout, "dout");
    in.dout = HeadList::borrow(q.dout->tensor.matrices);
  }
  const Eigen::Index n = q.q.tensor.matrices.at(0).rows(), keys = q.k.tensor.matrices.at(0).rows();
  std::string window_name;
  if (q.causal || q.window) {
    if (q.options.mask)
      throw input_error("give a mask file or causal / window_size, not both (a file is the whole pattern)");
    long left = q.window ? q.window->first : -1, right = q.window ? q.window->second : -1;
    if (q.causal) right = 0;  // FlashAttention: causal is window_size (left, 0)
    const Mask mask = Mask::window(n, keys, left, right, q.alignment, q.options.empty_rows);
    if (!mask.is_full()) options.mask = mask;
    window_name = window_mask_name(left, right);
    if (n != keys) window_name += q.alignment == MaskAlignment::bottom_right ? " bottom-right" : " top-left";
    if (mask.is_full()) window_name = "none";
  }
  if (options.mask) options.mask->require_shape(n, keys, q.q.name + " (Q) and " + q.k.name + " (K)");
  if (q.masks) {
    if (options.mask || q.causal || q.window)
      throw input_error("give per-head masks or one mask (causal, window_size, a file), not both");
    options.masks = per_head_masks(*q.masks, q.q, q.k, q.options.empty_rows);
  }
  std::string mask_name = q.masks ? "per-head" : !window_name.empty() ? window_name
                                               : options.mask        ? options.mask->name()
                                                                     : "none";
  if (q.dropout_mask) {
    for (std::size_t i : per_head_matrix_index(*q.dropout_mask, q.q, q.k, "the dropout mask"))
      options.dropout_keep.push_back(q.dropout_mask->tensor.matrices[i]);
    options.dropout_p = q.dropout_p;
  } else if (q.dropout_p != 0) {
    throw input_error("dropout_p " + shortest_decimal(q.dropout_p) + " needs the kernel's dropout mask (which entries it "
                      "kept: FlashAttention returns it with return_attn_probs)");
  }
  if (q.bias) {
    apply_bias(*q.bias, q.q, q.k, options);
    if (!q.masks && !options.masks.empty())
      mask_name = mask_name == "none" ? "the bias's -inf entries" : mask_name + " and the bias's -inf entries";
  }
  in.mask_name = mask_name;
  return in;
}

}  // namespace attnrank::detail
