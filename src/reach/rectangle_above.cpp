// The greedy R x J above a threshold (reach/detail/rectangle_above.hpp).
#include <attnrank/reach/detail/rectangle_above.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <utility>

namespace attnrank::detail {
namespace {

using Eigen::Index;

/// Sorts (key, index) pairs by key, then index, as std::sort would: least
/// significant digit first, 16 bits a pass, each pass stable. The indices come in
/// increasing order, so stability keeps ties in index order.
void radix_sort_keyed(std::vector<std::pair<std::uint64_t, std::uint64_t>>& v) {
  if (v.empty()) return;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> scratch(v.size());
  std::vector<std::size_t> count(1 << 16);
  for (int shift = 0; shift < 64; shift += 16) {
    std::fill(count.begin(), count.end(), 0);
    for (const auto& e : v) ++count[(e.first >> shift) & 0xffff];
    if (count[(v.front().first >> shift) & 0xffff] == v.size()) continue;  // one digit value: already in order
    std::size_t total = 0;
    for (std::size_t& c : count) {
      const std::size_t here = c;
      c = total;
      total += here;
    }
    for (const auto& e : v) scratch[count[(e.first >> shift) & 0xffff]++] = e;
    v.swap(scratch);
  }
}

/// The indices whose flag is set.
std::vector<Index> flagged(const std::vector<bool>& in) {
  std::vector<Index> out;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i]) out.push_back(static_cast<Index>(i));
  return out;
}

/// How many of each line's sorted entries are <= eps (values are never NaN).
std::vector<int> prefix_lengths(const std::vector<double>& values, Index lines, Index length, double eps) {
  std::vector<int> out(static_cast<std::size_t>(lines));
  for (Index l = 0; l < lines; ++l) {
    const double* first = values.data() + l * length;
    out[static_cast<std::size_t>(l)] = static_cast<int>(std::upper_bound(first, first + length, eps) - first);
  }
  return out;
}

/// The lines by their count of entries <= eps, one bitset of lines per count:
/// the first line with the most such entries (what the dense rule picks) is the
/// lowest set bit of the highest non-empty count. Counts only fall, one at a
/// time, so the highest count only falls too; a move is two bit flips.
class LineBuckets {
 public:
  LineBuckets(const std::vector<int>& counts, int most)
      : words_((counts.size() + 63) / 64), bits_(static_cast<std::size_t>(most + 1) * words_, 0),
        sizes_(static_cast<std::size_t>(most + 1), 0) {
    for (std::size_t l = 0; l < counts.size(); ++l) {
      flip(counts[l], l);
      ++sizes_[static_cast<std::size_t>(counts[l])];
      top_ = std::max(top_, counts[l]);
    }
  }
  /// The line's count fell from `from` by one.
  void fall(int from, std::size_t line) {
    flip(from, line);
    flip(from - 1, line);
    --sizes_[static_cast<std::size_t>(from)];
    ++sizes_[static_cast<std::size_t>(from - 1)];
  }
  void remove(int count, std::size_t line) {
    flip(count, line);
    --sizes_[static_cast<std::size_t>(count)];
  }
  /// The first line with the highest count above 0, or -1.
  Index top() {
    while (top_ > 0 && sizes_[static_cast<std::size_t>(top_)] == 0) --top_;
    if (top_ == 0) return -1;
    const std::uint64_t* bucket = bits_.data() + static_cast<std::size_t>(top_) * words_;
    for (std::size_t w = 0;; ++w)
      if (bucket[w]) return static_cast<Index>(w * 64 + static_cast<std::size_t>(std::countr_zero(bucket[w])));
  }

 private:
  void flip(int count, std::size_t line) {
    bits_[static_cast<std::size_t>(count) * words_ + line / 64] ^= std::uint64_t{1} << (line % 64);
  }
  std::size_t words_;
  std::vector<std::uint64_t> bits_;
  std::vector<std::size_t> sizes_;
  int top_ = 0;
};

}  // namespace

EntryOrder entry_order(const Eigen::MatrixXd& below) {
  EntryOrder o;
  o.rows = below.rows();
  o.cols = below.cols();
  // (key, index) pairs sorted as integers: the key orders doubles as numbers
  // (sign bit flipped for non-negatives, every bit for negatives; -0 counts as +0),
  // and the index breaks ties as a stable sort would. Then each entry goes to its
  // row's and its column's list in that order, so every list is sorted.
  const std::size_t size = static_cast<std::size_t>(below.size());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed(size);
  for (std::size_t t = 0; t < size; ++t) {
    const double v = below.data()[t] == 0 ? 0.0 : below.data()[t];
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
    keyed[t] = {bits >> 63 ? ~bits : bits | (std::uint64_t{1} << 63), t};
  }
  radix_sort_keyed(keyed);
  o.row_value.resize(size);
  o.row_col.resize(size);
  o.col_value.resize(size);
  o.col_row.resize(size);
  std::vector<std::size_t> row_fill(static_cast<std::size_t>(o.rows)), col_fill(static_cast<std::size_t>(o.cols));
  for (Index i = 0; i < o.rows; ++i) row_fill[static_cast<std::size_t>(i)] = static_cast<std::size_t>(i * o.cols);
  for (Index j = 0; j < o.cols; ++j) col_fill[static_cast<std::size_t>(j)] = static_cast<std::size_t>(j * o.rows);
  for (const auto& [key, index] : keyed) {
    const Index t = static_cast<Index>(index);
    const Index i = t % o.rows, j = t / o.rows;  // column-major
    const double v = below.data()[t];
    const std::size_t r = row_fill[static_cast<std::size_t>(i)]++, c = col_fill[static_cast<std::size_t>(j)]++;
    o.row_value[r] = v;
    o.row_col[r] = static_cast<std::int32_t>(j);
    o.col_value[c] = v;
    o.col_row[c] = static_cast<std::int32_t>(i);
  }
  return o;
}

void rows_and_columns_above(const EntryOrder& order, double eps, std::vector<Index>& rows, std::vector<Index>& cols) {
  const Index n = order.rows, m = order.cols;
  // Each line's bad entries (below <= eps) are a prefix of its sorted list; the
  // prefix stays the line's list of bad entries, the counts fall as the lines
  // across are dropped.
  const std::vector<int> row_prefix = prefix_lengths(order.row_value, n, m, eps);
  const std::vector<int> col_prefix = prefix_lengths(order.col_value, m, n, eps);
  std::vector<int> row_bad = row_prefix, col_bad = col_prefix;
  LineBuckets row_buckets(row_bad, static_cast<int>(m)), col_buckets(col_bad, static_cast<int>(n));
  std::vector<bool> row_in(static_cast<std::size_t>(n), true), col_in(static_cast<std::size_t>(m), true);
  std::int64_t rows_left = n, cols_left = m;
  while (true) {
    const Index best_row = row_buckets.top(), best_col = col_buckets.top();
    const int r = best_row < 0 ? 0 : row_bad[static_cast<std::size_t>(best_row)];
    const int c = best_col < 0 ? 0 : col_bad[static_cast<std::size_t>(best_col)];
    if (r == 0 && c == 0) break;
    // The larger share of bad entries goes: c of the column's rows_left against
    // r of the row's cols_left (a count alone drops every row of a tall R x J).
    if (static_cast<std::int64_t>(c) * cols_left >= static_cast<std::int64_t>(r) * rows_left) {
      --cols_left;
      col_in[static_cast<std::size_t>(best_col)] = false;
      col_buckets.remove(c, static_cast<std::size_t>(best_col));
      const std::int32_t* across = order.col_row.data() + best_col * n;
      for (int t = 0; t < col_prefix[static_cast<std::size_t>(best_col)]; ++t) {
        const std::size_t i = static_cast<std::size_t>(across[t]);
        if (row_in[i]) row_buckets.fall(row_bad[i]--, i);
      }
      col_bad[static_cast<std::size_t>(best_col)] = 0;
    } else {
      --rows_left;
      row_in[static_cast<std::size_t>(best_row)] = false;
      row_buckets.remove(r, static_cast<std::size_t>(best_row));
      const std::int32_t* across = order.row_col.data() + best_row * m;
      for (int t = 0; t < row_prefix[static_cast<std::size_t>(best_row)]; ++t) {
        const std::size_t j = static_cast<std::size_t>(across[t]);
        if (col_in[j]) col_buckets.fall(col_bad[j]--, j);
      }
      row_bad[static_cast<std::size_t>(best_row)] = 0;
    }
  }
  rows = flagged(row_in);
  cols = flagged(col_in);
}

std::int64_t entries_at_most(const EntryOrder& order, double eps) {
  std::int64_t total = 0;
  for (const int c : prefix_lengths(order.row_value, order.rows, order.cols, eps)) total += c;
  return total;
}

}  // namespace attnrank::detail
