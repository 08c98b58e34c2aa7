// Packed sequences (FlashAttention's varlen) as the checks read them
// (attnrank/analysis/detail/kernel_inputs.hpp): each sequence cut out of the packed
// tensors as a dense question of shape (H, N_b, d), prepared and validated as one, and
// the sequences' heads joined into one list (head t = b H + h).
#include <attnrank/analysis/detail/kernel_inputs.hpp>

#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace attnrank::detail {
namespace {

/// Rows first .. first + n - 1 of a packed (total, H, d) tensor as an (H, n, d) one; with
/// `movable` (the same tensor, given up) and every row of a tensor read head by head, its
/// matrices are taken, not copied.
NamedTensor sequence_rows(const NamedTensor& packed, std::size_t first, std::size_t n, std::size_t b,
                          NamedTensor* movable = nullptr) {
  NamedTensor out;
  out.name = packed.name + " (sequence " + std::to_string(b) + ")";
  out.tensor.dtype = packed.tensor.dtype;
  const std::size_t heads = packed.tensor.shape[1], d = packed.tensor.shape[2];
  out.tensor.shape = {heads, n, d};
  if (packed.tensor.heads_first && movable && first == 0 && n == packed.tensor.shape[0]) {
    out.tensor.matrices = std::move(movable->tensor.matrices);
    return out;
  }
  if (packed.tensor.heads_first) {  // read head by head (read_packed_tensor): a block of rows each
    for (const Eigen::MatrixXd& m : packed.tensor.matrices)
      out.tensor.matrices.emplace_back(m.middleRows(static_cast<Eigen::Index>(first), static_cast<Eigen::Index>(n)));
    return out;
  }
  // A block of 64 tokens at a time (their small matrices, 64 x H x d doubles, stay in L2),
  // each head's column filled down the block: contiguous writes, no second copy.
  out.tensor.matrices.reserve(heads);  // each allocated in place (assign would copy a prototype in)
  for (std::size_t h = 0; h < heads; ++h)
    out.tensor.matrices.emplace_back(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(d));
  constexpr std::size_t block = 64;
  for (std::size_t r0 = 0; r0 < n; r0 += block) {
    const std::size_t r1 = std::min(n, r0 + block);
    for (std::size_t h = 0; h < heads; ++h) {
      Eigen::MatrixXd& m = out.tensor.matrices[h];
      for (std::size_t c = 0; c < d; ++c) {
        double* column = m.col(static_cast<Eigen::Index>(c)).data();
        for (std::size_t r = r0; r < r1; ++r)
          column[r] = packed.tensor.matrices[first + r](static_cast<Eigen::Index>(h), static_cast<Eigen::Index>(c));
      }
    }
  }
  return out;
}

/// Entries first .. first + n - 1 of every head of an (H, total_q) logsumexp, as (H, n).
NamedTensor sequence_lse(const NamedTensor& lse, std::size_t first, std::size_t n, std::size_t b) {
  NamedTensor out;
  out.name = lse.name + " (sequence " + std::to_string(b) + ")";
  out.tensor.dtype = lse.tensor.dtype;
  out.tensor.shape = {lse.tensor.matrices.size(), n};
  for (const Eigen::MatrixXd& m : lse.tensor.matrices)
    out.tensor.matrices.push_back(m.middleRows(static_cast<Eigen::Index>(first), static_cast<Eigen::Index>(n)));
  return out;
}

/// Sequence b's values of a per-head argument of shape (H,) (every sequence's) or (B, H).
NamedTensor sequence_values(const NamedTensor& values, std::size_t b, std::size_t sequences, const std::string& what) {
  if (values.tensor.matrices.size() == 1) return values;  // (H,): every sequence's
  if (values.tensor.matrices.size() != sequences)
    throw input_error(what + " (" + values.name + ") has shape " + attnrank::shape_text(values.tensor.shape) + " but there are " +
                      std::to_string(sequences) + " sequences: give (H,) or (B, H) with B = " + std::to_string(sequences));
  NamedTensor out;
  out.name = values.name + " (sequence " + std::to_string(b) + ")";
  out.tensor.dtype = values.tensor.dtype;
  out.tensor.shape = {static_cast<std::size_t>(values.tensor.matrices[b].rows())};
  out.tensor.matrices = {values.tensor.matrices[b]};
  return out;
}

/// Sequence b's n_q x n_k block of a padded array of shape (M_q, M_k), (H, M_q, M_k) or (B, H, M_q, M_k).
NamedTensor sequence_block(const NamedTensor& padded, std::size_t b, std::size_t sequences, std::size_t heads,
                           std::size_t n_q, std::size_t n_k, const std::string& what) {
  const std::vector<std::size_t>& shape = padded.tensor.shape;
  const std::size_t lead = shape.size() - 2;
  if (lead == 2 && (shape[0] != sequences || shape[1] != heads))
    throw input_error(what + " " + padded.name + " has shape " + attnrank::shape_text(shape) + " but there are " +
                      std::to_string(sequences) + " sequences of " + std::to_string(heads) +
                      " heads: give (B, H, max_seqlen_q, max_seqlen_k), (H, ...) or (max_seqlen_q, max_seqlen_k)");
  if (lead == 1 && shape[0] != heads)
    throw input_error(what + " " + padded.name + " has shape " + attnrank::shape_text(shape) + " but Q has " +
                      std::to_string(heads) + " heads");
  NamedTensor out;
  out.name = padded.name + " (sequence " + std::to_string(b) + ")";
  out.tensor.dtype = padded.tensor.dtype;
  out.tensor.shape = lead == 0 ? std::vector<std::size_t>{n_q, n_k} : std::vector<std::size_t>{heads, n_q, n_k};
  const std::size_t count = lead == 0 ? 1 : heads, first = lead == 2 ? b * heads : 0;
  for (std::size_t h = 0; h < count; ++h)
    out.tensor.matrices.push_back(padded.tensor.matrices[first + h].topLeftCorner(static_cast<Eigen::Index>(n_q),
                                                                                 static_cast<Eigen::Index>(n_k)));
  return out;
}

/// input_error unless `t` is a packed (total, heads, *) tensor.
void require_packed(const NamedTensor& t, const std::string& role, std::size_t total, std::size_t heads,
                    const char* total_name, const char* heads_name) {
  const std::vector<std::size_t>& s = t.tensor.shape;
  if (s.size() != 3 || s[0] != total || s[1] != heads)
    throw input_error(t.name + " (" + role + ") has shape " + attnrank::shape_text(s) + ": packed sequences (cu_seqlens) need (" +
                      total_name + ", " + heads_name + ", d) = (" + std::to_string(total) + ", " + std::to_string(heads) +
                      ", d)");
}

/// The sequences' start offsets of a cu_seqlens argument: B + 1 integers 0 = c_0 <= ... <=
/// c_B = `total` (the packed tensor's first dimension); input_error naming `what` otherwise.
std::vector<std::size_t> sequence_offsets(const NamedTensor& cu_seqlens, std::size_t total, const std::string& what) {
  const DoubleTensor& t = cu_seqlens.tensor;
  const bool list = t.shape.size() == 1 || (t.shape.size() == 2 && t.shape[1] == 1);  // (B + 1,) or from Python (B + 1, 1)
  if (!list || t.matrices.size() != 1 || t.matrices[0].cols() != 1 || t.matrices[0].size() < 2)
    throw input_error(what + " (" + cu_seqlens.name + ") has shape " + attnrank::shape_text(t.shape) +
                      ": give B + 1 offsets (shape (B + 1,)), 0 first and the packed length last");
  std::vector<std::size_t> out;
  const Eigen::MatrixXd& m = t.matrices[0];
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double x = m(i);
    const double previous = out.empty() ? 0 : static_cast<double>(out.back());
    if (!(x >= previous && x == std::floor(x) && x <= static_cast<double>(total)) || (i == 0 && x != 0))
      throw input_error(what + " (" + cu_seqlens.name + ") entry " + std::to_string(i) + " is " + shortest_decimal(x) +
                        ": offsets are integers from 0, non-decreasing, at most the packed length " +
                        std::to_string(total));
    out.push_back(static_cast<std::size_t>(x));
  }
  if (out.back() != total)
    throw input_error(what + " (" + cu_seqlens.name + ") ends at " + std::to_string(out.back()) +
                      " but the packed tensor has " + std::to_string(total) + " rows: the last offset is the total length");
  return out;
}

}  // namespace

KernelInputs varlen_kernel_inputs(const KernelQuestion& q, KernelQuestion* movable) {
  if (!q.cu_seqlens_q || !q.cu_seqlens_k)
    throw input_error("packed sequences need both cu_seqlens_q and cu_seqlens_k (the offsets of each sequence's "
                      "queries and keys)");
  if (q.q.tensor.shape.size() != 3 || q.k.tensor.shape.size() != 3)
    throw input_error("packed sequences (cu_seqlens) need Q of shape (total_q, H, d) and K of (total_k, H_kv, d); Q is " +
                      attnrank::shape_text(q.q.tensor.shape) + ", K " + attnrank::shape_text(q.k.tensor.shape));
  if (q.options.mask || !q.options.masks.empty())
    throw input_error("packed sequences take causal, a window or per-head masks padded to (B, H, max_seqlen_q, "
                      "max_seqlen_k) (KernelQuestion::masks), not masks of one size");
  if (!q.options.kv_heads.empty() || !q.options.alibi_slopes.empty() || !q.options.sinks.empty() ||
      !q.options.biases.empty() || !q.options.dropout_keep.empty())
    throw input_error("packed sequences read per-head values from the question (alibi_slopes, sinks, bias, "
                      "dropout_mask; K/V heads from K's shape), not from per-head option lists");
  const std::size_t total_q = q.q.tensor.shape[0], heads = q.q.tensor.shape[1];
  const std::size_t total_k = q.k.tensor.shape[0], kv_heads = q.k.tensor.shape[1];
  const std::vector<std::size_t> cq = sequence_offsets(*q.cu_seqlens_q, total_q, "cu_seqlens_q");
  const std::vector<std::size_t> ck = sequence_offsets(*q.cu_seqlens_k, total_k, "cu_seqlens_k");
  if (cq.size() != ck.size())
    throw input_error("cu_seqlens_q has " + std::to_string(cq.size() - 1) + " sequences and cu_seqlens_k " +
                      std::to_string(ck.size() - 1) + ": one offset list entry per sequence in each");
  const std::size_t sequences = cq.size() - 1;
  if (total_q == 0)
    throw input_error("the packed sequences hold no queries (cu_seqlens_q ends at 0): nothing to check");
  std::size_t longest_q = 0, longest_k = 0;
  for (std::size_t b = 0; b < sequences; ++b) {
    longest_q = std::max(longest_q, cq[b + 1] - cq[b]);
    longest_k = std::max(longest_k, ck[b + 1] - ck[b]);
    if (cq[b + 1] > cq[b] && ck[b + 1] == ck[b])
      throw input_error("sequence " + std::to_string(b) + " has " + std::to_string(cq[b + 1] - cq[b]) +
                        " queries and no keys: their rows have no key to attend to");
  }
  for (const auto& [given, longest, name] : {std::tuple{q.max_seqlen_q, longest_q, "max_seqlen_q"},
                                             std::tuple{q.max_seqlen_k, longest_k, "max_seqlen_k"}})
    if (given && *given < longest)
      throw input_error(std::string(name) + " " + std::to_string(*given) + " is below the longest sequence's length " +
                        std::to_string(longest) + " (from the cu_seqlens offsets)");
  // Packed shapes first: slicing reads rows by the offsets.
  require_packed(q.v, "V", total_k, kv_heads, "total_k", "H_kv");
  for (const auto& [t, role] : {std::pair{&q.candidate, "the candidate"}, std::pair{&q.reference, "the reference"},
                                std::pair{&q.dout, "dout"}, std::pair{&q.dq, "the candidate dq"},
                                std::pair{&q.reference_dq, "the reference dq"}})
    if (*t) require_packed(**t, role, total_q, heads, "total_q", "H");
  for (const auto& [t, role] : {std::pair{&q.dk, "the candidate dk"}, std::pair{&q.dv, "the candidate dv"},
                                std::pair{&q.reference_dk, "the reference dk"}, std::pair{&q.reference_dv, "the reference dv"}})
    if (*t) require_packed(**t, role, total_k, kv_heads, "total_k", "H_kv");
  for (const auto& [t, role] : {std::pair{&q.lse, "the candidate lse"}, std::pair{&q.reference_lse, "the reference lse"}})
    if (*t && (t->value().tensor.matrices.size() != heads ||
               std::any_of(t->value().tensor.matrices.begin(), t->value().tensor.matrices.end(),
                           [&](const Eigen::MatrixXd& m) { return m.rows() != Eigen::Index(total_q); })))
      throw input_error((*t)->name + " (" + role + ") has shape " + attnrank::shape_text((*t)->tensor.shape) +
                        ": packed sequences' logsumexp is (H, total_q) = (" + std::to_string(heads) + ", " +
                        std::to_string(total_q) + "), FlashAttention's varlen softmax_lse");
  for (const auto& [t, what] : {std::pair{&q.masks, "the per-head masks"}, std::pair{&q.bias, "the bias"},
                                std::pair{&q.dropout_mask, "the dropout mask"}})
    if (*t)
      for (const Eigen::MatrixXd& m : (*t)->tensor.matrices)
        if (m.rows() < Eigen::Index(longest_q) || m.cols() < Eigen::Index(longest_k))
          throw input_error(std::string(what) + " " + (*t)->name + " is " + std::to_string(m.rows()) + " x " +
                            std::to_string(m.cols()) + " per head, smaller than the longest sequences (" +
                            std::to_string(longest_q) + " queries, " + std::to_string(longest_k) +
                            " keys): packed sequences read it padded, each sequence its top-left block");

  KernelInputs joined;
  joined.options = q.options;
  joined.options.alignment = q.alignment;
  std::vector<std::optional<Mask>> masks;  // each query head's, nullopt: none
  bool any_mask = false, bias_masks = false, unequal = false;
  std::vector<Eigen::MatrixXd> *lists[] = {&joined.q.owned(), &joined.k.owned(), &joined.v.owned(),
                                           &joined.candidate.owned(), &joined.reference.owned(), &joined.dout.owned()};
  for (std::size_t b = 0; b < sequences; ++b) {
    const std::size_t n_q = cq[b + 1] - cq[b], n_k = ck[b + 1] - ck[b];
    if (n_q == 0) {
      // Keys no query reads: they change no output and their exact dK and dV are 0, which is
      // what their K/V heads, read by no query head, are checked against.
      const auto keys = [&](HeadList& into, const std::optional<NamedTensor>& from) {
        if (from) {
          const NamedTensor t = sequence_rows(*from, ck[b], n_k, b);
          into.owned().insert(into.owned().end(), t.tensor.matrices.begin(), t.tensor.matrices.end());
        }
      };
      keys(joined.k, q.k);
      keys(joined.v, q.v);
      keys(joined.gradients[1], q.dk);
      keys(joined.gradients[2], q.dv);
      keys(joined.reference_gradients[1], q.reference_dk);
      keys(joined.reference_gradients[2], q.reference_dv);
      continue;
    }
    unequal = unequal || n_q != n_k;
    KernelQuestion s;
    // Only a single sequence spans whole tensors: it may take them over (`movable`).
    s.q = sequence_rows(q.q, cq[b], n_q, b, movable ? &movable->q : nullptr);
    s.k = sequence_rows(q.k, ck[b], n_k, b, movable ? &movable->k : nullptr);
    s.v = sequence_rows(q.v, ck[b], n_k, b, movable ? &movable->v : nullptr);
    const auto rows = [&](std::optional<NamedTensor>& into, const std::optional<NamedTensor>& from, bool keys) {
      if (!from) return;
      NamedTensor* mine = nullptr;  // the movable question's slot holding `from`
      if (movable)
        for (std::optional<NamedTensor>* slot :
             {&movable->candidate, &movable->reference, &movable->dout, &movable->dq, &movable->reference_dq,
              &movable->dk, &movable->dv, &movable->reference_dk, &movable->reference_dv})
          if (&*slot == &from && *slot) mine = &**slot;
      into = sequence_rows(*from, keys ? ck[b] : cq[b], keys ? n_k : n_q, b, mine);
    };
    rows(s.candidate, q.candidate, false);
    rows(s.reference, q.reference, false);
    rows(s.dout, q.dout, false);
    rows(s.dq, q.dq, false);
    rows(s.reference_dq, q.reference_dq, false);
    rows(s.dk, q.dk, true);
    rows(s.dv, q.dv, true);
    rows(s.reference_dk, q.reference_dk, true);
    rows(s.reference_dv, q.reference_dv, true);
    if (q.lse) s.lse = sequence_lse(*q.lse, cq[b], n_q, b);
    if (q.reference_lse) s.reference_lse = sequence_lse(*q.reference_lse, cq[b], n_q, b);
    s.options = q.options;
    s.causal = q.causal;
    s.window = q.window;
    s.alignment = q.alignment;
    if (q.alibi_slopes) s.alibi_slopes = sequence_values(*q.alibi_slopes, b, sequences, "the ALiBi slopes");
    s.sinks = q.sinks;
    s.fp8_format = q.fp8_format;
    for (const auto& [into, from, what] : {std::tuple{&s.q_descale, &q.q_descale, "q_descale"},
                                           std::tuple{&s.k_descale, &q.k_descale, "k_descale"},
                                           std::tuple{&s.v_descale, &q.v_descale, "v_descale"}})
      if (*from) *into = sequence_values(**from, b, sequences, what);
    for (const auto& [into, from, what] : {std::tuple{&s.masks, &q.masks, "the per-head masks"},
                                           std::tuple{&s.bias, &q.bias, "the bias"},
                                           std::tuple{&s.dropout_mask, &q.dropout_mask, "the dropout mask"}})
      if (*from) *into = sequence_block(**from, b, sequences, heads, n_q, n_k, what);
    s.dropout_p = q.dropout_p;
    KernelInputs part;
    try {
      part = dense_kernel_inputs(s);
    } catch (const input_error& e) {
      throw input_error("sequence " + std::to_string(b) + " (queries " + std::to_string(cq[b]) + ".." +
                            std::to_string(cq[b + 1]) + ", keys " + std::to_string(ck[b]) + ".." +
                            std::to_string(ck[b + 1]) + " of the packed tensors): " + e.what(),
                        e.subject());
    }
    // part's lists are its own or borrowed from s, both this iteration's locals (never const
    // objects): their matrices are moved into the joined lists, not copied.
    const auto move_into = [](std::vector<Eigen::MatrixXd>& into, const HeadList& from) {
      auto& v = const_cast<std::vector<Eigen::MatrixXd>&>(from.get());
      into.insert(into.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
    };
    const HeadList* parts[] = {&part.q, &part.k, &part.v, &part.candidate, &part.reference, &part.dout};
    for (std::size_t i = 0; i < 6; ++i) move_into(*lists[i], *parts[i]);
    for (std::size_t i = 0; i < 4; ++i) {  // dq, dk, dv, lse: per sequence (dsinks: below)
      move_into(joined.gradients[i].owned(), part.gradients[i]);
      move_into(joined.reference_gradients[i].owned(), part.reference_gradients[i]);
    }
    joined.backward = joined.backward || part.backward;  // dsinks are the whole question's (below)
    const KernelCheckOptions& o = part.options;
    for (std::size_t h = 0; h < heads; ++h) {
      joined.packed_heads.push_back(b * heads + h);
      joined.options.kv_heads.push_back(b * kv_heads + kv_head_of(o, h));
      const Mask* m = mask_of(o, h);
      masks.push_back(m ? std::optional<Mask>(*m) : std::nullopt);
      any_mask = any_mask || m;
    }
    bias_masks = bias_masks || part.mask_name.ends_with("the bias's -inf entries");
    for (const auto& [into, from] : {std::pair{&joined.options.alibi_slopes, &o.alibi_slopes}, std::pair{&joined.options.sinks, &o.sinks}})
      into->insert(into->end(), from->begin(), from->end());
    for (const auto& [into, from] : {std::pair{&joined.options.biases, &o.biases}, std::pair{&joined.options.dropout_keep, &o.dropout_keep}})
      into->insert(into->end(), from->begin(), from->end());
    joined.options.dropout_p = o.dropout_p;
  }
  joined.options.mask.reset();
  if (any_mask) {
    for (std::size_t t = 0; t < masks.size(); ++t) {
      const std::size_t b = joined.packed_heads[t] / heads;
      joined.options.masks.push_back(masks[t] ? *masks[t]
                                              : Mask::window(Eigen::Index(cq[b + 1] - cq[b]), Eigen::Index(ck[b + 1] - ck[b]), -1, -1));
    }
  }
  // The mask as the question asked for it (a sequence of one query may need none).
  std::string name = "none";
  if (q.masks) {
    name = "per-head";
  } else if (q.causal || q.window) {
    const long left = q.window ? q.window->first : -1, right = q.causal ? 0 : q.window ? q.window->second : -1;
    name = left < 0 && right < 0 ? "none" : window_mask_name(left, right);
    if (unequal && name != "none") name += q.alignment == MaskAlignment::bottom_right ? " bottom-right" : " top-left";
  }
  if (bias_masks) name = name == "none" ? "the bias's -inf entries" : name + " and the bias's -inf entries";
  joined.mask_name = name;
  add_sink_gradients(q, heads, joined);
  joined.cu_seqlens_q = cq;
  joined.cu_seqlens_k = ck;
  return joined;
}

}  // namespace attnrank::detail
