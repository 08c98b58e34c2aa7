#pragma once
// The analysis module: one entry point per question (reach, width, rank, det,
// svd, layer, check-kernel, scan, appendix, sweep), each with its options, a typed
// result with its proofs, and one JSON writer and one text writer
// (docs/architecture.md). Depends on tutorial, reach and every module below them.
#include <attnrank/reach.hpp>
#include <attnrank/tutorial.hpp>

#include <attnrank/analysis/appendix_analysis.hpp>
#include <attnrank/analysis/example_analysis.hpp>
#include <attnrank/analysis/det_analysis.hpp>
#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/kernel_analysis.hpp>
#include <attnrank/analysis/layer_analysis.hpp>
#include <attnrank/analysis/option_help.hpp>
#include <attnrank/analysis/rank_analysis.hpp>
#include <attnrank/analysis/reach_analysis.hpp>
#include <attnrank/analysis/reach_picture.hpp>
#include <attnrank/analysis/refinement.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/analysis/scan_analysis.hpp>
#include <attnrank/analysis/sweep_analysis.hpp>
#include <attnrank/analysis/svd_analysis.hpp>
#include <attnrank/analysis/text_matrix.hpp>
#include <attnrank/analysis/width_analysis.hpp>
