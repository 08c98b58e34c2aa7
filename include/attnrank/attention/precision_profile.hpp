#pragma once
// A precision profile: the precision of each step a FlashAttention-style forward
// kernel performs, which is all attention/error_budget.hpp needs to bound the error
// of every correct implementation of it. Named profiles for the kernels that exist,
// and any other as a small JSON object.
//
// Guarantee: the named profiles are the constants below and nothing else; a profile
// read from JSON is validated (every unit roundoff in [0, 1/4), every count >= 1, a
// known format) or refused with an input_error naming the field, so a budget is
// never computed from a profile that cannot describe arithmetic.
//
// What each field models (the budget's derivation says how each enters):
//  * A format (bf16, fp16, fp32, fp8 e4m3 / e5m2, fp64) rounds to nearest:
//    |fl(x) - x| <= u |x| + eta, u its unit roundoff, eta half its smallest
//    subnormal spacing, for |x| up to its largest finite value.
//  * An accumulation of n terms errs by at most gamma_{n + extra_terms}(u) times the
//    sum of the terms' magnitudes, in any order (Higham, Accuracy and Stability of
//    Numerical Algorithms, 2nd ed., (3.4)-(3.5)). IEEE fp32 on CUDA cores: u = 2^-24,
//    extra_terms 0. Tensor-core fp32 accumulation is not IEEE (operands aligned to the
//    largest exponent and truncated inside each block multiply-add: Blanchard, Higham,
//    Lopez, Mary and Pranesh, SIAM J. Sci. Comput. 42(3), 2020; Fasi, Higham, Mikaitis
//    and Pranesh, PeerJ Comput. Sci. 7:e330, 2021): modelled as u = 2^-23 (truncation's
//    one ulp, twice nearest's half) with extra_terms = 17 (a block of up to 16 products
//    and the accumulator aligned together), which bounds both error sources.
//  * exp_relative: the exponential's relative error on its result (ex2.approx.f32: 2
//    ulps of fp32, 2^-22; a correctly rounded exp: 2^-24); argument_u: the unit
//    roundoff of the arithmetic forming its argument (scale, log2(e), max subtraction).
//  * flush_to_zero: fp32 results below 2^-126 flushed to 0 (CUDA's fast math): every fp32
//    step (a sum's addition, a product, exp, the division) may then err by 2^-126 absolute
//    besides its relative error; IEEE gradual underflow by 2^-150.
//  * min_block: the smallest key block, so a row is rescaled at most
//    ceil(N_k / min_block) - 1 times by the online softmax; splits: the most split-KV
//    partitions merged through their logsumexps (1: none).

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace attnrank {

/// A storage format that rounds to nearest (see the header comment).
struct NumberFormat {
  std::string name;   ///< "bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"
  double u = 0;       ///< unit roundoff
  double eta = 0;     ///< half the smallest subnormal spacing
  double max = 0;     ///< largest finite value
  int digits = 0;     ///< significand bits, the hidden one included
  int min_exponent = 0;  ///< exponent of the smallest normal number

  /// The spacing of the format's numbers at magnitude |x|: 2^(max(e, min_exponent) -
  /// digits + 1) with 2^e <= |x| < 2^(e+1) (the smallest subnormal spacing at 0): an
  /// ulp of x, exact (a power of two), non-decreasing in |x|.
  double ulp(double x) const;
};

/// The format of a dtype name (NumPy's and torch's spellings: "bfloat16", "float16",
/// "float32", "float64", "float8_e4m3fn", "float8_e5m2"; also "bf16", "fp16", "fp32",
/// "fp64", "fp8_e4m3", "fp8_e5m2"); input_error naming them otherwise.
NumberFormat number_format(const std::string& name);

/// An accumulation of n terms: error <= gamma_{n + extra_terms}(u) sum |terms|.
struct Accumulation {
  double u = 0x1p-24;
  long extra_terms = 0;
  bool tensor_core = false;  ///< how the JSON and reports name it ("ieee" or "tensor_core")
};
/// IEEE round-to-nearest in fp32, and tensor-core fp32 (see the header comment).
Accumulation ieee_fp32_sum();
Accumulation tensor_core_fp32_sum();

struct PrecisionProfile {
  std::string name;
  Accumulation scores = tensor_core_fp32_sum();  ///< Q K^T
  double argument_u = 0x1p-24;                   ///< the exponent's argument (fp32)
  double exp_relative = 0x1p-22;                 ///< exp / exp2 on its result
  NumberFormat probabilities;                    ///< P's storage before P V
  bool row_sum_of_stored = false;                ///< the row sum adds the stored P (else the unrounded one)
  Accumulation row_sums = ieee_fp32_sum();
  Accumulation pv = tensor_core_fp32_sum();      ///< P V
  double rescale_u = 0x1p-24;                    ///< the online rescales' products (fp32)
  double divide_u = 0x1p-24;                     ///< the final division by the row sum (fp32)
  double lse_u = 0x1p-24;                        ///< the logsumexp's log and add (fp32)
  NumberFormat output;                           ///< the output's storage
  long min_block = 16;                           ///< smallest key block
  long splits = 1;                               ///< split-KV partitions merged (1: none)
  /// Whether fp32 results below the smallest normal are flushed to zero (CUDA's fast math,
  /// FlashAttention's build): each fp32 step then errs by up to 2^-126 absolute, else 2^-150.
  bool flush_to_zero = true;
  double fp32_eta() const { return flush_to_zero ? 0x1p-126 : 0x1p-150; }
};

/// The named profiles: "fa2-bf16", "fa2-fp16", "fa3-bf16", "fa3-fp16", "fa3-fp8"
/// (P in e4m3, bf16 output), "torch-math-fp32" (PyTorch's math path: fp32
/// everywhere, correctly rounded exp, one block), "fp32" (fp32 everywhere with
/// tensor-core sums and ex2.approx).
std::vector<std::string> profile_names();
/// input_error naming the known ones for another name.
PrecisionProfile named_profile(const std::string& name);

/// A profile as JSON, and back: {"name", "base" (optional: a named profile the other
/// fields override), "scores": {"u", "extra_terms"} or "ieee_fp32" / "tensor_core_fp32",
/// "argument_u", "exp_relative", "probabilities", "row_sum_of_stored", "row_sums", "pv",
/// "rescale_u", "divide_u", "lse_u", "output", "min_block", "splits", "flush_to_zero"}; formats by name.
/// `source` names the JSON in errors (a file, "profile"). Unknown keys are refused.
PrecisionProfile profile_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const PrecisionProfile& p);

/// What a user passes, as both front ends take it: a profile's name, a JSON object's
/// text (starting with '{'), or the path of a JSON file of one. input_error naming
/// the argument (and the file, and the field) otherwise.
PrecisionProfile profile_from_argument(const std::string& argument);

}  // namespace attnrank
