#pragma once
// The SVG figures of `attnrank appendix --svg DIR` and `attnrank reach --svg FILE`.
// They take plain doubles (pictures need no certificates: every number they show
// is also printed, certified, by the command) so this file stays light to build.

#include <Eigen/Core>

#include <string>
#include <vector>

namespace attnrank::cli {

struct AppendixFigureData {
  std::vector<std::string> sweep_q;           ///< row labels of the sweep, e.g. "3.0"
  Eigen::MatrixXd sweep;                      ///< softmax(q (2, 0, 1)), one row per q
  Eigen::Index n = 3, floor = 2, seed_floor = 2;
  Eigen::VectorXd singular_values;            ///< of log(A) C
  std::vector<Eigen::MatrixXd> heads;         ///< A_1, A_2 of Section 2.2
};

/// Writes figure8_sweep.svg, figure9_rank_axis.svg, log_A_C_spectrum.svg and
/// section2_2_heads.svg into `dir` (created if needed); returns the paths.
std::vector<std::string> write_appendix_figures(const AppendixFigureData& data, const std::string& dir);

/// Three panels for a reach query: the target, softmax of the width-d_k witness
/// (null: none), and the spectrum of log(A) C with the d_k cut. Heatmaps are
/// drawn up to n = 64; beyond that the panel says so.
std::string reach_figure(const Eigen::MatrixXd& target, const Eigen::MatrixXd* approximation,
                         const Eigen::VectorXd& spectrum, Eigen::Index dk, const std::string& caption);

}  // namespace attnrank::cli
