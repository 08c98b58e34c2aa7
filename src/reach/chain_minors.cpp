// A nested mask's block floors from two factorisations (attnrank/reach/detail/chain_minors.hpp).
#include <attnrank/reach/detail/chain_minors.hpp>

#include <attnrank/linalg/leading_minors.hpp>
#include <attnrank/numbers/balls.hpp>

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace attnrank::detail {
namespace {

using Eigen::Index;

Index length(const std::vector<Index>& v) { return static_cast<Index>(v.size()); }

void require_chain(const std::vector<MaskedBlock*>& chain) {
  for (std::size_t k = 0; k + 1 < chain.size(); ++k) {
    const MaskedBlock &a = *chain[k], &b = *chain[k + 1];
    const bool rows_suffix = b.rows.size() <= a.rows.size() && std::equal(b.rows.rbegin(), b.rows.rend(), a.rows.rbegin());
    const bool cols_prefix = a.cols.size() <= b.cols.size() && std::equal(a.cols.begin(), a.cols.end(), b.cols.begin());
    if (!rows_suffix || !cols_prefix) throw std::logic_error("chain_lower_bounds: the blocks are not a chain");
  }
}

/// The ball of [1^T; L_{rows, cols}] (transposed: [1, L_{rows, cols}^T]).
BallMatrix with_ones_row(const BoundsMatrix& logs, const std::vector<Index>& rows, const std::vector<Index>& cols,
                         bool transposed) {
  BoundsMatrix b{Eigen::MatrixXd(length(rows) + 1, length(cols)), Eigen::MatrixXd(length(rows) + 1, length(cols))};
  b.lo.row(0).setOnes();
  b.hi.row(0).setOnes();
  b.lo.bottomRows(length(rows)) = logs.lo(rows, cols);
  b.hi.bottomRows(length(rows)) = logs.hi(rows, cols);
  BallMatrix ball = to_ball(b);  // the ones row stays exact: its radius is 0
  if (transposed) {
    ball.mid.transposeInPlace();
    ball.rad.transposeInPlace();
  }
  return ball;
}

/// Records a ones-row minor of size s + 1 (positions within the block) when s beats the block's bound.
void adopt(MaskedBlock& b, Index s, std::vector<Index> rows, std::vector<Index> cols, double residual) {
  if (s <= b.lower) return;
  b.lower = s;
  b.minor_rows = std::move(rows);
  b.minor_cols = std::move(cols);
  b.minor_residual = residual;
  b.minor_with_ones_row = true;
}

/// Tall blocks 0 .. t: the ones row and rows of R_t (chosen by pivoting) on the leading columns of J_t.
void tall_family(const BoundsMatrix& logs, const std::vector<MaskedBlock*>& chain, std::size_t t) {
  const MaskedBlock& last = *chain[t];
  const LeadingMinors lm = certified_leading_minors(with_ones_row(logs, last.rows, last.cols, false), 1);
  const Index rt = length(last.rows);
  for (std::size_t k = 0; k <= t; ++k) {
    MaskedBlock& b = *chain[k];
    const Index s = std::min(block_shape(b), lm.proven - 1);
    if (s <= b.lower) continue;
    std::vector<Index> rows;  // R_t is the suffix of R_k: its a-th row sits at a + |R_k| - |R_t|
    for (Index t_row = 1; t_row <= s; ++t_row) rows.push_back(lm.order[static_cast<std::size_t>(t_row)] - 1 + length(b.rows) - rt);
    std::vector<Index> cols(static_cast<std::size_t>(s + 1));
    std::iota(cols.begin(), cols.end(), Index{0});  // J_k is a prefix of J_t
    adopt(b, s, std::move(rows), std::move(cols), lm.residual[static_cast<std::size_t>(s)]);
  }
}

/// Wide blocks w .. end: the ones row and R_k (widest rows first) on columns of J_w chosen by pivoting.
void wide_family(const BoundsMatrix& logs, const std::vector<MaskedBlock*>& chain, std::size_t w) {
  const MaskedBlock& first = *chain[w];
  if (first.rows.empty()) return;
  const std::vector<Index> widest_first(first.rows.rbegin(), first.rows.rend());
  const LeadingMinors lm = certified_leading_minors(with_ones_row(logs, widest_first, first.cols, true), 0);
  for (std::size_t k = w; k < chain.size(); ++k) {
    MaskedBlock& b = *chain[k];
    const Index s = std::min(block_shape(b), lm.proven - 1);
    if (s <= b.lower) continue;
    std::vector<Index> rows;  // R_k is the suffix of R_w: widest_first's a-th row sits at |R_k| - 1 - a
    for (Index a = 0; a < s; ++a) rows.push_back(length(b.rows) - 1 - a);
    // J_w is a prefix of J_k: positions in J_w are positions in J_k.
    std::vector<Index> cols(lm.order.begin(), lm.order.begin() + s + 1);
    adopt(b, s, std::move(rows), std::move(cols), lm.residual[static_cast<std::size_t>(s)]);
  }
}

}  // namespace

void chain_lower_bounds(const BoundsMatrix& logs, const std::vector<MaskedBlock*>& chain) {
  if (chain.empty()) return;
  require_chain(chain);
  // Tall blocks come first: |R| shrinks and |J| grows along the chain.
  std::size_t wide = 0;
  while (wide < chain.size() && length(chain[wide]->rows) + 1 >= length(chain[wide]->cols)) ++wide;
  if (wide > 0) tall_family(logs, chain, wide - 1);
  if (wide < chain.size()) wide_family(logs, chain, wide);
}

}  // namespace attnrank::detail
