#pragma once
// An attention kernel's output checked as one analysis (attention/kernel_check.hpp):
// tensors of one or more heads in, certified bounds on the true error of the
// candidate (and of a reference, with their ratio) out, and one JSON writer and
// one text writer for the CLI and Python.
//
// Guarantee: max_abs_error_lower <= max |O - softmax(s Q K^T) V| <= max_abs_error_upper
// for the exact attention of the exact inputs. With a tolerance
// (max_error + rtol max |E|, or max_ratio times the reference's error) the
// verdict is proven either way or `undecided` (attention/kernel_tolerance.hpp);
// `max_error_exceeded` is true only when the error is proven larger.

#include <attnrank/attention/kernel_check.hpp>
#include <attnrank/attention/kernel_tolerance.hpp>
#include <attnrank/io/double_tensor.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace attnrank {

/// One tensor of the question with the name messages and reports use for it.
struct NamedTensor {
  DoubleTensor tensor;
  std::string name;
};

struct KernelQuestion {
  NamedTensor q, k, v, candidate;
  std::optional<NamedTensor> reference;
  KernelCheckOptions options;         ///< scale, mask, fallback policy and bits
  std::optional<double> max_error;    ///< a CI gate: exceeded when proven larger
  std::string max_error_text;         ///< max_error as the user wrote it (printed back)
  std::optional<double> rtol;         ///< with max_error: the tolerance max_error + rtol max |E|
  std::optional<double> max_ratio;    ///< candidate error <= max_ratio x reference error (needs a reference)
};

struct KernelAnalysis {
  std::vector<std::size_t> q_shape, k_shape, v_shape;
  std::string q_dtype, candidate_name, candidate_dtype, reference_name, reference_dtype;
  std::size_t heads = 0;
  DoubleTensor layout;     ///< Q's shape (for the worst entry's batch and head), no data
  std::string scale_text;  ///< the scale as used: 17 digits, or "1/sqrt(d)"
  std::string mask_name = "none";
  KernelCheck result;
  std::optional<double> max_error;
  std::string max_error_text;
  std::optional<double> rtol, max_ratio;
  std::optional<ToleranceVerdict> error_verdict, ratio_verdict;  ///< with max_error / max_ratio
  bool max_error_exceeded = false;  ///< error_verdict is exceeded
};

/// Checks the shapes (every tensor has Q's leading dimensions; a mask needs as
/// many queries as keys) and runs check_kernel. input_error names the tensor.
KernelAnalysis analyze_kernel(const KernelQuestion& q);

nlohmann::json to_json(const KernelAnalysis& k);  ///< "attnrank/check-kernel/1"
std::string to_text(const KernelAnalysis& k);

}  // namespace attnrank
