#pragma once
// The rectangle R x J the lower bound of E* uses at one eps (docs/math.md,
// section 9): rows and columns whose entries all exceed a threshold, chosen
// greedily. Any choice is sound (the lemma holds on every R x J with Â > eps);
// this one is deterministic, and the same as the dense reference in the tests.
// The entries are sorted once per matrix, so each threshold costs time in
// proportion to the entries at or below it, or (where nearly all are) to those
// above it, not to the matrix.

#include <Eigen/Core>

#include <cstdint>
#include <vector>

namespace attnrank::detail {

/// Each row's and each column's entries of `below` in increasing order (row i's
/// values are row_value[i * cols .. (i + 1) * cols), with their columns in
/// row_col; column j's likewise in col_value and col_row): the entries <= eps of
/// a line are then a prefix, found by bisection. `below` holds no NaN.
struct EntryOrder {
  Eigen::Index rows = 0, cols = 0;
  std::vector<double> row_value, col_value;
  std::vector<std::int32_t> row_col, col_row;
  bool empty() const { return rows == 0 && cols == 0; }
};
EntryOrder entry_order(const Eigen::MatrixXd& below);

/// Rows and columns whose entries all exceed eps (by the lower bounds of Â
/// `order` sorts): greedily drop the row or column with the largest share of
/// entries <= eps until none is left (ties go to the first line, columns before
/// rows).
void rows_and_columns_above(const EntryOrder& order, double eps, std::vector<Eigen::Index>& rows,
                            std::vector<Eigen::Index>& cols);

/// How many entries are <= eps. The entries <= eps are a prefix of all entries
/// in increasing order, so rows_and_columns_above depends on eps only through
/// this count: a key under which its answers can be remembered.
std::int64_t entries_at_most(const EntryOrder& order, double eps);

}  // namespace attnrank::detail
