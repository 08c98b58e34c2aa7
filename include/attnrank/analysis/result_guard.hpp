#pragma once
// The last line before a certified result leaves the library: every band in it is
// a band (numbers/bands.hpp: lower <= upper, no NaN, an infinite lower end only
// where infinity is the proven value) and every verdict agrees with its own bands
// (a "within" whose upper bound is above the tolerance, an "unreachable" whose
// floor does not exceed d_k, ...). A violation throws internal_error naming the
// result, the band and its ends: a bug in attnrank, never an answer (the CLI exits
// 1, Python raises RuntimeError).
//
// It is not the fix for anything: each analysis computes sound bands by itself,
// and the tests show the guard is never reached on their inputs. It costs a few
// comparisons per band (nothing per matrix entry), and runs at the end of every
// analyze_* function of this module.

#include <attnrank/analysis/det_analysis.hpp>
#include <attnrank/analysis/kernel_analysis.hpp>
#include <attnrank/analysis/rank_analysis.hpp>
#include <attnrank/analysis/reach_analysis.hpp>
#include <attnrank/analysis/scan_analysis.hpp>
#include <attnrank/analysis/svd_analysis.hpp>
#include <attnrank/analysis/width_analysis.hpp>

namespace attnrank {

/// Throws internal_error when a band of the result is not a band, or a verdict
/// disagrees with the bands it rests on. Returns normally otherwise.
void guard_result(const KernelAnalysis& k);
void guard_result(const ReachAnalysis& r);
void guard_result(const WidthAnalysis& w);
void guard_result(const SvdAnalysis& s);
void guard_result(const RankAnalysis& r);
void guard_result(const DetAnalysis& d);
void guard_result(const HeadScan& h);

}  // namespace attnrank
