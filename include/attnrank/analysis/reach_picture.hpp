#pragma once
// What `reach --svg` draws for a reach question, as plain doubles: the target
// (rows normalised), the pattern of the head the report quotes, and a spectrum of
// the centred log with the d_k cut. The choice of head is the library's: the
// optimised witness of a masked question when its error band ran (it is the best
// certified one), else the verdict's witness.
//
// Guarantee: none -- a picture, not a proof. Every number it shows is also
// printed, certified, by the reach report.

#include <attnrank/analysis/reach_analysis.hpp>

#include <Eigen/Core>

#include <optional>
#include <string>

namespace attnrank {

struct ReachPicture {
  Eigen::MatrixXd target;                  ///< A with rows normalised
  std::optional<Eigen::MatrixXd> pattern;  ///< softmax of the quoted width-d_k head (none: a zero entry)
  Eigen::VectorXd spectrum;                ///< singular values of log(A) C, or of a masked target's largest allowed block
  std::string spectrum_title;
  std::string caption;                     ///< target, mask, verdict, d_k and floor in one line
  Eigen::Index dk = 0;
};

ReachPicture reach_picture(const Matrix<Rational>& A, const std::optional<Mask>& mask, const ReachAnalysis& r);

}  // namespace attnrank
