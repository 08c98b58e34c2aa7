// The kernel check as an analysis and its writers (analysis/kernel_analysis.hpp).
#include <attnrank/analysis/kernel_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/io/binary_array.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <charconv>
#include <cmath>
#include <sstream>

namespace attnrank {
namespace {

using nlohmann::json;

/// Every tensor has Q's leading dimensions (one matrix per head).
void require_same_heads(const NamedTensor& q, const NamedTensor& other, const std::string& role) {
  const auto leading = [](const DoubleTensor& t) { return std::vector<std::size_t>(t.shape.begin(), t.shape.end() - 2); };
  if (leading(q.tensor) != leading(other.tensor))
    throw input_error(other.name + " (" + role + ") has shape " + shape_text(other.tensor.shape) + " but Q has " +
                      shape_text(q.tensor.shape) + ": the dimensions before the last two (batch, heads) must agree");
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
          {"worst", place_json(q, e)},
          {"nonfinite", e.nonfinite}};
}

std::string error_text(const DoubleTensor& q, const OutputError& e, const std::string& label, const std::string& name,
                       const std::string& dtype) {
  std::ostringstream s;
  s << label << " (" << name << ", " << dtype << "):\n";
  if (e.nonfinite > 0) s << "  " << e.nonfinite << " entries are NaN or infinite; the first at " << place_text(q, e) << "\n";
  s << "  max |O - exact|              in [" << lower_text(e.max_abs_error_lower) << ", "
    << upper_text(e.max_abs_error_upper) << "]\n";
  s << "  max |O - exact| / max |exact| in [" << lower_text(e.max_rel_error_lower) << ", "
    << upper_text(e.max_rel_error_upper) << "]\n";
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

KernelAnalysis analyze_kernel(const KernelQuestion& q) {
  require_same_heads(q.q, q.k, "K");
  require_same_heads(q.q, q.v, "V");
  require_same_heads(q.q, q.candidate, "the candidate");
  if (q.reference) require_same_heads(q.q, *q.reference, "the reference");
  if (q.max_error && !(std::isfinite(*q.max_error) && *q.max_error >= 0))
    throw input_error("--max-error '" + q.max_error_text + "' is not a non-negative number");
  if (q.rtol && !(std::isfinite(*q.rtol) && *q.rtol >= 0))
    throw input_error(std::string("--rtol ") + std::to_string(*q.rtol) + " is not a non-negative number");
  if (q.rtol && !q.max_error) throw input_error("--rtol needs --max-error (the tolerance is max_error + rtol max |exact|)");
  if (q.max_ratio && !(std::isfinite(*q.max_ratio) && *q.max_ratio >= 0))
    throw input_error(std::string("--max-ratio ") + std::to_string(*q.max_ratio) + " is not a non-negative number");
  if (q.max_ratio && !q.reference)
    throw input_error("--max-ratio needs --reference (it bounds the candidate's error by a multiple of the reference's)");
  const Eigen::Index n = q.q.tensor.matrices.at(0).rows();
  if (q.options.mask) {
    if (q.k.tensor.matrices.at(0).rows() != n)
      throw input_error("--mask: Q has " + std::to_string(n) + " rows but K has " +
                        std::to_string(q.k.tensor.matrices[0].rows()) + "; a mask needs as many queries as keys");
    if (q.options.mask->size() != n)
      throw input_error("the mask is " + std::to_string(q.options.mask->size()) + " x " +
                        std::to_string(q.options.mask->size()) + " but " + q.q.name + " (Q) has " + std::to_string(n) +
                        " rows; they must match");
  }
  KernelAnalysis out;
  try {
    out.result = check_kernel(q.q.tensor.matrices, q.k.tensor.matrices, q.v.tensor.matrices, q.candidate.tensor.matrices,
                              q.reference ? &q.reference->tensor.matrices : nullptr, q.options);
  } catch (const input_error& e) {
    throw input_error(std::string("check-kernel: ") + e.what(), e.subject());
  }
  out.q_shape = q.q.tensor.shape;
  out.k_shape = q.k.tensor.shape;
  out.v_shape = q.v.tensor.shape;
  out.q_dtype = q.q.tensor.dtype;
  out.heads = q.q.tensor.matrices.size();
  out.layout.shape = q.q.tensor.shape;
  out.candidate_name = q.candidate.name;
  out.candidate_dtype = q.candidate.tensor.dtype;
  if (q.reference) {
    out.reference_name = q.reference->name;
    out.reference_dtype = q.reference->tensor.dtype;
  }
  out.scale_text = q.options.scale ? format_significant(Rational(*q.options.scale), 17)
                                   : "1/sqrt(" + std::to_string(q.q.tensor.matrices[0].cols()) + ")";
  out.mask_name = q.options.mask ? q.options.mask->name() : "none";
  out.max_error = q.max_error;
  out.max_error_text = q.max_error_text;
  out.rtol = q.rtol;
  out.max_ratio = q.max_ratio;
  if (q.max_error) out.error_verdict = judge_error(out.result.candidate, {*q.max_error, q.rtol.value_or(0)});
  if (q.max_ratio) out.ratio_verdict = judge_ratio(out.result, *q.max_ratio);
  out.max_error_exceeded = out.error_verdict == ToleranceVerdict::exceeded;
  guard_result(out);
  return out;
}

json to_json(const KernelAnalysis& k) {
  const KernelCheck& r = k.result;
  json j = {{"shape", k.q_shape},
            {"heads", k.heads},
            {"mask", k.mask_name},
            {"scale", k.scale_text},
            {"method", r.method},
            {"products", r.products.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.products)},
            {"bits", r.bits},
            {"enclosure_width", upper_text(r.enclosure_width)},
            {"candidate", error_json(k.layout, r.candidate, k.candidate_name, k.candidate_dtype)}};
  if (r.reference) {
    j["reference"] = error_json(k.layout, *r.reference, k.reference_name, k.reference_dtype);
    j["ratio_lower"] = lower_text(r.ratio_lower);
    j["ratio_upper"] = upper_text(r.ratio_upper);
  }
  if (!r.fallback_skipped.empty()) j["fallback_skipped"] = r.fallback_skipped;
  if (k.max_error) {
    j["max_error"] = k.max_error_text;
    j["max_error_exceeded"] = k.max_error_exceeded;
    j["max_error_verdict"] = to_string(*k.error_verdict);
    if (k.rtol) j["rtol"] = shortest_text(*k.rtol);
  }
  if (k.max_ratio) {
    j["max_ratio"] = shortest_text(*k.max_ratio);
    j["max_ratio_verdict"] = to_string(*k.ratio_verdict);
  }
  return json_document(j, "check-kernel");
}

std::string to_text(const KernelAnalysis& k) {
  const KernelCheck& r = k.result;
  const std::string method =
      r.method != "double"        ? "MPFI at " + std::to_string(r.bits) + " bits (the double enclosures were too wide)"
      : r.products == "directed" ? std::string("the certified double tier (directed rounding)")
                                 : std::string("the certified double tier (a priori bounded products)");
  std::ostringstream s;
  s << "Attention: " << k.heads << (k.heads == 1 ? " head" : " heads") << ", Q " << shape_text(k.q_shape) << " "
    << k.q_dtype << ", K " << shape_text(k.k_shape) << ", V " << shape_text(k.v_shape) << "; scale " << k.scale_text
    << "; mask " << k.mask_name << "\n";
  s << "Exact output enclosed by " << method << ", widths <= " << upper_text(r.enclosure_width) << "\n\n";
  s << error_text(k.layout, r.candidate, "candidate", k.candidate_name, k.candidate_dtype);
  if (r.reference) {
    s << error_text(k.layout, *r.reference, "reference", k.reference_name, k.reference_dtype);
    s << "\ncandidate error / reference error in [" << lower_text(r.ratio_lower) << ", " << upper_text(r.ratio_upper)
      << "]" << (r.reference->nonfinite > 0 ? " (the reference is not finite: its error is infinite)" : "") << "\n";
  }
  if (!r.fallback_skipped.empty()) s << "\nNote: " << r.fallback_skipped << "\n";
  if (k.max_error) {
    s << "\n--max-error " << k.max_error_text;
    if (k.rtol) s << " --rtol " << shortest_text(*k.rtol) << " (max_error + rtol max |exact|)";
    s << ": " << tolerance_text(*k.error_verdict, "the error") << "\n";
  }
  if (k.max_ratio) {
    s << (k.max_error ? "" : "\n") << "--max-ratio " << shortest_text(*k.max_ratio) << ": ";
    if (r.reference && r.reference->nonfinite > 0) s << "not judged: the reference has NaN or infinite entries\n";
    else s << tolerance_text(*k.ratio_verdict, "the error ratio") << "\n";
  }
  return s.str();
}

}  // namespace attnrank
