#pragma once
// The smallest head width within epsilon of a target, free or masked, as one
// analysis: the question's options in, the certified bracket
//     width_lower <= w* <= width_upper
// with every width's error band out (reach/approximate.hpp, approx_width), and
// one JSON writer and one text writer for the CLI and Python.
//
// Guarantee: every d_k below width_lower is proven to miss epsilon; at
// width_upper a witness's error is certified within epsilon; each profile row is
// a proven band on E*. width_upper is absent (JSON null) when no width up to
// max_dk has a certified witness within epsilon.

#include <attnrank/analysis/refinement.hpp>
#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/approx_memo.hpp>
#include <attnrank/reach/approximate.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace attnrank {

struct WidthQuestion {
  double epsilon = 0;         ///< largest acceptable max entrywise error, in [0, 1]
  std::optional<Eigen::Index> max_dk;  ///< largest width tried, in [1, n]; nullopt: min(n, 16)
  std::optional<Mask> mask;   ///< widths of a masked head
  std::uint64_t seed = 1;     ///< the optimiser's restarts
  /// The bracket from the starts and the cheap search is the answer with never;
  /// automatic (the default) then runs the optimiser where it is open and its best
  /// witness is within optimiser_reach times epsilon, always (--refine) wherever it
  /// is open; on refine.search_flops of work (within refine.time_limit, if any).
  RefineOptions refine;
  std::string target_name = "target";
  /// The target's shared approximate work (reach/approx_memo.hpp), made for this
  /// very target and mask, when other questions on it share it (a scan's reach and
  /// width); the answer is the same either way. nullptr: the analysis makes its own.
  ApproxMemo* memo = nullptr;
  /// Under a mask, the width whose fit the profile probes first (ApproxOptions::first_fit):
  /// a scan names its d_k, fitted already for reach's band. nullopt: max_dk.
  std::optional<Eigen::Index> first_fit = std::nullopt;
};

struct WidthAnalysis {
  Eigen::Index n = 0;
  std::string target_name, mask_name = "none";
  std::uint64_t seed = 1;
  Refinement refinement;
  WidthResult result;  ///< epsilon, max_dk, the bracket and the profile
};

/// input_error on a bad target, epsilon outside [0, 1], max_dk outside [1, n]
/// or a mask that does not fit the target.
WidthAnalysis analyze_width(const Matrix<Rational>& A, const WidthQuestion& q);

nlohmann::json to_json(const WidthAnalysis& w);  ///< "attnrank/width/1"
std::string to_text(const WidthAnalysis& w);

}  // namespace attnrank
