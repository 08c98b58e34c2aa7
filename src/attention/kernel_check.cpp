// The certified error of an attention kernel's output (attnrank/attention/kernel_check.hpp).
#include <attnrank/attention/kernel_check.hpp>

#include <attnrank/attention/certified_gradients.hpp>
#include <attnrank/attention/detail/a_priori_head.hpp>
#include <attnrank/attention/detail/error_accumulator.hpp>
#include <attnrank/attention/detail/interval_attention.hpp>
#include <attnrank/attention/softmax.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/detail/infinity.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

namespace attnrank {

FallbackPolicy fallback_policy_from_name(const std::string& name) {
  if (name == "auto") return FallbackPolicy::automatic;
  if (name == "never") return FallbackPolicy::never;
  if (name == "always") return FallbackPolicy::always;
  throw input_error("fallback '" + name + "' is not auto, never or always");
}
namespace {

using Eigen::Index;
using detail::inf;

std::string shape_of(const Eigen::MatrixXd& M) { return std::to_string(M.rows()) + " x " + std::to_string(M.cols()); }

/// Each output matrix has its head's output shape (K and V are checked with the head).
void check_shapes(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& v,
                  const std::vector<Eigen::MatrixXd>& out, const char* name, const KernelCheckOptions& options) {
  if (out.size() != q.size())
    throw input_error(std::string(name) + " has " + std::to_string(out.size()) + " matrices for " +
                      std::to_string(q.size()) + " heads");
  for (std::size_t t = 0; t < q.size(); ++t)
    if (out[t].rows() != q[t].rows() || out[t].cols() != v[kv_head_of(options, t)].cols())
      throw input_error(std::string(name) + " head " + std::to_string(t) + " is " + shape_of(out[t]) +
                            " but the attention output is " + std::to_string(q[t].rows()) + " x " +
                            std::to_string(v[kv_head_of(options, t)].cols()) + " (rows of Q x columns of V)",
                        name);
}

}  // namespace

std::vector<std::size_t> grouped_kv_heads(std::size_t batches, std::size_t heads, std::size_t kv_heads) {
  if (kv_heads == 0 || heads == 0 || heads % kv_heads != 0)
    throw input_error("grouped-query attention needs the K/V heads to divide the query heads: " +
                      std::to_string(heads) + " query heads, " + std::to_string(kv_heads) + " K/V heads");
  std::vector<std::size_t> out;
  const std::size_t group = heads / kv_heads;
  for (std::size_t b = 0; b < batches; ++b)
    for (std::size_t h = 0; h < heads; ++h) out.push_back(b * kv_heads + h / group);
  return out;
}

namespace detail {

void check_kv_heads(std::size_t queries, std::size_t keys, std::size_t values, const KernelCheckOptions& options,
                    const char* who) {
  if (keys != values)
    throw input_error(std::string(who) + ": " + std::to_string(keys) + " K matrices and " + std::to_string(values) +
                      " V (one of each per K/V head)");
  if (options.kv_heads.empty()) {
    if (keys != queries)
      throw input_error(std::string(who) + ": " + std::to_string(queries) + " Q matrices, " + std::to_string(keys) +
                        " K and " + std::to_string(values) + " V (one of each per head, or kv_heads for grouped queries)");
    return;
  }
  if (options.kv_heads.size() != queries)
    throw input_error(std::string(who) + ": kv_heads has " + std::to_string(options.kv_heads.size()) +
                      " entries for " + std::to_string(queries) + " query heads");
  for (std::size_t t = 0; t < queries; ++t)
    if (options.kv_heads[t] >= keys)
      throw input_error(std::string(who) + ": query head " + std::to_string(t) + " reads K/V head " +
                        std::to_string(options.kv_heads[t]) + " of " + std::to_string(keys));
}

void check_modifiers(std::size_t queries, const KernelCheckOptions& options, const char* who) {
  for (const auto& [list, name] : {std::pair{&options.alibi_slopes, "ALiBi slopes"}, std::pair{&options.sinks, "sinks"}})
    if (!list->empty() && list->size() != queries)
      throw input_error(std::string(who) + ": " + std::to_string(list->size()) + " " + name + " for " +
                        std::to_string(queries) + " query heads (one per head)");
  if (!options.biases.empty() && options.biases.size() != queries)
    throw input_error(std::string(who) + ": " + std::to_string(options.biases.size()) + " biases for " +
                      std::to_string(queries) + " query heads (one per head)");
  if (!options.dropout_keep.empty() && options.dropout_keep.size() != queries)
    throw input_error(std::string(who) + ": " + std::to_string(options.dropout_keep.size()) + " keep-masks for " +
                      std::to_string(queries) + " query heads (one per head)");
  if (options.dropout_p != 0 && options.dropout_keep.empty())
    throw input_error(std::string(who) + ": dropout_p needs the kernel's keep-mask (which entries it kept)");
  if (!options.masks.empty() && options.masks.size() != queries)
    throw input_error(std::string(who) + ": " + std::to_string(options.masks.size()) + " masks for " +
                      std::to_string(queries) + " query heads (one per head)");
  if (!options.masks.empty() && options.mask)
    throw input_error(std::string(who) + ": a mask for every head and per-head masks, not both");
  for (std::size_t t = 0; t < queries; ++t) {
    validate(modifiers_of(options, t));
    const Mask* mask = mask_of(options, t);
    if (mask && options.empty_rows == EmptyRows::refuse && mask->first_empty_row() >= 0)
      throw input_error(std::string(who) + ": query head " + std::to_string(t) + ", row " +
                        std::to_string(mask->first_empty_row()) + " (0-based) allows no key (softmax over it has no "
                        "value; FlashAttention gives it the output 0: the empty-rows option 'zero')");
  }
  if (options.sink_params.empty()) return;
  if (options.sinks.empty())
    throw input_error(std::string(who) + ": sink parameters without sinks");
  if (options.sink_params.size() != queries)
    throw input_error(std::string(who) + ": " + std::to_string(options.sink_params.size()) + " sink parameters for " +
                      std::to_string(queries) + " query heads (one per head)");
  const std::size_t count = sink_param_count(queries, options);
  std::vector<std::optional<std::size_t>> first(count);
  for (std::size_t t = 0; t < queries; ++t) {
    std::optional<std::size_t>& f = first[options.sink_params[t]];
    if (!f) f = t;
    else if (options.sinks[*f] != options.sinks[t])
      throw input_error(std::string(who) + ": query heads " + std::to_string(*f) + " and " + std::to_string(t) +
                        " share sink parameter " + std::to_string(options.sink_params[t]) + " but have sinks " +
                        shortest_decimal(options.sinks[*f]) + " and " + shortest_decimal(options.sinks[t]));
  }
  for (std::size_t g = 0; g < count; ++g)
    if (!first[g])
      throw input_error(std::string(who) + ": sink parameter " + std::to_string(g) + " belongs to no query head");
}

std::string fallback_skipped_note(const std::string& what, double width, const KernelCheckOptions& options,
                                  double work) {
  return what + " (width up to " + format_upper_bound(width) + ") do not pin every error to 1%; recomputing them with " +
         "MPFI at " + std::to_string(options.fallback_bits) + " bits takes " + format_upper_bound(work, 2) +
         " interval multiply-adds, over the automatic budget of " + format_upper_bound(options.fallback_budget, 2) +
         " (ask for it: fallback always)";
}

}  // namespace detail

std::size_t sink_param_count(std::size_t queries, const KernelCheckOptions& options) {
  if (options.sinks.empty()) return 0;
  if (options.sink_params.empty()) return queries;
  std::size_t count = 0;
  for (std::size_t g : options.sink_params) count = std::max(count, g + 1);
  return count;
}

ScoreModifiers modifiers_of(const KernelCheckOptions& options, std::size_t t) {
  ScoreModifiers m;
  m.softcap = options.softcap;
  m.alignment = options.alignment;
  if (!options.alibi_slopes.empty()) m.alibi_slope = options.alibi_slopes[t];
  if (!options.sinks.empty()) m.sink = options.sinks[t];
  if (!options.biases.empty()) m.bias = &options.biases[t];
  if (!options.dropout_keep.empty()) m.keep = &options.dropout_keep[t];
  m.dropout_p = options.dropout_p;
  return m;
}

bool OutputError::tight() const {
  if (!(max_abs_error_upper < inf)) return nonfinite > 0;  // an infinite error is known exactly
  return max_abs_error_upper - max_abs_error_lower <= max_abs_error_upper / 100;
}

KernelCheck check_kernel(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                         const std::vector<Eigen::MatrixXd>& v, const std::vector<Eigen::MatrixXd>& candidate,
                         const std::vector<Eigen::MatrixXd>* reference, const KernelCheckOptions& options,
                         const std::vector<BoundsMatrix>* enclosures) {
  if (q.empty()) throw input_error("check_kernel: no heads");
  if (enclosures && enclosures->size() != q.size())
    throw std::logic_error("check_kernel: one enclosure per head is needed");
  detail::check_kv_heads(q.size(), k.size(), v.size(), options, "check_kernel");
  detail::check_modifiers(q.size(), options, "check_kernel");
  check_shapes(q, v, candidate, "the candidate", options);
  if (reference) check_shapes(q, v, *reference, "the reference", options);
  if (options.scale) (void)ScaleBounds::exactly(*options.scale);
  if (options.fallback_bits < 53 || options.fallback_bits > max_precision_bits)
    throw input_error("check_kernel: fallback precision, bits = " + std::to_string(options.fallback_bits) +
                      ", is outside [53, " + std::to_string(max_precision_bits) + "]");
  KernelCheck out;
  const auto run = [&](bool intervals, AttentionProducts products) {
    detail::ErrorAccumulator c, r;
    if (options.output_format) c.measure_ulps(*options.output_format);
    for (std::size_t t = 0; t < q.size(); ++t) {
      const std::size_t j = kv_head_of(options, t);
      const ScoreModifiers modifiers = modifiers_of(options, t);
      const Mask* mask = mask_of(options, t);
      if (intervals) {
        const Matrix<Interval> E = detail::interval_attention(q[t], k[j], v[j], options.scale, mask, modifiers);
        c.add(t, E, candidate[t]);
        if (reference) r.add(t, E, (*reference)[t]);
      } else {
        const ScaleBounds s = options.scale ? ScaleBounds::exactly(*options.scale) : ScaleBounds::inverse_sqrt(q[t].cols());
        // A variant: the fused pass with its modifiers on the tiles (a priori products, no
        // dropout); otherwise the backward pass's blocks (its score-modifier stage), asking for O only.
        const bool fused = products == AttentionProducts::a_priori && !modifiers.keep;
        const bool given = enclosures && products == AttentionProducts::a_priori && !modifiers.any();
        const BoundsMatrix E =
            given             ? (*enclosures)[t]
            : !modifiers.any() ? certified_attention(q[t], k[j], v[j], s, mask, products)
            : fused          ? detail::a_priori_attention(q[t], k[j], v[j], s, mask, modifiers)
                             : certified_attention_gradients(q[t], k[j], v[j], Eigen::MatrixXd(), s, mask, products,
                                                             GradientsWanted{false, false, false, false, true}, modifiers)
                                   .output;
        c.add(t, E, candidate[t]);
        if (reference) r.add(t, E, (*reference)[t]);
      }
    }
    out.candidate = c.finish();
    if (reference) out.reference = r.finish();
    out.enclosure_width = c.width();
  };
  // The cheap enclosure first; the directed one (about 10x narrower, 2.5x the
  // GEMMs) only when an output is not pinned yet but would be at a tenth of the spread.
  run(false, AttentionProducts::a_priori);
  out.method = "double";
  out.products = "a_priori";
  out.bits = 53;
  const auto all_tight = [&] { return out.candidate.tight() && (!out.reference || out.reference->tight()); };
  if (!all_tight() && out.candidate.within_reach() && (!out.reference || out.reference->within_reach())) {
    run(false, AttentionProducts::directed);
    out.products = "directed";
  }

  const bool tight = all_tight();
  double work = 0;
  for (std::size_t t = 0; t < q.size(); ++t)
    work += static_cast<double>(q[t].rows()) * static_cast<double>(k[kv_head_of(options, t)].rows()) *
            static_cast<double>(q[t].cols() + v[kv_head_of(options, t)].cols());
  const bool wanted = options.fallback == FallbackPolicy::always || (!tight && options.fallback != FallbackPolicy::never);
  if (wanted && options.fallback == FallbackPolicy::automatic && work > options.fallback_budget) {
    out.fallback_skipped = detail::fallback_skipped_note("the certified double enclosures", out.enclosure_width, options, work);
  } else if (wanted) {
    const PrecisionScope scope(options.fallback_bits);
    run(true, AttentionProducts::directed);
    out.method = "mpfi";
    out.products = "";
    out.bits = PrecisionScope::bits();
  }

  if (out.reference) detail::ratio_bounds(out.candidate, *out.reference, out.ratio_lower, out.ratio_upper);
  return out;
}

}  // namespace attnrank
