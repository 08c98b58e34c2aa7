#pragma once
// The SVG figures of `attnrank appendix --svg DIR`, `attnrank reach --svg FILE`
// and `attnrank scan --svg FILE` (and --brackets-svg FILE).
// They take plain doubles: pictures need no certificates, every number they show
// is also printed, certified, by the command.

#include <attnrank/analysis/scan_analysis.hpp>
#include <attnrank/tutorial/appendix.hpp>

#include <Eigen/Core>

#include <string>
#include <vector>

namespace attnrank::cli {

using attnrank::AppendixFigureData;


/// Writes figure8_sweep.svg, figure9_rank_axis.svg, log_A_C_spectrum.svg and
/// section2_2_heads.svg into `dir` (created if needed); returns the paths.
std::vector<std::string> write_appendix_figures(const AppendixFigureData& data, const std::string& dir);

/// Three panels for a reach query: the target, softmax of the width-d_k witness
/// (null: none), and a spectrum (of log(A) C, or of a masked target's largest
/// fully allowed block) with the d_k cut, titled `spectrum_title`. Heatmaps are
/// drawn up to n = 64; beyond that the panel says so.
std::string reach_figure(const Eigen::MatrixXd& target, const Eigen::MatrixXd* approximation,
                         const Eigen::VectorXd& spectrum, Eigen::Index dk, const std::string& caption,
                         const std::string& spectrum_title);

/// The scan's heatmap: rows the leading indices (layers), columns the last (heads);
/// each cell the minimal width within epsilon (marked ≤ or ≥ when known from one
/// side only), else E* at d_k, else the floor; the title, epsilon, d_k and mask above,
/// axis titles, and a colour legend. Sized from its texts, so nothing is clipped.
std::string scan_figure(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads);

/// The scan's width brackets as intervals (`attnrank scan --epsilon E --brackets-svg FILE`):
/// heads along the horizontal axis, widths up the vertical one; a dot where the width is
/// proven, a bar from the proven lower end to the witness, an arrow up where no witness
/// was found. input_error without epsilon (no widths to draw).
std::string scan_brackets_figure(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads);

}  // namespace attnrank::cli
