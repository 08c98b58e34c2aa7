// The width analysis and its two writers (analysis/width_analysis.hpp).
#include <attnrank/analysis/width_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/masked.hpp>

#include <algorithm>
#include <sstream>

namespace attnrank {

WidthAnalysis analyze_width(const Matrix<Rational>& A, const WidthQuestion& q) {
  validate_target(A, q.target_name);
  if (!(q.epsilon >= 0 && q.epsilon <= 1))
    throw input_error("epsilon " + shortest_decimal(q.epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
  const Eigen::Index n = A.rows();
  const Eigen::Index max_dk = q.max_dk.value_or(std::min<Eigen::Index>(n, 16));
  if (max_dk < 1 || max_dk > n)
    throw input_error("max_dk " + std::to_string(max_dk) + " is out of range: 1 <= max_dk <= n = " +
                      std::to_string(n));
  validate(q.refine);
  // Every width at once: the starts' bracket answers in about the time of one
  // SVD. Then reach's cheap band where the bracket is open (the short search of
  // fixed work, by bisection over the open widths), so that width and reach give
  // the same band at the same d_k; then, unless told never, the optimiser within
  // the time limit where the bracket is still open.
  SearchMonitor monitor(q.refine.time_limit, q.refine.on_progress);
  ApproxOptions base;
  base.seed = q.seed;
  base.first_fit = q.first_fit.value_or(0);
  std::optional<ApproxMemo> own_memo;
  if (q.memo) q.memo->require_target(A, q.mask ? &*q.mask : nullptr);
  base.memo = q.memo ? q.memo : &own_memo.emplace(A, q.mask);
  ApproxOptions refine = base;
  refine.optimise = true;
  refine.search_flops = q.refine.search_flops;
  refine.monitor = &monitor;
  ApproxOptions o = cheap_search(base);
  if (q.refine.policy != RefinePolicy::never) o.then_search = &refine;
  if (q.refine.policy == RefinePolicy::automatic) o.then_search_reach = optimiser_reach;
  WidthAnalysis out;
  out.n = n;
  out.target_name = q.target_name;
  out.seed = q.seed;
  if (q.mask) {
    validate_masked_target(A, *q.mask, q.target_name);
    out.mask_name = q.mask->name();
    out.result = approx_width(A, q.epsilon, max_dk, *q.mask, o);
  } else {
    out.result = approx_width(A, q.epsilon, max_dk, o);
  }
  Refinement& r = out.refinement;
  r.time_limit = q.refine.time_limit;
  r.search_flops = q.refine.search_flops;
  r.still_improving = monitor.spent_improving() && q.refine.search_flops < full_search_flops;
  r.evaluations = monitor.evaluations();
  r.ran = r.evaluations > 0;
  r.time_limit_reached = monitor.deadline_reached();
  r.improved_upper = out.result.width_upper != out.result.first_search_width_upper;
  // Open after the cheap stage: some width is neither proven to miss nor settled
  // by a witness within epsilon below it.
  const bool open = out.result.first_search_width_upper == 0 ? out.result.width_lower <= out.result.max_dk
                                                              : out.result.first_search_width_upper > out.result.width_lower;
  const bool out_of_reach = q.refine.policy == RefinePolicy::automatic && open && !r.ran &&
                           detail::bracket_open(out.result) &&
                           !detail::search_within_reach(out.result, optimiser_reach);
  r.reason = !open ? "not needed: the starts and the short search settle the bracket"
             : q.refine.policy == RefinePolicy::never ? "not run (search off)"
             : out_of_reach ? "not run: the open widths' best witness is more than " +
                                  shortest_decimal(optimiser_reach) +
                                  " times epsilon away, past what it gains; refine runs it anyway"
             : r.ran ? (q.refine.policy == RefinePolicy::always ? "asked (refine), run where the cheap band left the bracket open"
                                                                : "run where the cheap band left the bracket open")
             : r.time_limit_reached ? "not run: the time limit passed before it could start"
                                    : "no search could start";
  guard_result(out);
  return out;
}

nlohmann::json to_json(const WidthAnalysis& a) {
  using nlohmann::json;
  const WidthResult& w = a.result;
  json profile = json::array();
  for (const WidthProfileEntry& e : w.profile)
    profile.push_back(
        {{"d_k", e.dk}, {"error_lower", lower_bound_json(e.error_lower)}, {"error_upper", upper_bound_json(e.error_upper)}});
  return json_document({{"n", a.n},
                        {"epsilon", w.epsilon},
                        {"max_d_k", w.max_dk},
                        {"mask", a.mask_name},
                        {"width_lower", w.width_lower},
                        {"width_upper", w.width_upper == 0 ? json(nullptr) : json(w.width_upper)},
                        {"seed", a.seed},
                        {"optimised", a.refinement.ran},
                        {"refinement", to_json(a.refinement)},
                        {"profile", profile}},
                       "width");
}

std::string to_text(const WidthAnalysis& a) {
  const WidthResult& w = a.result;
  const bool masked = a.mask_name != "none";
  std::ostringstream t;
  t << "target " << a.target_name << " (n = " << a.n << ")" << (masked ? ", mask " + a.mask_name + " (masked heads)" : "")
    << ", epsilon = " << w.epsilon << " (max entrywise error)\n";
  if (w.width_upper != 0 && w.width_upper == w.width_lower)
    t << "smallest width within epsilon: d_k = " << w.width_upper << " (certified both ways)\n";
  else if (w.width_upper != 0)
    t << "smallest width within epsilon: " << w.width_lower << " <= d_k <= " << w.width_upper << " ("
      << (w.width_lower > 1 ? "every d_k below " + std::to_string(w.width_lower) + " is proven to miss"
                            : "no width is proven to miss")
      << "; a certified witness at " << w.width_upper << ")\n";
  else if (w.width_lower > w.max_dk)
    t << "no head of width <= " << w.max_dk << " comes within epsilon (every one is proven to miss)\n";
  else
    t << "smallest width within epsilon: >= " << w.width_lower << "; no certified witness within epsilon up to d_k = "
      << w.max_dk << " (raise max_dk, or the gap between the bounds is the honest answer)\n";
  t << "  d_k   error_lower <= E* <= error_upper   (certified)\n";
  for (const WidthProfileEntry& e : w.profile)
    t << "  " << e.dk << (e.dk < 10 ? "     " : e.dk < 100 ? "    " : "   ") << format_lower_bound(e.error_lower)
      << " <= E* <= " << format_upper_bound(e.error_upper) << "\n";
  const Refinement& r = a.refinement;
  if (!r.ran)
    t << "  upper bounds from the " << (masked ? "masked completion's fit" : "log-domain starts")
      << " and a short search of fixed work (cheap band; optimiser " << r.reason << ")\n";
  else
    t << "  seed " << a.seed << " (optimiser restarts, " << r.reason << ", "
      << time_limit_words(r)
      << "; the bounds are certified whatever the seed)\n";
  const std::string hint = refinement_hint(r, "width_upper");
  if (!hint.empty()) t << "  " << hint << "\n";
  return t.str();
}

}  // namespace attnrank
