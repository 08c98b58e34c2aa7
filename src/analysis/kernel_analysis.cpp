// The kernel check as an analysis (analysis/kernel_analysis.hpp): reading its
// arguments, running the checks and judging the tolerances; the inputs are prepared
// in kernel_inputs.cpp (dense) and kernel_varlen.cpp (packed), the reports written in
// kernel_report.cpp.
#include <attnrank/analysis/kernel_analysis.hpp>

#include <attnrank/analysis/detail/kernel_inputs.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/io/safetensors.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace attnrank {
namespace {


void require_tolerance_value(const std::optional<double>& x, const char* flag) {
  if (x && !(std::isfinite(*x) && *x >= 0))
    throw input_error(std::string(flag) + " " + std::to_string(*x) + " is not a non-negative number");
}

}  // namespace

void read_kernel_tensors(KernelQuestion& q, const std::string& path, bool as_reference, const ParseLimits& limits) {
  const std::vector<SafetensorsEntry> entries = safetensors_index(read_text_file(path, limits), path);
  const auto read = [&](const std::string& name, bool lse) {
    const std::string argument = path + ":" + name;
    const NonFiniteElements nonfinite = name == "q" || name == "k" || name == "v" || name == "dout"
                                            ? NonFiniteElements::refuse
                                            : NonFiniteElements::keep;
    const bool packed = q.cu_seqlens_q || q.cu_seqlens_k;  // read head by head (read_packed_tensor)
    return NamedTensor{lse      ? read_row_stack(argument, limits, NonFiniteElements::keep)
                       : packed ? read_packed_tensor(argument, limits, nonfinite)
                                : read_double_tensor(argument, limits, nonfinite),
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
      else if (n == "dsinks") fill(q.reference_dsinks, true);
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
    else if (n == "dsinks") fill(q.dsinks, true);
  }
  if (found == 0)
    throw input_error(path + ": no tensor named " +
                          (as_reference ? std::string("out, dq, dk, dv, lse or dsinks")
                                        : std::string("q, k, v, out, dout, dq, dk, dv, lse or dsinks")) +
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
  if (q.cu_seqlens_q && !binary)
    throw input_error("mask '" + argument + "': with packed sequences (cu_seqlens) give causal, a window, or an .npy / "
                      "safetensors array padded to (B, H, max_seqlen_q, max_seqlen_k), (H, ...) or (max_seqlen_q, "
                      "max_seqlen_k)");
  if (binary) {
    DoubleTensor t = read_double_tensor(argument, limits);
    if (t.shape.size() > 2 || q.cu_seqlens_q) {
      q.masks = NamedTensor{std::move(t), argument};
      return;
    }
  }
  q.options.mask = read_mask_argument(argument, q.q.tensor.matrices.at(0).rows(), q.q.name + " (Q) and " + q.k.name + " (K)",
                                      limits, q.k.tensor.matrices.at(0).rows(), q.options.empty_rows);
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
KernelAnalysis analyze(const KernelQuestion& q, KernelQuestion* movable);
}  // namespace

KernelAnalysis analyze_kernel(const KernelQuestion& q) { return analyze(q, nullptr); }
KernelAnalysis analyze_kernel(KernelQuestion&& q) { return analyze(q, &q); }

namespace {

/// max_error as the user wrote it (the CLI keeps the text), else its shortest decimal (Python's float).
std::string max_error_text(const KernelQuestion& q) {
  return !q.max_error_text.empty() || !q.max_error ? q.max_error_text : shortest_decimal(*q.max_error);
}

/// analyze_kernel; `movable`: the same question, given up (see analyze_kernel(KernelQuestion&&)).
KernelAnalysis analyze(const KernelQuestion& q, KernelQuestion* movable) {
  for (const NamedTensor* t : {&q.q, &q.k, &q.v})
    if (t->tensor.shape.empty())
      throw input_error(std::string("check-kernel needs ") + (t == &q.q ? "Q" : t == &q.k ? "K" : "V") +
                        " (q, k and v, or tensors named q, k, v in one file)");
  // What is given, once (a packed question checks each sequence's shapes on its own).
  const std::optional<NamedTensor>* candidates[] = {&q.dq, &q.dk, &q.dv, &q.lse, &q.dsinks};
  const std::optional<NamedTensor>* references[] = {&q.reference_dq, &q.reference_dk, &q.reference_dv,
                                                    &q.reference_lse, &q.reference_dsinks};
  bool backward = false;
  for (std::size_t r = 0; r < detail::kernel_role_count; ++r) {
    if (*references[r] && !*candidates[r])
      throw input_error(std::string("a reference ") + detail::kernel_roles[r] + " needs the candidate's " + detail::kernel_roles[r] +
                        ": the reference's error is what the candidate's is compared with");
    backward = backward || *candidates[r];
  }
  if (!q.candidate && !backward)
    throw input_error("nothing to check: give the kernel's output (candidate) or its backward results "
                      "(dq, dk, dv, lse, dsinks)");
  if (q.reference && !q.candidate)
    throw input_error("a reference needs a candidate (the reference's error is what the candidate's is compared with)");
  if ((q.dq || q.dk || q.dv || q.dsinks) && !q.dout)
    throw input_error("dq, dk, dv and dsinks need dout (the upstream gradient the backward pass was run with)");
  if (q.max_error && !(std::isfinite(*q.max_error) && *q.max_error >= 0))
    throw input_error("max_error '" + max_error_text(q) + "' is not a non-negative number");
  require_tolerance_value(q.rtol, "rtol");
  if (q.rtol && !q.max_error) throw input_error("rtol needs max_error (the tolerance is max_error + rtol max |exact|)");
  require_tolerance_value(q.max_ratio, "max_ratio");
  require_tolerance_value(q.max_ulps, "max_ulps");
  if (q.max_ulps && !q.candidate) throw input_error("max_ulps judges the output: pass the kernel's out (candidate)");
  require_tolerance_value(q.ratio_atol, "ratio_atol");
  if (q.ratio_atol && !q.max_ratio)
    throw input_error("ratio_atol needs max_ratio (the rule is candidate error <= max_ratio x reference error + "
                      "ratio_atol)");
  bool any_reference = q.reference.has_value();
  for (const auto* t : references) any_reference = any_reference || t->has_value();
  if (q.max_ratio && !any_reference)
    throw input_error("max_ratio needs a reference (reference, reference_dq, ...): it bounds the candidate's "
                      "error by a multiple of the reference's");

  const bool packed = q.cu_seqlens_q || q.cu_seqlens_k;
  const detail::KernelInputs in = packed ? detail::varlen_kernel_inputs(q, movable) : detail::dense_kernel_inputs(q);
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
    // With a profile the budget's pass encloses the exact output too: the check reuses it.
    std::vector<HeadBudget> budgets;
    std::vector<BoundsMatrix> budget_enclosures;
    if (q.profile) {
      if (packed) throw input_error("a precision profile's error budget does not model packed sequences yet");
      if (q.q_descale || q.k_descale || q.v_descale)
        throw input_error("a precision profile's error budget does not model FP8 descale factors yet");
      if (!q.candidate && in.gradients[3].get().empty())
        throw input_error("a precision profile judges the output or the logsumexp: pass the kernel's out (or lse)");
      budgets = error_budget(in.q.get(), in.k.get(), in.v.get(), in.options, *q.profile, !in.gradients[3].get().empty());
      for (const HeadBudget& h : budgets) budget_enclosures.push_back(h.exact_out);
      out.profile = q.profile;
    }
    if (q.candidate) {
      // The candidate's error in ulps of its own dtype, when that is a floating format.
      KernelCheckOptions forward = in.options;
      try {
        forward.output_format = number_format(q.candidate->tensor.dtype);
      } catch (const input_error&) {
      }
      if (q.max_ulps && !forward.output_format)
        throw input_error("max_ulps needs a floating-point candidate (its ulps are those of its dtype, " +
                          q.candidate->tensor.dtype + ")");
      out.result = check_kernel(in.q.get(), in.k.get(), in.v.get(), in.candidate.get(),
                                q.reference ? &in.reference.get() : nullptr, forward,
                                q.profile ? &budget_enclosures : nullptr);
      out.candidate_name = q.candidate->name;
      out.candidate_dtype = q.candidate->tensor.dtype;
      judge("out", out.result->candidate, out.result->reference, out.error_verdict, out.ratio_verdict);
      if (q.max_ulps && out.result->candidate.ulps) {
        const UlpReport& u = *out.result->candidate.ulps;
        out.max_ulps = q.max_ulps;
        out.ulps_verdict = out.result->candidate.infinite() || u.max_lower > *q.max_ulps ? ToleranceVerdict::exceeded
                           : u.max_upper <= *q.max_ulps                                  ? ToleranceVerdict::within
                                                                                         : ToleranceVerdict::undecided;
        if (out.ulps_verdict == ToleranceVerdict::exceeded &&
            std::find(out.exceeded.begin(), out.exceeded.end(), "out") == out.exceeded.end())
          out.exceeded.push_back("out");
      }
      if (out.result->reference) {
        std::string note = inexact_reference_note(*out.result->reference, q.reference->tensor.dtype, "out");
        if (!note.empty()) out.notes.push_back(std::move(note));
      }
    }
    if (backward) {
      KernelGradients c, r;
      std::vector<Eigen::MatrixXd>* c_lists[] = {&c.dq, &c.dk, &c.dv, &c.lse, &c.dsinks};
      std::vector<Eigen::MatrixXd>* r_lists[] = {&r.dq, &r.dk, &r.dv, &r.lse, &r.dsinks};
      for (std::size_t i = 0; i < detail::kernel_role_count; ++i) {
        *c_lists[i] = in.gradients[i].get();
        *r_lists[i] = in.reference_gradients[i].get();
      }
      out.backward = check_kernel_gradients(in.q.get(), in.k.get(), in.v.get(), in.dout.get(), c, &r, in.options);
      const std::optional<TensorCheck>* checks[] = {&out.backward->dq, &out.backward->dk, &out.backward->dv,
                                                    &out.backward->lse, &out.backward->dsinks};
      for (std::size_t i = 0; i < detail::kernel_role_count; ++i) {
        if (!*checks[i]) continue;
        GradientReport g;
        g.role = detail::kernel_roles[i];
        g.check = **checks[i];
        g.candidate_name = (*candidates[i])->name;
        g.candidate_dtype = (*candidates[i])->tensor.dtype;
        if (*references[i]) {
          g.reference_name = (*references[i])->name;
          g.reference_dtype = (*references[i])->tensor.dtype;
        }
        judge(g.role, g.check.candidate, g.check.reference, g.error_verdict, g.ratio_verdict);
        if (g.check.reference) {
          std::string note = inexact_reference_note(*g.check.reference, g.reference_dtype, g.role);
          if (!note.empty()) out.notes.push_back(std::move(note));
        }
        out.gradients.push_back(std::move(g));
      }
    }
    if (q.profile) {
      const detail::HeadList& lse = in.gradients[3];
      std::vector<BoundsMatrix> exact;
      std::vector<Eigen::MatrixXd> allowed;
      if (q.candidate) {
        for (const HeadBudget& h : budgets) allowed.push_back(h.out);
        out.out_budget = judge_budget(in.candidate.get(), budget_enclosures, allowed);
      }
      if (!lse.get().empty()) {
        allowed.clear();
        for (const HeadBudget& h : budgets) {
          exact.push_back(h.exact_lse);
          allowed.emplace_back(h.lse);
        }
        out.lse_budget = judge_budget(lse.get(), exact, allowed);
      }
      for (const auto& [role, verdict] : {std::pair{"out", &out.out_budget}, {"lse", &out.lse_budget}})
        if (*verdict && (*verdict)->verdict == ToleranceVerdict::exceeded &&
            std::find(out.exceeded.begin(), out.exceeded.end(), role) == out.exceeded.end())
          out.exceeded.push_back(role);
    }
  } catch (const input_error& e) {
    throw input_error(std::string("check-kernel: ") + e.what(), e.subject());
  }
  out.q_shape = q.q.tensor.shape;
  out.k_shape = q.k.tensor.shape;
  out.v_shape = q.v.tensor.shape;
  out.q_dtype = q.q.tensor.dtype;
  out.heads = in.q.get().size();
  if (packed) {
    // Head t = b H + h of sequence b: the worst entry's (sequence, head) from a (B, H) layout,
    // its row within the sequence turned into a packed token by the offsets.
    out.cu_seqlens_q = in.cu_seqlens_q;
    out.cu_seqlens_k = in.cu_seqlens_k;
    const std::size_t sequences = out.cu_seqlens_q.size() - 1;
    out.layout.shape = {sequences, q.q.tensor.shape[1], 1, 1};
    out.kv_layout.shape = {sequences, q.k.tensor.shape[1], 1, 1};
    out.packed_heads = in.packed_heads;
  } else {
    out.layout.shape = q.q.tensor.shape;
    out.kv_layout.shape = q.k.tensor.shape;
  }
  if (q.reference) {
    out.reference_name = q.reference->name;
    out.reference_dtype = q.reference->tensor.dtype;
  }
  if (q.dout) {
    out.dout_name = q.dout->name;
    out.dout_dtype = q.dout->tensor.dtype;
  }
  out.scale_text = q.options.scale ? format_significant(Rational(*q.options.scale), 17)
                                   : "1/sqrt(" + std::to_string(in.q.get().at(0).cols()) + ")";
  out.mask_name = in.mask_name;
  if (in.options.empty_rows == EmptyRows::zero) {
    std::size_t empty = 0;
    for (std::size_t t = 0; t < in.q.get().size(); ++t)
      if (const Mask* m = mask_of(in.options, t))
        for (Eigen::Index i = 0; i < m->size(); ++i) empty += m->allowed_in_row(i) == 0 ? 1 : 0;
    out.empty_rows = empty;
  }
  if (q.bias) out.bias_name = q.bias->name;
  out.fp8_format = q.fp8_format;
  if (q.dropout_mask) out.dropout_p = q.dropout_p;
  for (const auto& [f, name] : {std::pair{&q.q_descale, "q"}, std::pair{&q.k_descale, "k"}, std::pair{&q.v_descale, "v"}})
    if (*f) out.descaled.push_back(name);
  out.softcap = in.options.softcap;
  out.alibi_slopes = in.options.alibi_slopes;
  out.sinks = in.options.sinks;
  if (!in.options.alibi_slopes.empty())
    out.alibi_alignment = in.options.alignment == MaskAlignment::bottom_right ? "bottom-right" : "top-left";
  out.max_error = q.max_error;
  out.max_error_text = max_error_text(q);
  out.rtol = q.rtol;
  out.max_ratio = q.max_ratio;
  if (q.max_ratio) out.ratio_atol = ratio_atol;
  guard_result(out);
  return out;
}

}  // namespace

}  // namespace attnrank
