#pragma once
// The masked witness's fit: Q, K and row constants c with Q K^T + c 1^T near L on
// a mask's allowed set, by alternating least squares. Uncertified (a start for
// the certified error of reach/masked.hpp, which alone is trusted); what is
// guaranteed is the arithmetic of the sums below.
//
// Each half-step needs, for every row, the sum of the keys' outer products over
// the keys it allows (and for every key, over the rows allowing it). For a
// nested mask these are prefix sums in the staircase's order, O(n m) for m
// columns of outer products instead of a product with the 0/1 mask, O(n^2 m):
// the difference between a second and a tenth of one at n = 1024.

#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/masked.hpp>

#include <Eigen/Core>

#include <optional>
#include <utility>

namespace attnrank::detail {

/// Sums of the rows of a matrix F (n x m) over a mask's allowed sets:
///   over_keys(F)_i = sum of F_j over the keys j row i allows      (M F),
///   over_queries(F)_j = sum of F_i over the rows i allowing key j (M^T F),
/// with M the 0/1 mask. Prefix sums along the staircase for a nested mask
/// (each row's keys a prefix of its key order, each key's rows a suffix of its
/// row order), products with M otherwise. The same sums either way, up to the
/// order of the additions.
class AllowedSums {
 public:
  explicit AllowedSums(const Mask& mask);
  Eigen::MatrixXd over_keys(const Eigen::MatrixXd& F) const;
  Eigen::MatrixXd over_queries(const Eigen::MatrixXd& F) const;
  /// Flops of one over_keys or over_queries of m columns.
  double flops(Eigen::Index m) const;
  bool nested() const { return staircase_.has_value(); }

 private:
  Eigen::Index n_ = 0;
  std::optional<Staircase> staircase_;
  /// For a nested mask, first_row_[q]: the staircase position of the first row
  /// allowing key cols[q] (n when none does).
  std::vector<Eigen::Index> first_row_;
  Eigen::MatrixXd indicator_;  ///< M, for a mask that is not nested
};

/// Q, K (scores Q K^T + c 1^T, unscaled, n x dk each) from the truncated SVD
/// of a completion `start` of L, refined by at most `sweeps` sweeps of
/// alternating least squares over the allowed set (each half-step cannot
/// increase the sum of squared residuals there; a small ridge keeps rows with
/// fewer allowed keys than unknowns determined). Of the iterates, the one of
/// least max |residual| is returned. Sweeps beyond a budget of work (about 2e9
/// flops) are not run: the start is then the fit.
std::pair<Eigen::MatrixXd, Eigen::MatrixXd> fit_masked_scores(const MaskedWitnessStarts::Start& start, const Mask& mask,
                                                             Eigen::Index dk, int sweeps);

}  // namespace attnrank::detail
