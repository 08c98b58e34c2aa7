// The refinement policy (analysis/refinement.hpp).
#include <attnrank/analysis/refinement.hpp>

#include <attnrank/numbers/decimal.hpp>

#include <cmath>
#include <sstream>

namespace attnrank {

void validate(const RefineOptions& o) {
  if (o.time_limit && !(std::isfinite(*o.time_limit) && *o.time_limit > 0))
    throw input_error("time limit " + shortest_decimal(*o.time_limit) +
                      " is not a positive number of seconds");
}

RefineOptions refine_options(std::optional<bool> refine, std::optional<double> seconds) {
  if (seconds && !(*seconds >= 0))  // NaN too
    throw input_error("time limit " + shortest_decimal(*seconds) + " is not a number of seconds >= 0 (0: no limit)");
  RefineOptions o;
  o.policy = !refine ? RefinePolicy::automatic : *refine ? RefinePolicy::always : RefinePolicy::never;
  if (seconds) {
    o.search_flops = full_search_flops;
    if (*seconds > 0 && std::isfinite(*seconds)) o.time_limit = *seconds;
  }
  return o;
}

ApproxOptions cheap_search(ApproxOptions o) {
  o.optimise = true;
  o.restarts = 0;
  o.floored_starts = false;
  o.max_evaluations = 0;
  o.search_flops = cheap_search_flops;
  o.min_evaluations = cheap_search_evaluations;
  o.min_evaluation_flops = cheap_search_most_flops;
  o.skip_below = 10;  // a handful of evaluations rarely helps and costs as much as the rest
  o.monitor = nullptr;
  return o;
}

ApproxBounds intersect_bands(const ApproxBounds& cheap, ApproxBounds refined) {
  if (cheap.error_lower > refined.error_lower) {
    refined.error_lower = cheap.error_lower;
    refined.lower_proof = cheap.lower_proof;
    refined.lower_reason = cheap.lower_reason;
  }
  if (cheap.error_upper < refined.error_upper) {
    refined.error_upper = cheap.error_upper;
    refined.witness = cheap.witness;
    refined.WQ = cheap.WQ;
    refined.WK = cheap.WK;
    refined.weights_error_bits = cheap.weights_error_bits;
  }
  refined.start_error = std::min(cheap.start_error, refined.start_error);
  return refined;
}

ApproxBounds refined_bounds(const ApproxOptions& base, const RefineOptions& options,
                            const std::function<ApproxBounds(const ApproxOptions&)>& compute,
                            const std::function<bool(const ApproxBounds&)>& needs_refinement,
                            const std::string& needs_reason, Refinement& report) {
  ApproxOptions cheap_options = cheap_search(base);
  ApproxBounds cheap = compute(cheap_options);
  report = Refinement{};
  report.time_limit = options.time_limit;
  report.search_flops = options.search_flops;
  switch (options.policy) {
    case RefinePolicy::never: report.reason = "not run: not asked"; return cheap;
    case RefinePolicy::always: report.reason = "asked (refine)"; break;
    case RefinePolicy::automatic:
      if (!needs_refinement(cheap)) {
        report.reason = "not run: the question needs no sharper bound (refine runs it)";
        return cheap;
      }
      report.reason = needs_reason;
      break;
  }
  SearchMonitor monitor(options.time_limit, options.on_progress);
  ApproxOptions refine_options = base;
  refine_options.optimise = true;
  refine_options.search_flops = options.search_flops;
  refine_options.monitor = &monitor;
  ApproxBounds refined = intersect_bands(cheap, compute(refine_options));
  report.ran = true;
  report.search_flops = options.search_flops;
  report.time_limit_reached = monitor.deadline_reached();
  report.still_improving = monitor.spent_improving() && options.search_flops < full_search_flops;
  report.evaluations = monitor.evaluations();
  report.improved_upper = refined.error_upper < cheap.error_upper;
  return refined;
}

nlohmann::json to_json(const Refinement& r) {
  return {{"ran", r.ran},
          {"reason", r.reason},
          {"time_limit", r.time_limit ? nlohmann::json(*r.time_limit) : nlohmann::json(nullptr)},
          {"search_flops", r.search_flops},
          {"time_limit_reached", r.time_limit_reached},
          {"still_improving", r.still_improving},
          {"improved", r.improved_upper}};
}

std::string time_limit_words(const Refinement& r) {
  std::ostringstream o;
  if (r.search_flops < full_search_flops) o << "fixed work, " << r.search_flops << " flops per search";
  else if (!r.time_limit) o << "full search, no time limit";
  else o << "full search, time limit " << *r.time_limit << " s";
  return o.str();
}

std::string refinement_hint(const Refinement& r, const std::string& what) {
  if (r.time_limit_reached)
    return r.ran ? "the optimiser stopped at the time limit: a larger time limit (or 0, none) may lower " + what
                 : "the time limit passed before the optimiser could start: a larger time limit (or 0, none) lets "
                   "it lower " + what;
  if (r.ran && r.still_improving) {
    std::string hint("the optimiser was still improving when its fixed work ran out: a time limit of 0 (the full "
                     "search, up to ");  // in steps: GCC 12's -Werror false positive on "..." + std::string&&
    hint += shortest_decimal(full_search_flops / r.search_flops);
    hint += " times the work) may lower ";
    hint += what;
    return hint;
  }
  return "";
}

std::string refinement_line(const Refinement& r) {
  std::ostringstream s;
  if (!r.ran) {
    s << "  band: cheap (the start and a short search of fixed work; optimiser " << r.reason << ")\n";
  } else {
    s << "  band: refined (optimiser " << r.reason << ", " << time_limit_words(r) << "; "
      << (r.improved_upper ? "it lowered error_upper" : "it did not improve on the start") << ")";
    const std::string hint = refinement_hint(r, "error_upper");
    if (!hint.empty()) s << "\n  " << hint;
    s << "\n";
  }
  return s.str();
}

}  // namespace attnrank
