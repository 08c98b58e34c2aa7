// attnrank check-kernel: the certified error of an attention kernel's output
// (and of a reference's), against the exact attention of the same Q, K, V.
#include "commands.hpp"
#include "run.hpp"

#include <attnrank/attention/kernel_check.hpp>
#include <attnrank/io/binary_array.hpp>
#include <attnrank/io/double_tensor.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace attnrank::cli {
namespace {

using nlohmann::json;

std::string shape_list(const std::vector<std::size_t>& shape) { return shape_text(shape); }

/// Checks that every tensor has Q's leading dimensions (one matrix per head).
void require_same_heads(const DoubleTensor& q, const DoubleTensor& other, const std::string& name,
                        const std::string& path) {
  const auto leading = [](const DoubleTensor& t) {
    return std::vector<std::size_t>(t.shape.begin(), t.shape.end() - 2);
  };
  if (leading(q) != leading(other))
    throw input_error(path + " (" + name + ") has shape " + shape_list(other.shape) + " but Q has " +
                      shape_list(q.shape) + ": the dimensions before the last two (batch, heads) must agree");
}

/// "b 0, h 3, row 17, column 5" for matrix t of a tensor of `shape`.
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

std::string error_lower_text(double x) { return std::isfinite(x) ? format_lower_bound(x, 4) : "inf"; }
std::string error_upper_text(double x) { return std::isfinite(x) ? format_upper_bound(x, 4) : "inf"; }

json error_json(const DoubleTensor& q, const OutputError& e, const std::string& path, const std::string& dtype) {
  return {{"file", path},
          {"dtype", dtype},
          {"max_abs_error_lower", error_lower_text(e.max_abs_error_lower)},
          {"max_abs_error_upper", error_upper_text(e.max_abs_error_upper)},
          {"max_rel_error_lower", error_lower_text(e.max_rel_error_lower)},
          {"max_rel_error_upper", error_upper_text(e.max_rel_error_upper)},
          {"worst", place_json(q, e)},
          {"nonfinite", e.nonfinite}};
}

std::string error_text(const DoubleTensor& q, const OutputError& e, const std::string& label, const std::string& path,
                       const std::string& dtype) {
  std::ostringstream s;
  s << label << " (" << path << ", " << dtype << "):\n";
  if (e.nonfinite > 0)
    s << "  " << e.nonfinite << " entries are NaN or infinite; the first at " << place_text(q, e) << "\n";
  s << "  max |O - exact|              in [" << error_lower_text(e.max_abs_error_lower) << ", "
    << error_upper_text(e.max_abs_error_upper) << "]\n";
  s << "  max |O - exact| / max |exact| in [" << error_lower_text(e.max_rel_error_lower) << ", "
    << error_upper_text(e.max_rel_error_upper) << "]\n";
  if (e.nonfinite == 0) s << "  largest proven error at " << place_text(q, e) << "\n";
  return s.str();
}

}  // namespace

void add_check_kernel_command(CLI::App& app, std::string& out) {
  auto* cmd = app.add_subcommand(
      "check-kernel", "Certified error of an attention kernel's output O against the exact softmax(s Q K^T) V");
  struct Options {
    std::string q, k, v, candidate, reference, mask, fallback = "auto";
    std::string scale;
    unsigned bits = 128;
    std::string max_error;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  const std::string arrays = " (.npy or F.safetensors:NAME; shape (N, d), (H, N, d) or (B, H, N, d); any float dtype)";
  cmd->add_option("--q", opt->q, "Queries Q" + arrays)->required();
  cmd->add_option("--k", opt->k, "Keys K, (..., N_k, d)")->required();
  cmd->add_option("--v", opt->v, "Values V, (..., N_k, d_v)")->required();
  cmd->add_option("--candidate", opt->candidate, "The kernel's output O, (..., N, d_v)")->required();
  cmd->add_option("--reference", opt->reference, "A reference output (float32 or float64 attention, say) to compare with");
  cmd->add_option("--mask", opt->mask, "causal, none, or an N x N file of 0s and 1s (1: the query may attend)");
  cmd->add_option("--scale", opt->scale,
                  "Softmax scale s (default 1/sqrt(d)); the double nearest to it, as Python's float() reads it")
      ->type_name("FLOAT")  // a decimal, checked as every numeric option is (run.cpp); kept as text to round once
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            return (end && *end == '\0' && std::isfinite(x) && x > 0) ? "" : "'" + v + "' is not a positive number";
          },
          "", "positive number"));
  cmd->add_option("--fallback", opt->fallback,
                  "Recompute with MPFI when the double enclosures are too wide: auto (default: when affordable), "
                  "never, always")
      ->check(CLI::IsMember({"auto", "never", "always"}));
  cmd->add_option("--bits", opt->bits, "Precision of the MPFI fallback in bits (default 128)")
      ->check(CLI::Range(53u, max_precision_bits));
  cmd->add_option("--max-error", opt->max_error,
                  "Exit 3 when the candidate's certified max |O - exact| lower bound exceeds this (for CI)")
      ->type_name("FLOAT");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &out] {
    const ParseLimits& limits = input_limits();
    const DoubleTensor q = read_double_tensor(opt->q, limits);
    const DoubleTensor k = read_double_tensor(opt->k, limits);
    const DoubleTensor v = read_double_tensor(opt->v, limits);
    // A kernel's NaN or infinity is a finding to report (nonfinite), not bad input.
    const DoubleTensor c = read_double_tensor(opt->candidate, limits, NonFiniteElements::keep);
    require_same_heads(q, k, "K", opt->k);
    require_same_heads(q, v, "V", opt->v);
    require_same_heads(q, c, "the candidate", opt->candidate);
    std::optional<DoubleTensor> r;
    if (!opt->reference.empty()) {
      r = read_double_tensor(opt->reference, limits, NonFiniteElements::keep);
      require_same_heads(q, *r, "the reference", opt->reference);
    }
    double max_error = -1;
    if (!opt->max_error.empty()) {
      char* end = nullptr;
      max_error = std::strtod(opt->max_error.c_str(), &end);
      if (!(end && *end == '\0' && std::isfinite(max_error) && max_error >= 0))
        throw input_error("--max-error '" + opt->max_error + "' is not a non-negative number");
    }
    KernelCheckOptions options;
    if (!opt->scale.empty()) options.scale = std::strtod(opt->scale.c_str(), nullptr);
    const Eigen::Index n = q.matrices[0].rows();
    if (!opt->mask.empty()) {
      if (k.matrices[0].rows() != n && opt->mask != "none")
        throw input_error("--mask: Q has " + std::to_string(n) + " rows but K has " +
                          std::to_string(k.matrices[0].rows()) + "; a mask needs as many queries as keys");
      options.mask = read_mask_input(opt->mask, n, opt->q + " (Q)");
    }
    options.fallback = opt->fallback == "never"    ? FallbackPolicy::never
                       : opt->fallback == "always" ? FallbackPolicy::always
                                                   : FallbackPolicy::automatic;
    options.fallback_bits = opt->bits;
    KernelCheck result;
    try {
      result = check_kernel(q.matrices, k.matrices, v.matrices, c.matrices, r ? &r->matrices : nullptr, options);
    } catch (const input_error& e) {
      throw input_error(std::string("check-kernel: ") + e.what(), e.subject());
    }
    const std::string scale_text =
        options.scale ? format_significant(Rational(*options.scale), 17) : "1/sqrt(" + std::to_string(q.matrices[0].cols()) + ")";
    const std::string mask_name = options.mask ? options.mask->name() : "none";
    const std::string method_text =
        result.method == "double" ? "the certified double tier (directed rounding)"
                                  : "MPFI at " + std::to_string(result.bits) + " bits (the double enclosures were too wide)";
    if (opt->json) {
      json j = {{"shape", q.shape},
                {"heads", q.matrices.size()},
                {"mask", mask_name},
                {"scale", scale_text},
                {"method", result.method},
                {"bits", result.bits},
                {"enclosure_width", error_upper_text(result.enclosure_width)},
                {"candidate", error_json(q, result.candidate, opt->candidate, c.dtype)}};
      if (r) {
        j["reference"] = error_json(q, *result.reference, opt->reference, r->dtype);
        j["ratio_lower"] = error_lower_text(result.ratio_lower);
        j["ratio_upper"] = error_upper_text(result.ratio_upper);
      }
      if (!result.fallback_skipped.empty()) j["fallback_skipped"] = result.fallback_skipped;
      if (max_error >= 0) {
        j["max_error"] = opt->max_error;
        j["max_error_exceeded"] = result.candidate.max_abs_error_lower > max_error;
      }
      out = json_document(j, "check-kernel");
    } else {
      std::ostringstream s;
      s << "Attention: " << q.matrices.size() << (q.matrices.size() == 1 ? " head" : " heads") << ", Q "
        << shape_list(q.shape) << " " << q.dtype << ", K " << shape_list(k.shape) << ", V " << shape_list(v.shape)
        << "; scale " << scale_text << "; mask " << mask_name << "\n";
      s << "Exact output enclosed by " << method_text << ", widths <= " << error_upper_text(result.enclosure_width) << "\n\n";
      s << error_text(q, result.candidate, "candidate", opt->candidate, c.dtype);
      if (r) {
        s << error_text(q, *result.reference, "reference", opt->reference, r->dtype);
        s << "\ncandidate error / reference error in [" << error_lower_text(result.ratio_lower) << ", "
          << error_upper_text(result.ratio_upper) << "]\n";
      }
      if (!result.fallback_skipped.empty()) s << "\nNote: " << result.fallback_skipped << "\n";
      if (max_error >= 0)
        s << "\n--max-error " << opt->max_error << ": "
          << (result.candidate.max_abs_error_lower > max_error ? "exceeded (the error is proven larger): exit 3"
                                                               : "not proven exceeded")
          << "\n";
      out = s.str();
    }
    if (max_error >= 0 && result.candidate.max_abs_error_lower > max_error) request_exit_code(3);
  });
}

}  // namespace attnrank::cli
