// The kernel check as an analysis and its writers (analysis/kernel_analysis.hpp).
#include <attnrank/analysis/kernel_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/io/binary_array.hpp>
#include <attnrank/numbers/decimal.hpp>

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

}  // namespace

KernelAnalysis analyze_kernel(const KernelQuestion& q) {
  require_same_heads(q.q, q.k, "K");
  require_same_heads(q.q, q.v, "V");
  require_same_heads(q.q, q.candidate, "the candidate");
  if (q.reference) require_same_heads(q.q, *q.reference, "the reference");
  if (q.max_error && !(std::isfinite(*q.max_error) && *q.max_error >= 0))
    throw input_error("--max-error '" + q.max_error_text + "' is not a non-negative number");
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
  out.max_error_exceeded = q.max_error && out.result.candidate.max_abs_error_lower > *q.max_error;
  return out;
}

json to_json(const KernelAnalysis& k) {
  const KernelCheck& r = k.result;
  json j = {{"shape", k.q_shape},
            {"heads", k.heads},
            {"mask", k.mask_name},
            {"scale", k.scale_text},
            {"method", r.method},
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
  }
  return json_document(j, "check-kernel");
}

std::string to_text(const KernelAnalysis& k) {
  const KernelCheck& r = k.result;
  const std::string method = r.method == "double" ? "the certified double tier (directed rounding)"
                                                  : "MPFI at " + std::to_string(r.bits) +
                                                        " bits (the double enclosures were too wide)";
  std::ostringstream s;
  s << "Attention: " << k.heads << (k.heads == 1 ? " head" : " heads") << ", Q " << shape_text(k.q_shape) << " "
    << k.q_dtype << ", K " << shape_text(k.k_shape) << ", V " << shape_text(k.v_shape) << "; scale " << k.scale_text
    << "; mask " << k.mask_name << "\n";
  s << "Exact output enclosed by " << method << ", widths <= " << upper_text(r.enclosure_width) << "\n\n";
  s << error_text(k.layout, r.candidate, "candidate", k.candidate_name, k.candidate_dtype);
  if (r.reference) {
    s << error_text(k.layout, *r.reference, "reference", k.reference_name, k.reference_dtype);
    s << "\ncandidate error / reference error in [" << lower_text(r.ratio_lower) << ", " << upper_text(r.ratio_upper)
      << "]\n";
  }
  if (!r.fallback_skipped.empty()) s << "\nNote: " << r.fallback_skipped << "\n";
  if (k.max_error)
    s << "\n--max-error " << k.max_error_text << ": "
      << (k.max_error_exceeded ? "exceeded (the error is proven larger): exit 3" : "not proven exceeded") << "\n";
  return s.str();
}

}  // namespace attnrank
