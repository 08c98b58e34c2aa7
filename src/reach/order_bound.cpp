// The order bound on E*(A, 1) (attnrank/reach/detail/order_bound.hpp).
#include <attnrank/reach/detail/order_bound.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace attnrank::detail {

using Eigen::Index;

namespace {

/// A lower bound on x - y for doubles x, y (the nearest difference is within
/// half an ulp of the exact one; one step down makes it a bound).
double difference_down(double x, double y) { return std::nextafter(x - y, -std::numeric_limits<double>::infinity()); }

}  // namespace

OrderProof order_lower_bound(const BoundsMatrix& target, const Mask* mask, Index candidates) {
  const Eigen::MatrixXd& lo = target.lo;
  const Eigen::MatrixXd& hi = target.hi;
  const Index n = lo.rows(), m = lo.cols();
  OrderProof best;
  if (n < 2 || m < 2 || !lo.allFinite() || !hi.allFinite()) return best;
  // Rows whose largest entry is largest: their orders have the widest gaps.
  std::vector<Index> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), Index{0});
  const Eigen::VectorXd peak = lo.rowwise().maxCoeff();
  const auto kept = static_cast<std::size_t>(std::min(candidates, n));
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(kept), rows.end(),
                    [&](Index a, Index b) { return peak(a) > peak(b) || (peak(a) == peak(b) && a < b); });
  rows.resize(kept);
  const auto allowed = [&](Index i, Index j) { return !mask || mask->allows(i, j); };
  for (std::size_t x = 0; x < rows.size(); ++x)
    for (std::size_t y = x + 1; y < rows.size(); ++y) {
      const Index i = rows[x], k = rows[y];
      // Over the keys both rows allow: each row's largest, the key both weigh
      // most (largest smaller weight) and the key both weigh least.
      Index a = -1, a2 = -1, b = -1, c = -1;
      for (Index j = 0; j < m; ++j) {
        if (!allowed(i, j) || !allowed(k, j)) continue;
        if (a < 0 || lo(i, j) > lo(i, a)) a = j;
        if (a2 < 0 || lo(k, j) > lo(k, a2)) a2 = j;
        if (b < 0 || std::min(lo(i, j), lo(k, j)) > std::min(lo(i, b), lo(k, b))) b = j;
        if (c < 0 || std::max(hi(i, j), hi(k, j)) < std::max(hi(i, c), hi(k, c))) c = j;
      }
      if (a < 0 || a == a2 || b == c) continue;
      // Row i puts a above a2, row k a2 above a: they disagree on (a, a2);
      // both put b above c.
      const double gap = std::min({difference_down(lo(i, a), hi(i, a2)), difference_down(lo(k, a2), hi(k, a)),
                                   difference_down(lo(i, b), hi(i, c)), difference_down(lo(k, b), hi(k, c))});
      if (!(gap > 0)) continue;
      const double eps = std::nextafter(gap / 2, 0.0);  // halving is exact but for subnormals
      if (eps > best.eps) best = {eps, {i, k}, {a, a2, b, c}};
    }
  return best;
}

bool check_order_proof(const Matrix<Rational>& A, const Mask* mask, const std::array<Index, 2>& rows,
                       const std::array<Index, 4>& cols, double eps) {
  const Index n = A.rows();
  if (!(eps >= 0) || !std::isfinite(eps) || rows[0] == rows[1]) return false;
  for (Index r : rows)
    if (r < 0 || r >= n) return false;
  for (Index j : cols)
    if (j < 0 || j >= A.cols()) return false;
  if (cols[0] == cols[1] || cols[2] == cols[3]) return false;
  const Rational twice = 2 * to_rational(eps);
  int orders[2][2];  // orders[r][p]: +1 when row r puts the pair's first key above its second
  for (int r = 0; r < 2; ++r) {
    const Index i = rows[static_cast<std::size_t>(r)];
    Rational sum = 0;
    for (Index j = 0; j < A.cols(); ++j) sum += A(i, j);
    if (sum <= 0) return false;
    for (int p = 0; p < 2; ++p) {
      const Index j = cols[static_cast<std::size_t>(2 * p)], k = cols[static_cast<std::size_t>(2 * p + 1)];
      if (mask && (!mask->allows(i, j) || !mask->allows(i, k))) return false;
      const Rational gap = (A(i, j) - A(i, k)) / sum;
      if (gap > twice) orders[r][p] = 1;
      else if (-gap > twice) orders[r][p] = -1;
      else return false;
    }
  }
  // One row orders the pairs alike and the other oppositely.
  return orders[0][0] * orders[0][1] != orders[1][0] * orders[1][1];
}

}  // namespace attnrank::detail
