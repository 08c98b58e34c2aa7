#pragma once
// When the optimiser sharpens error_upper, and on what budget: one policy for
// reach, width and scan. The default answers fast and reproducibly: the cheap
// certified band (error_lower from certified singular values, error_upper from
// the SVD or completion start after a short search of fixed work,
// cheap_search_flops and its floor of evaluations, at most about 2e9 flops)
// always; the optimiser (L-BFGS, restarts, floored starts) only when asked, or
// when the question needs it and the cheap band cannot settle it, on
// default_search_flops of fixed work. No default depends on the clock: two runs,
// idle or loaded, give the same bounds. A time limit is the opt-in for more: the
// full search (full_search_flops), stopped at the limit if one is given.
//
// Guarantee: refinement never weakens a bound. The refined band is the cheap one
// intersected with the search's (the larger proven lower bound, the smaller
// certified upper bound), so it lies inside the cheap band; every bound the
// default leaves out is one option away (refine, the time limit).

#include <attnrank/reach/approximate.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

namespace attnrank {

enum class RefinePolicy {
  automatic,  ///< only when the question needs it (reach: epsilon left undecided; width: the bracket open)
  always,     ///< asked for (the CLI's --refine, Python's refine=True)
  never,      ///< the cheap band only, whatever the question (--no-search, refine=False)
};

/// The optimiser's work by default, in flops per search (each width's or block's;
/// an evaluation costs about 6 n^2 d_k): a fifth of the full search. It replaced a
/// 2 s clock whose answers changed with the machine's load; about as much work as
/// those 2 s bought at n = 64-256 on this project's 2-core reference machine.
inline constexpr double default_search_flops = 5e9;
/// The full search's work, asked for with a time limit (0: no limit): what
/// ApproxOptions runs unless told less.
inline constexpr double full_search_flops = ApproxOptions{}.search_flops;

struct RefineOptions {
  RefinePolicy policy = RefinePolicy::automatic;
  /// Wall-clock seconds for all of an analysis' searches together (nullopt: none,
  /// the evaluation budget alone, and the result is reproducible from the seed).
  std::optional<double> time_limit;
  /// The optimiser's work per search (ApproxOptions::search_flops).
  double search_flops = default_search_flops;
  /// Progress while the search runs (the CLI prints it on stderr when that is a terminal).
  std::function<void(const SearchProgress&)> on_progress;
};

/// What refinement did, for the result and its report.
struct Refinement {
  bool ran = false;
  std::string reason;                 ///< why it ran, or why not
  std::optional<double> time_limit;   ///< as asked
  bool time_limit_reached = false;    ///< the search stopped at the limit: more time may sharpen error_upper
  double search_flops = default_search_flops;  ///< the work each search had
  /// A search spent its work while its best still fell (by over 1% in the last
  /// tenth of it): the full search (a time limit of 0) would likely go further.
  /// Only reported when more work is one option away (the default's budget).
  bool still_improving = false;
  bool improved_upper = false;        ///< the search lowered error_upper below the cheap start's
  long evaluations = 0;
};

/// The cheap band's search: the log-domain (or completion) start alone, no
/// restarts, no clock; cheap_search_flops' worth of evaluations (the cap of 20000
/// at n = 16), but at least cheap_search_evaluations of them as long as those
/// cost at most cheap_search_most_flops (at n = 256: 363 -> 726 evaluations at
/// d_k = 7, 848 -> 1695 at d_k = 3, none more at d_k = 1; at n = 1024 and d_k = 8,
/// 19 -> 39). 2.5e8 flops left the cheap upper bound 3x above the optimiser's on
/// planted heads at n = 256, 1e9 within 1.6x; the floor lowers the rank-8 heads'
/// bound at d_k = 7 (free 1.18e-2 -> 8.69e-3, causal 1.78e-2 -> 1.31e-2) for a
/// quarter to half a second more per head there. 4e9 flops reached the optimiser's
/// bound (7.24e-3, 1.23e-2) but cost reach at n = 300 and d_k = 4 0.7 s for
/// nothing (its default answer 0.41 -> 1.1 s, 6x NumPy's; goal 5x).
inline constexpr double cheap_search_flops = 1e9;
inline constexpr long cheap_search_evaluations = 2500;
inline constexpr double cheap_search_most_flops = 2e9;
ApproxOptions cheap_search(ApproxOptions options);

/// How far above epsilon (a factor) the best witness of width's open bracket may
/// be for the automatic policy to run the optimiser there. The optimiser lowers the
/// cheap band's error_upper by 1.07-1.2x on planted heads at n = 256 (d_k = r - 1);
/// a witness 8 times epsilon away, after the cheap search, is past what the time
/// limit buys (a random head at n = 128, epsilon 1e-3: 17.8x away at d_k = 16,
/// and 2 s of search left it 17.8x away). `always` runs it whatever the distance.
inline constexpr double optimiser_reach = 8;

/// input_error unless the time limit is positive and finite (or absent).
void validate(const RefineOptions& options);

/// The options a caller asks for, as every adapter spells them: `refine` nullopt
/// is automatic, true always, false never. `seconds` nullopt is the default
/// (default_search_flops of work, no clock); given, it asks for the full search
/// (full_search_flops), within that many seconds, where 0 means no limit.
/// input_error ("time limit ...") when the seconds are negative or not a number.
RefineOptions refine_options(std::optional<bool> refine, std::optional<double> seconds);

/// The cheap band and the refined one as one proven band: the larger error_lower
/// (with its proof) and the smaller error_upper (with its witness).
ApproxBounds intersect_bands(const ApproxBounds& cheap, ApproxBounds refined);

/// Runs compute(options) once with the optimiser off; then, when `refine(cheap)`
/// says so, again with it on under a SearchMonitor for options.time_limit, and
/// intersects the two. `reason` receives why refinement did or did not run.
ApproxBounds refined_bounds(const ApproxOptions& base, const RefineOptions& options,
                            const std::function<ApproxBounds(const ApproxOptions&)>& compute,
                            const std::function<bool(const ApproxBounds&)>& needs_refinement,
                            const std::string& needs_reason, Refinement& report);

/// {"ran", "reason", "time_limit", "search_flops", "time_limit_reached", "still_improving", "improved"}
/// (improved: the search lowered the upper bound).
nlohmann::json to_json(const Refinement& r);
/// "fixed work 5e+09 flops per search", "full search, time limit 2 s" or "full search, no time limit".
std::string time_limit_words(const Refinement& r);
/// One line for the text reports: what the band is made of and how to get further.
std::string refinement_line(const Refinement& r);
/// The hint when more work or time would likely sharpen `what` ("error_upper",
/// "width_upper"): "" when nothing is one option away.
std::string refinement_hint(const Refinement& r, const std::string& what);

}  // namespace attnrank
