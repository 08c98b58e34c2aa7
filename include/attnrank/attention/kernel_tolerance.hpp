#pragma once
// Judging a kernel check against a tolerance, three-valued and proven either way.
// From the certified bounds of check_kernel (attention/kernel_check.hpp):
//  * an error tolerance max |O - E| <= atol + rtol max |E| is `within` when the
//    error's upper bound is at most atol + rtol (lower bound on max |E|), and
//    `exceeded` when its lower bound is above atol + rtol (upper bound on max |E|);
//  * a ratio tolerance (FlashAttention's rule "at most c times the reference's
//    error plus a", with true errors) err_c <= c err_r + a is `within` when
//    c_upper <= c r_lower + a and `exceeded` when c_lower > c r_upper + a; a = 0
//    is the purely multiplicative form, which lets only an exact output pass
//    beside an exact reference (why the floor a exists: docs/kernels.md).
// Every product and sum is rounded against the claim it supports. Otherwise the
// answer is `undecided`: the bounds straddle the tolerance (the enclosure is too
// wide for it). A non-finite candidate entry is an infinite error: exceeded.

#include <attnrank/attention/kernel_check.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

enum class ToleranceVerdict { within, exceeded, undecided };

/// The verdict a name ("within", "exceeded", "undecided") stands for; input_error otherwise.
ToleranceVerdict tolerance_verdict_from_name(const std::string& name);

/// "within", "exceeded" or "undecided" (the JSON and the messages).
const char* to_string(ToleranceVerdict v);

/// max |O - E| <= atol + rtol max |E|; atol, rtol >= 0 and finite (input_error otherwise).
struct ErrorTolerance {
  double atol = 0, rtol = 0;
};

/// a + b c rounded up (`up`) or down, for a tolerance's a + b c with a, b >= 0 and c a bound
/// on a finite value: b = 0 gives a exactly (also beside c = +inf), and +inf stays +inf.
double tolerance_bound(double a, double b, double c, bool up);

/// Proven verdict on one output's error against `tol` (see the header comment).
ToleranceVerdict judge_error(const OutputError& e, const ErrorTolerance& tol);

/// Proven verdict on candidate error <= max_ratio x reference error + ratio_atol
/// (max errors); max_ratio and ratio_atol >= 0, finite (input_error otherwise).
/// A non-finite candidate entry is exceeded; a non-finite reference entry undecided.
ToleranceVerdict judge_ratio(const OutputError& candidate, const OutputError& reference, double max_ratio,
                             double ratio_atol = 0);
/// The same for a forward check's candidate and reference (input_error without one).
ToleranceVerdict judge_ratio(const KernelCheck& check, double max_ratio, double ratio_atol = 0);

/// torch.testing.assert_close's default (atol, rtol) for a dtype, applied to the
/// max: "float16" (1e-5, 1e-3), "bfloat16" (1e-5, 1.6e-2), "float32" (1e-5,
/// 1.3e-6), "float64" (1e-7, 1e-7); nullopt for any other name. The tolerance a
/// test suite applies when it names none (attnrank.testing uses these).
std::optional<ErrorTolerance> default_tolerance(const std::string& dtype);

/// The note for a reference whose own error is proven above its dtype's default
/// tolerance (default_tolerance), "" otherwise (or for a dtype without one): a
/// reference that far from exact can share the kernel's bug, and then a ratio
/// against it passes. `role` names the tensor ("out", "dq", ...).
std::string inexact_reference_note(const OutputError& reference, const std::string& dtype, const std::string& role);

/// The verdict over several: exceeded when one is, else undecided when one is,
/// else within (nullopt when there are none).
std::optional<ToleranceVerdict> combined_verdict(const std::vector<ToleranceVerdict>& verdicts);

}  // namespace attnrank
