// The reach pipeline (analysis/reach_analysis.hpp): one policy for free and
// masked heads, with or without fixed embeddings.
#include <attnrank/analysis/reach_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/embeddings_certificate.hpp>
#include <attnrank/reach/masked_certificate.hpp>

#include <algorithm>
#include <cmath>

namespace attnrank {
namespace {

/// Runs `f`; an input_error about the embeddings names the user's X.
template <class F>
auto naming_x(const std::string& x_name, F&& f) {
  try {
    return f();
  } catch (const input_error& e) {
    if (e.subject() != "embeddings X") throw;
    throw input_error(x_name + ": " + e.what(), e.subject());
  }
}

/// The smaller of two optional certified errors, ignoring the ones not bounded.
std::optional<double> best_of(std::optional<double> a, std::optional<double> b) {
  if (a && !std::isfinite(*a)) a.reset();
  if (b && !std::isfinite(*b)) b.reset();
  if (a && b) return std::min(*a, *b);
  return a ? a : b;
}

}  // namespace

Verdict ReachAnalysis::verdict() const {
  if (free) return free->verdict;
  if (embeddings) return embeddings->result.verdict;
  if (masked) return masked->verdict;
  return masked_embeddings->result.verdict;
}

const std::string& ReachAnalysis::reason() const {
  if (free) return free->reason;
  if (embeddings) return embeddings->result.reason;
  if (masked) return masked->reason;
  return masked_embeddings->result.reason;
}

const std::string& ReachAnalysis::hint() const {
  if (free) return free->hint;
  if (embeddings) return embeddings->result.hint;
  if (masked) return masked->hint;
  return masked_embeddings->result.hint;
}

bool ReachAnalysis::has_zero_entry() const {
  if (free) return free->has_zero_entry;
  if (embeddings) return embeddings->result.has_zero_entry;
  if (masked) return masked->has_zero_entry;
  return masked_embeddings->result.has_zero_entry;
}

Eigen::Index ReachAnalysis::floor_lower() const {
  if (free) return free->floor.lower;
  if (embeddings) return embeddings->result.floor.lower;
  if (masked) return masked->floor.lower;
  return masked_embeddings->result.floor.lower;
}

Eigen::Index ReachAnalysis::floor_upper() const {
  if (free) return free->floor.upper;
  if (embeddings) return embeddings->result.floor.upper;
  if (masked) return masked->floor.upper;
  return masked_embeddings->result.floor.upper;
}

unsigned ReachAnalysis::floor_bits() const {
  if (free) return free->floor.lower_bits;
  if (embeddings) return embeddings->result.floor.lower_bits;
  if (masked) return masked->floor.lower_bits;
  return masked_embeddings->result.floor.lower_bits;
}

const Witness* ReachAnalysis::witness() const {
  const std::optional<Witness>* w = free         ? &free->witness
                                    : embeddings ? &embeddings->result.witness
                                    : masked     ? &masked->witness
                                                 : &masked_embeddings->result.witness;
  return *w ? &**w : nullptr;
}

ReachAnalysis analyze_reach(const Matrix<Rational>& A, const ReachQuestion& q) {
  validate_target(A, q.target_name);
  if (q.mask) validate_masked_target(A, *q.mask, q.target_name);
  if (q.epsilon && !(*q.epsilon >= 0 && *q.epsilon <= 1))
    throw input_error("epsilon " + shortest_decimal(*q.epsilon) +
                      " is outside [0, 1] (attention weights lie in [0, 1])");
  validate(q.refine);
  ReachAnalysis out;
  out.n = A.rows();
  out.dk = q.dk;
  out.target_name = q.target_name;
  out.x_name = q.x_name;
  out.rows_sum_to_one = rows_sum_to_one(A);
  out.epsilon = q.epsilon;
  out.seed = q.seed;
  out.error_bounds_size_limit = q.error_bounds_size_limit;

  ReachOptions o;
  o.bits = q.bits;
  o.full_floor = q.full_floor;
  o.witness = q.witness;
  ApproxOptions ao;
  ao.bits = std::max(q.bits, 64u);
  ao.seed = q.seed;
  // The cheap band and the optimiser after it start from the same starts, fits
  // and certified logs: computed once (or taken from the caller's memo).
  std::optional<ApproxMemo> own_memo;
  if (q.memo) q.memo->require_target(A, q.mask ? &*q.mask : nullptr);
  ao.memo = q.memo ? q.memo : &own_memo.emplace(A, q.mask);
  const bool bound_error = q.error_bounds == ErrorBoundsPolicy::always ||
                           (q.error_bounds == ErrorBoundsPolicy::automatic &&
                            (q.epsilon || A.rows() <= q.error_bounds_size_limit));
  const ApproxBounds* approx = nullptr;
  // The cheap band first; the optimiser when the policy says so (refinement.hpp).
  const auto needs_refinement = [&](const ApproxBounds& cheap) {
    return q.epsilon && epsilon_verdict(cheap, *q.epsilon) == EpsilonVerdict::undecided;
  };
  const auto run_bounds = [&](const std::function<ApproxBounds(const ApproxOptions&)>& compute) {
    if (bound_error)
      approx = &out.approx.emplace(refined_bounds(ao, q.refine, compute, needs_refinement,
                                                  "run because the cheap band left epsilon undecided", out.refinement));
  };

  if (q.mask) {
    const Mask& mask = *q.mask;
    out.mask_name = mask.name();
    if (q.x) {
      naming_x(q.x_name, [&] {
        out.masked_embeddings = reach_with_embeddings(A, *q.x, q.dk, mask, o);
        run_bounds([&](const ApproxOptions& o) { return approx_error_bounds(A, *q.x, q.dk, mask, o); });
        return 0;
      });
      if (q.certificate)
        out.certificate = make_masked_embeddings_certificate(A, *q.x, mask, *out.masked_embeddings, approx, q.epsilon);
    } else {
      out.masked = reach(A, q.dk, mask, o);
      run_bounds([&](const ApproxOptions& o) { return approx_error_bounds(A, q.dk, mask, o); });
      if (q.certificate) out.certificate = make_masked_reach_certificate(A, mask, *out.masked, approx, q.epsilon);
    }
  } else {
    out.zeros_causal = zeros_are_causal(A);
    if (q.x) {
      naming_x(q.x_name, [&] {
        out.embeddings = reach_with_embeddings(A, *q.x, q.dk, o);
        run_bounds([&](const ApproxOptions& o) { return approx_error_bounds(A, *q.x, q.dk, o); });
        return 0;
      });
      if (q.certificate) out.certificate = make_embeddings_certificate(A, *q.x, *out.embeddings, approx, q.epsilon);
    } else {
      out.free = reach(A, q.dk, o);
      run_bounds([&](const ApproxOptions& o) { return approx_error_bounds(A, q.dk, o); });
      if (q.certificate) out.certificate = make_reach_certificate(A, *out.free, approx, q.epsilon);
    }
  }

  // The witness max_abs_error describes: the head weights on X for the
  // embeddings question, Q and K otherwise.
  if (out.on_embeddings()) {
    const double e = out.embeddings ? out.embeddings->weights_max_abs_error
                                    : out.masked_embeddings->weights_max_abs_error;
    if (std::isfinite(e)) out.witness_error = e;
  } else if (const Witness* w = out.witness()) {
    out.witness_error = w->max_abs_error;
  }
  out.best_error = best_of(out.witness_error, approx ? std::optional<double>(approx->error_upper) : std::nullopt);
  guard_result(out);
  return out;
}

CertificateAnalysis analyze_certificate(const Matrix<Rational>& A, const nlohmann::json& certificate,
                                        const std::optional<Mask>& mask, const std::optional<Matrix<Rational>>& x,
                                        const std::string& certificate_name, const std::string& target_name) {
  validate_target(A, target_name);
  if (mask) validate_masked_target(A, *mask, target_name);
  CertificateCheck c;
  if (mask)
    c = x ? check_masked_embeddings_certificate(A, *x, *mask, certificate)
          : check_masked_reach_certificate(A, *mask, certificate);
  else
    c = x ? check_embeddings_certificate(A, *x, certificate) : check_reach_certificate(A, certificate);
  if (!c.valid) throw input_error(certificate_name + ": certificate rejected: " + c.reason);
  return {true, c.reason};
}

}  // namespace attnrank
