// The kernel check's writers (analysis/kernel_analysis.hpp): one JSON and one text
// report for the CLI and Python.
#include <attnrank/analysis/kernel_analysis.hpp>

#include <attnrank/analysis/detail/kernel_inputs.hpp>
#include <attnrank/analysis/document.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace attnrank {
namespace {

using nlohmann::json;

constexpr const char* symbols[] = {"dQ", "dK", "dV", "lse", "dsinks"};

/// How a result's matrices are laid out: the tensor's leading shape, and with packed sequences
/// the offsets that turn (sequence, row) into a packed token.
struct Layout {
  const DoubleTensor& leading;
  const std::vector<std::size_t>& offsets;  ///< empty: dense
  const std::vector<std::size_t>* heads;    ///< packed query heads: each matrix's b H + h
  bool by_head = false;                     ///< dsinks: one entry per head, its row the head
  std::vector<std::size_t> leading_index(std::size_t t) const {
    return leading.leading_index(heads ? (*heads)[t] : t);
  }
};

/// Q's layout for the output, dQ and lse; K's for dK and dV (one per K/V head, every one checked).
Layout layout_of(const KernelAnalysis& k, const std::string& role) {
  const bool keys = role == "dk" || role == "dv";
  const bool mapped = !keys && !k.packed_heads.empty();
  return {keys ? k.kv_layout : k.layout, keys ? k.cu_seqlens_k : k.cu_seqlens_q, mapped ? &k.packed_heads : nullptr,
          role == "dsinks"};
}

json place_json(const Layout& l, const OutputError& e) {
  if (l.by_head) return {{"head", e.worst_row}};
  const std::vector<std::size_t> lead = l.leading_index(e.worst_matrix);
  json j;
  if (!l.offsets.empty()) {
    j["sequence"] = lead[0];
    j["token"] = l.offsets[lead[0]] + static_cast<std::size_t>(e.worst_row);
  } else if (lead.size() == 2) {
    j["batch"] = lead[0];
  }
  if (!lead.empty()) j["head"] = lead.back();
  j["row"] = e.worst_row;
  j["column"] = e.worst_column;
  return j;
}

std::string place_text(const Layout& l, const OutputError& e) {
  if (l.by_head) return "head " + std::to_string(e.worst_row) + " (0-based)";
  const std::vector<std::size_t> lead = l.leading_index(e.worst_matrix);
  std::string s;
  if (!l.offsets.empty())
    s += "token " + std::to_string(l.offsets[lead[0]] + static_cast<std::size_t>(e.worst_row)) + " (sequence " +
         std::to_string(lead[0]) + ", row " + std::to_string(e.worst_row) + "), ";
  else if (lead.size() == 2)
    s += "batch " + std::to_string(lead[0]) + ", ";
  if (!lead.empty()) s += "head " + std::to_string(lead.back()) + ", ";
  if (l.offsets.empty()) s += "row " + std::to_string(e.worst_row) + ", ";
  return s + "column " + std::to_string(e.worst_column) + " (0-based)";
}

std::string lower_text(double x) { return std::isfinite(x) ? format_lower_bound(x, 4) : "inf"; }
std::string upper_text(double x) { return std::isfinite(x) ? format_upper_bound(x, 4) : "inf"; }

json error_json(const Layout& q, const OutputError& e, const std::string& name, const std::string& dtype) {
  json j = {{"file", name},
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
  if (e.infinity_missed > 0) j["infinity_missed"] = e.infinity_missed;
  if (e.ulps) {
    json bins = json::object();
    const char* names[] = {"at_most_half", "at_most_1", "at_most_2", "at_most_4", "at_most_16", "above_16"};
    for (std::size_t b = 0; b < e.ulps->histogram.size(); ++b) bins[names[b]] = e.ulps->histogram[b];
    j["ulps"] = {{"format", e.ulps->format},
                 {"max_lower", lower_text(e.ulps->max_lower)},
                 {"max_upper", upper_text(e.ulps->max_upper)},
                 {"histogram", bins}};
  }
  return j;
}

std::string error_text(const Layout& q, const OutputError& e, const std::string& label, const std::string& name,
                       const std::string& dtype, const std::string& symbol = "O") {
  const auto pad = [&](std::string text) {  // the columns stay aligned for every symbol
    text.resize(std::max<std::size_t>(text.size(), 31), ' ');
    return text;
  };
  std::ostringstream s;
  s << label << " (" << name << ", " << dtype << "):\n";
  if (e.nonfinite > 0) s << "  " << e.nonfinite << " entries are NaN or infinite; the first at " << place_text(q, e) << "\n";
  if (e.infinity_missed > 0)
    s << "  " << e.infinity_missed << " entries are finite where the exact value is +inf (FlashAttention's "
      << "logsumexp of a row without a key)" << (e.nonfinite > 0 ? "" : "; the first at " + place_text(q, e)) << "\n";
  s << "  " << pad("max |" + symbol + " - exact|") << " in [" << lower_text(e.max_abs_error_lower) << ", "
    << upper_text(e.max_abs_error_upper) << "]\n";
  s << "  " << pad("max |" + symbol + " - exact| / max |exact|") << " in [" << lower_text(e.max_rel_error_lower) << ", "
    << upper_text(e.max_rel_error_upper) << "]\n";
  s << "  " << pad("mean |" + symbol + " - exact|") << " in [" << lower_text(e.mean_abs_error_lower) << ", "
    << upper_text(e.mean_abs_error_upper) << "]\n";
  s << "  " << pad("RMS of " + symbol + " - exact") << " in [" << lower_text(e.rms_error_lower) << ", "
    << upper_text(e.rms_error_upper) << "]\n";
  if (!e.infinite()) s << "  largest proven error at " << place_text(q, e) << "\n";
  if (e.ulps) {
    s << "  " << pad("max |" + symbol + " - exact| / ulp(exact)") << " in [" << lower_text(e.ulps->max_lower) << ", "
      << upper_text(e.ulps->max_upper) << "] ulps of " << e.ulps->format << "; entries by ulps (upper ends):";
    const char* names[] = {"<= 0.5", "<= 1", "<= 2", "<= 4", "<= 16", "> 16"};
    for (std::size_t b = 0; b < e.ulps->histogram.size(); ++b) s << (b ? ", " : " ") << names[b] << ": " << e.ulps->histogram[b];
    s << "\n";
  }
  return s.str();
}

std::string tolerance_text(ToleranceVerdict v, const char* what) {
  switch (v) {
    case ToleranceVerdict::within: return std::string("within (") + what + " is proven at most the tolerance)";
    case ToleranceVerdict::exceeded: return std::string("exceeded (") + what + " is proven larger): exit 3";
    case ToleranceVerdict::undecided: break;
  }
  return std::string("undecided (the bounds straddle the tolerance; fallback always or more bits narrow them)");
}


}  // namespace

namespace {

/// The tolerance verdicts of one tensor, as JSON keys of its object.
void verdicts_json(json& j, const KernelAnalysis& k, const std::optional<ToleranceVerdict>& error_verdict,
                   const std::optional<ToleranceVerdict>& ratio_verdict) {
  if (error_verdict) j["max_error_verdict"] = to_string(*error_verdict);
  if (ratio_verdict) j["max_ratio_verdict"] = to_string(*ratio_verdict);
  (void)k;
}

/// The budget verdict's worst entry as an OutputError's, for place_json / place_text.
OutputError budget_place(const BudgetVerdict& b) {
  OutputError e;
  e.worst_matrix = b.worst_matrix;
  e.worst_row = b.worst_row;
  e.worst_column = b.worst_column;
  return e;
}

json budget_json(const KernelAnalysis& k, const BudgetVerdict& b, const std::string& role) {
  return {{"verdict", to_string(b.verdict)},
          {"usage_lower", lower_text(b.usage_lower)},
          {"usage_upper", upper_text(b.usage_upper)},
          {"worst", place_json(layout_of(k, role), budget_place(b))},
          {"budget_at_worst", upper_text(b.budget_at_worst)},
          {"max_budget", upper_text(b.max_budget)},
          {"nonfinite", b.nonfinite}};
}

std::string budget_text(const KernelAnalysis& k, const BudgetVerdict& b, const std::string& role) {
  std::ostringstream s;
  s << "  " << role << ": " << (b.verdict == ToleranceVerdict::within     ? "within budget"
                               : b.verdict == ToleranceVerdict::exceeded ? "EXCEEDED budget (proven): exit 3"
                                                                          : "undecided (the bounds straddle the budget)")
    << "; max |error| / budget in [" << lower_text(b.usage_lower) << ", " << upper_text(b.usage_upper) << "], largest at "
    << place_text(layout_of(k, role), budget_place(b)) << " (budget there " << upper_text(b.budget_at_worst)
    << "; largest budget " << upper_text(b.max_budget) << ")\n";
  return s.str();
}

json gradient_json(const KernelAnalysis& k, const GradientReport& g) {
  const Layout layout = layout_of(k, g.role);
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

std::vector<TensorVerdict> tensor_verdicts(const KernelAnalysis& k) {
  std::vector<TensorVerdict> out;
  const auto add = [&](const std::string& tensor, const std::optional<ToleranceVerdict>& error,
                       const std::optional<ToleranceVerdict>& ratio) {
    if (error) out.push_back({tensor, "max_error", *error});
    if (ratio) out.push_back({tensor, "max_ratio", *ratio});
  };
  if (k.result) add("out", k.error_verdict, k.ratio_verdict);
  if (k.ulps_verdict) out.push_back({"out", "max_ulps", *k.ulps_verdict});
  if (k.out_budget) out.push_back({"out", "budget", k.out_budget->verdict});
  for (const GradientReport& g : k.gradients) {
    add(g.role, g.error_verdict, g.ratio_verdict);
    if (g.role == "lse" && k.lse_budget) out.push_back({"lse", "budget", k.lse_budget->verdict});
  }
  return out;
}

std::optional<ToleranceVerdict> overall_verdict(const KernelAnalysis& k) {
  std::vector<ToleranceVerdict> all;
  for (const TensorVerdict& v : tensor_verdicts(k)) all.push_back(v.verdict);
  return combined_verdict(all);
}

json to_json(const KernelAnalysis& k) {
  json j = {{"shape", k.q_shape}, {"heads", k.heads}, {"mask", k.mask_name}, {"scale", k.scale_text}};
  if (k.empty_rows) j["empty_rows"] = {{"convention", "zero"}, {"rows", *k.empty_rows}};
  if (k.softcap > 0) j["softcap"] = shortest_decimal(k.softcap);
  if (!k.alibi_slopes.empty()) {
    j["alibi_slopes"] = k.alibi_slopes;
    j["alibi_alignment"] = k.alibi_alignment;
  }
  if (!k.sinks.empty()) j["sinks"] = k.sinks;
  if (!k.bias_name.empty()) j["bias"] = k.bias_name;
  if (!k.fp8_format.empty()) j["fp8_format"] = k.fp8_format;
  if (k.dropout_p) j["dropout_p"] = shortest_decimal(*k.dropout_p);
  if (!k.descaled.empty()) j["descaled"] = k.descaled;
  if (!k.cu_seqlens_q.empty())
    j["varlen"] = {{"sequences", k.cu_seqlens_q.size() - 1}, {"cu_seqlens_q", k.cu_seqlens_q}, {"cu_seqlens_k", k.cu_seqlens_k}};
  if (k.result) {
    const KernelCheck& r = *k.result;
    j["method"] = r.method;
    j["products"] = r.products.empty() ? json(nullptr) : json(r.products);
    j["bits"] = r.bits;
    j["enclosure_width"] = upper_text(r.enclosure_width);
    j["candidate"] = error_json(layout_of(k, "out"), r.candidate, k.candidate_name, k.candidate_dtype);
    if (r.reference) {
      j["reference"] = error_json(layout_of(k, "out"), *r.reference, k.reference_name, k.reference_dtype);
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
    if (k.rtol) j["rtol"] = shortest_decimal(*k.rtol);
  }
  if (k.max_ulps) {
    j["max_ulps"] = shortest_decimal(*k.max_ulps);
    if (k.ulps_verdict) j["max_ulps_verdict"] = to_string(*k.ulps_verdict);
  }
  if (k.max_ratio) {
    j["max_ratio"] = shortest_decimal(*k.max_ratio);
    j["ratio_atol"] = shortest_decimal(k.ratio_atol.value_or(0));
    if (k.ratio_verdict) j["max_ratio_verdict"] = to_string(*k.ratio_verdict);
  }
  if (k.max_error || k.max_ratio || k.max_ulps || k.profile) j["exceeded"] = k.exceeded;
  if (const std::optional<ToleranceVerdict> overall = overall_verdict(k)) {
    json verdicts = json::object();
    for (const TensorVerdict& v : tensor_verdicts(k)) verdicts[v.tensor][v.criterion] = to_string(v.verdict);
    j["verdicts"] = verdicts;
    j["verdict"] = to_string(*overall);
  }
  if (k.profile) {
    json budget = {{"profile", to_json(*k.profile)}};
    if (k.out_budget) budget["out"] = budget_json(k, *k.out_budget, "out");
    if (k.lse_budget) budget["lse"] = budget_json(k, *k.lse_budget, "lse");
    j["budget"] = budget;
  }
  if (!k.notes.empty()) j["notes"] = k.notes;
  return json_document(j, "check-kernel");
}

namespace {

void tolerances_text(std::ostringstream& s, const KernelAnalysis& k, const std::string& label,
                     const std::optional<ToleranceVerdict>& error_verdict,
                     const std::optional<ToleranceVerdict>& ratio_verdict, const std::optional<OutputError>& reference) {
  if (error_verdict) {
    s << label << "max_error " << k.max_error_text;
    if (k.rtol) s << ", rtol " << shortest_decimal(*k.rtol) << " (max_error + rtol max |exact|)";
    s << ": " << tolerance_text(*error_verdict, "the error") << "\n";
  }
  if (k.max_ratio && reference) {
    s << label << "max_ratio " << shortest_decimal(*k.max_ratio);
    if (k.ratio_atol && *k.ratio_atol > 0) s << ", ratio_atol " << shortest_decimal(*k.ratio_atol);
    s << ": ";
    if (reference->infinite()) s << "not judged: the reference's error is infinite (NaN or infinite entries)\n";
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
  if (k.empty_rows)
    s << "; " << *k.empty_rows << (*k.empty_rows == 1 ? " query row" : " query rows")
      << " without a key (FlashAttention's output 0)";
  if (k.softcap > 0) s << "; softcap " << shortest_decimal(k.softcap);
  if (!k.alibi_slopes.empty()) s << "; ALiBi (" << k.alibi_alignment << ")";
  if (!k.sinks.empty()) s << "; sinks";
  if (!k.bias_name.empty()) s << "; bias " << k.bias_name;
  if (!k.fp8_format.empty()) s << "; FP8 codes read as " << k.fp8_format;
  if (k.dropout_p) s << "; dropout p = " << shortest_decimal(*k.dropout_p) << " with its keep-mask";
  for (const std::string& d : k.descaled) s << "; " << d << "_descale";
  if (!k.cu_seqlens_q.empty()) s << "; " << k.cu_seqlens_q.size() - 1 << " packed sequences";
  s << "\n";
  if (k.result) {
    const KernelCheck& r = *k.result;
    s << "Exact output enclosed by " << method_text(r.method, r.products, r.bits) << ", widths <= "
      << upper_text(r.enclosure_width) << "\n\n";
    s << error_text(layout_of(k, "out"), r.candidate, "candidate", k.candidate_name, k.candidate_dtype);
    if (r.reference) {
      s << error_text(layout_of(k, "out"), *r.reference, "reference", k.reference_name, k.reference_dtype);
      s << "\ncandidate error / reference error in [" << lower_text(r.ratio_lower) << ", " << upper_text(r.ratio_upper)
        << "]" << (r.reference->infinite() ? " (the reference's error is infinite)" : "") << "\n";
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
      const std::size_t i = static_cast<std::size_t>(std::find(std::begin(detail::kernel_roles), std::end(detail::kernel_roles), g.role) - std::begin(detail::kernel_roles));
      const Layout layout = layout_of(k, g.role);
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
  if (k.ulps_verdict)
    s << "\nmax_ulps " << shortest_decimal(*k.max_ulps) << ": " << tolerance_text(*k.ulps_verdict, "the error in ulps")
      << "\n";
  if (k.profile) {
    s << "\nError budget of profile " << k.profile->name
      << " (certified: the largest error any correct kernel of the profile may have on these inputs, entry by entry):\n";
    if (k.out_budget) s << budget_text(k, *k.out_budget, "out");
    if (k.lse_budget) s << budget_text(k, *k.lse_budget, "lse");
  }
  if (const std::optional<ToleranceVerdict> overall = overall_verdict(k)) {
    s << "\nverdict: " << to_string(*overall) << " (";
    bool first = true;
    for (const TensorVerdict& v : tensor_verdicts(k)) {
      s << (first ? "" : "; ") << v.tensor << " " << v.criterion << " " << to_string(v.verdict);
      first = false;
    }
    s << ")\n";
  }
  for (const std::string& note : k.notes) s << "\nNote: " << note << "\n";
  return s.str();
}


}  // namespace attnrank
