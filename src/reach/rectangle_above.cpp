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
/// lowest set bit of the highest non-empty count. Counts only fall, and they
/// fall in the caller's array without touching the buckets: a line's bit stays
/// where it was until top() meets it and moves it down to its current count.
/// Every bucket above the one top() answers from has been emptied, so each line
/// with that count is in it, and the answer is the dense rule's. (Moving a bit at
/// every fall cost two scattered writes per entry, most of the greedy's time.)
class LineBuckets {
 public:
  LineBuckets(const std::vector<int>& counts, int most)
      : words_((counts.size() + 63) / 64), bits_(static_cast<std::size_t>(most + 1) * words_, 0),
        recorded_(counts) {
    for (std::size_t l = 0; l < counts.size(); ++l) {
      flip(counts[l], l);
      top_ = std::max(top_, counts[l]);
    }
  }
  /// The line leaves; top() has just named it, so its bit is at its count.
  void remove(std::size_t line) { flip(recorded_[line], line); }
  /// The first line with the highest count above 0, or -1, by `counts`: the
  /// counts given at construction, each fallen since by zero or more.
  Index top(const std::vector<int>& counts) {
    while (top_ > 0) {
      std::uint64_t* bucket = bits_.data() + static_cast<std::size_t>(top_) * words_;
      std::size_t w = 0;
      while (w < words_ && bucket[w] == 0) ++w;
      if (w == words_) {
        --top_;
        continue;
      }
      const std::size_t line = w * 64 + static_cast<std::size_t>(std::countr_zero(bucket[w]));
      const int now = counts[line];
      if (now == top_) return static_cast<Index>(line);
      flip(top_, line);  // fallen since it was placed: down to where it is now
      recorded_[line] = now;
      if (now > 0) flip(now, line);
    }
    return -1;
  }

 private:
  void flip(int count, std::size_t line) {
    bits_[static_cast<std::size_t>(count) * words_ + line / 64] ^= std::uint64_t{1} << (line % 64);
  }
  std::size_t words_;
  std::vector<std::uint64_t> bits_;
  std::vector<int> recorded_;  // the bucket each line's bit is in
  int top_ = 0;
};

/// The lines by their count of good entries (those above eps, among the lines
/// still in), one bitset of lines per count; counts only fall. bottom() is the
/// first line with the fewest, the one with the most bad entries: the dense
/// rule's choice. Unlike LineBuckets each fall moves the line's bit at once (the
/// lowest count cannot be found lazily when counts fall), which is cheap here:
/// it is used where good entries are few.
class FewestBuckets {
 public:
  FewestBuckets(const std::vector<int>& counts, int most)
      : words_((counts.size() + 63) / 64), bits_(static_cast<std::size_t>(most + 1) * words_, 0),
        lowest_(most) {
    for (std::size_t l = 0; l < counts.size(); ++l) {
      flip(counts[l], l);
      lowest_ = std::min(lowest_, counts[l]);
    }
  }
  void remove(std::size_t line, int count) { flip(count, line); }
  /// The line's count falls from `count` by one.
  void fall(std::size_t line, int count) {
    flip(count, line);
    flip(count - 1, line);
    lowest_ = std::min(lowest_, count - 1);
  }
  /// The first line with the lowest count, or -1 when none is left.
  Index bottom() {
    const int levels = static_cast<int>(bits_.size() / std::max<std::size_t>(words_, 1));
    for (; lowest_ < levels; ++lowest_) {
      const std::uint64_t* bucket = bits_.data() + static_cast<std::size_t>(lowest_) * words_;
      for (std::size_t w = 0; w < words_; ++w)
        if (bucket[w] != 0) return static_cast<Index>(w * 64 + static_cast<std::size_t>(std::countr_zero(bucket[w])));
    }
    return -1;
  }

 private:
  void flip(int count, std::size_t line) {
    bits_[static_cast<std::size_t>(count) * words_ + line / 64] ^= std::uint64_t{1} << (line % 64);
  }
  std::size_t words_;
  std::vector<std::uint64_t> bits_;
  int lowest_;
};

/// The greedy by counting bad entries: dropping a line lowers the bad counts of
/// the lines across its bad entries. The larger share of bad entries goes: c of
/// the column's rows_left against r of the row's cols_left (a count alone drops
/// every row of a tall R x J). The counts of lines already dropped fall too: no
/// one reads them again.
void drop_by_bad_entries(const EntryOrder& order, const std::vector<int>& row_prefix, const std::vector<int>& col_prefix,
                         std::vector<bool>& row_in, std::vector<bool>& col_in) {
  const Index n = order.rows, m = order.cols;
  std::vector<int> row_bad = row_prefix, col_bad = col_prefix;
  LineBuckets row_buckets(row_bad, static_cast<int>(m)), col_buckets(col_bad, static_cast<int>(n));
  std::int64_t rows_left = n, cols_left = m;
  while (true) {
    const Index best_row = row_buckets.top(row_bad), best_col = col_buckets.top(col_bad);
    const int r = best_row < 0 ? 0 : row_bad[static_cast<std::size_t>(best_row)];
    const int c = best_col < 0 ? 0 : col_bad[static_cast<std::size_t>(best_col)];
    if (r == 0 && c == 0) break;
    if (static_cast<std::int64_t>(c) * cols_left >= static_cast<std::int64_t>(r) * rows_left) {
      --cols_left;
      col_in[static_cast<std::size_t>(best_col)] = false;
      col_buckets.remove(static_cast<std::size_t>(best_col));
      const std::int32_t* across = order.col_row.data() + best_col * n;
      const int bad = col_prefix[static_cast<std::size_t>(best_col)];
      for (int t = 0; t < bad; ++t) --row_bad[static_cast<std::size_t>(across[t])];
    } else {
      --rows_left;
      row_in[static_cast<std::size_t>(best_row)] = false;
      row_buckets.remove(static_cast<std::size_t>(best_row));
      const std::int32_t* across = order.row_col.data() + best_row * m;
      const int bad = row_prefix[static_cast<std::size_t>(best_row)];
      for (int t = 0; t < bad; ++t) --col_bad[static_cast<std::size_t>(across[t])];
    }
  }
}

/// The same greedy by counting good entries among the lines still in: a row's
/// bad count is cols_left less its good count, so the row with the most bad
/// entries is the first with the fewest good ones (likewise for columns), and
/// dropping a line lowers the good counts of the lines still in across its good
/// entries.
void drop_by_good_entries(const EntryOrder& order, const std::vector<int>& row_prefix, const std::vector<int>& col_prefix,
                          std::vector<bool>& row_in, std::vector<bool>& col_in) {
  const Index n = order.rows, m = order.cols;
  std::vector<int> row_good(static_cast<std::size_t>(n)), col_good(static_cast<std::size_t>(m));
  for (Index i = 0; i < n; ++i) row_good[static_cast<std::size_t>(i)] = static_cast<int>(m) - row_prefix[static_cast<std::size_t>(i)];
  for (Index j = 0; j < m; ++j) col_good[static_cast<std::size_t>(j)] = static_cast<int>(n) - col_prefix[static_cast<std::size_t>(j)];
  FewestBuckets row_buckets(row_good, static_cast<int>(m)), col_buckets(col_good, static_cast<int>(n));
  std::int64_t rows_left = n, cols_left = m;
  while (true) {
    const Index best_row = row_buckets.bottom(), best_col = col_buckets.bottom();
    const std::int64_t r = best_row < 0 ? 0 : cols_left - row_good[static_cast<std::size_t>(best_row)];
    const std::int64_t c = best_col < 0 ? 0 : rows_left - col_good[static_cast<std::size_t>(best_col)];
    if (r == 0 && c == 0) break;
    if (c * cols_left >= r * rows_left) {
      --cols_left;
      col_in[static_cast<std::size_t>(best_col)] = false;
      col_buckets.remove(static_cast<std::size_t>(best_col), col_good[static_cast<std::size_t>(best_col)]);
      const std::int32_t* across = order.col_row.data() + best_col * n;
      for (Index t = col_prefix[static_cast<std::size_t>(best_col)]; t < n; ++t) {
        const auto i = static_cast<std::size_t>(across[t]);
        if (row_in[i]) row_buckets.fall(i, row_good[i]--);
      }
    } else {
      --rows_left;
      row_in[static_cast<std::size_t>(best_row)] = false;
      row_buckets.remove(static_cast<std::size_t>(best_row), row_good[static_cast<std::size_t>(best_row)]);
      const std::int32_t* across = order.row_col.data() + best_row * m;
      for (Index t = row_prefix[static_cast<std::size_t>(best_row)]; t < m; ++t) {
        const auto j = static_cast<std::size_t>(across[t]);
        if (col_in[j]) col_buckets.fall(j, col_good[j]--);
      }
    }
  }
}

}  // namespace

EntryOrder entry_order(const Eigen::MatrixXd& below) {
  EntryOrder o;
  o.rows = below.rows();
  o.cols = below.cols();
  // (key, index) pairs sorted as integers: the key orders doubles as numbers
  // (sign bit flipped for non-negatives, every bit for negatives; -0 counts as +0),
  // and the index breaks ties as a stable sort would. Then each entry goes to its
  // row's and its column's list in that order, so every list is sorted.
  // Zeros (half of a causal target's bounds: its masked entries) skip the sort:
  // they share one key, so in index order they already are in place, between
  // the negatives and the positives.
  const std::size_t size = static_cast<std::size_t>(below.size());
  constexpr std::uint64_t zero_key = std::uint64_t{1} << 63;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed, zeros;
  keyed.reserve(size);
  for (std::size_t t = 0; t < size; ++t) {
    const double v = below.data()[t];
    if (v == 0) {
      zeros.emplace_back(zero_key, t);
      continue;
    }
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
    keyed.emplace_back(bits >> 63 ? ~bits : bits | zero_key, t);
  }
  radix_sort_keyed(keyed);
  const auto positives = std::partition_point(keyed.begin(), keyed.end(), [](const auto& e) { return e.first < zero_key; });
  keyed.insert(positives, zeros.begin(), zeros.end());
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
  // Each line's bad entries (below <= eps) are a prefix of its sorted list, its
  // good entries the rest. Dropping a line costs a pass over one of the two, and
  // both passes make the same choices. A good entry costs about six bad ones (it
  // moves a bit at once, LineBuckets' decrement is lazy), so the good ones are
  // counted only where they are fewer than a seventh: at large eps, where a
  // causal target's masked half and nearly all the rest are bad (a call at
  // n = 1024: 5 ms -> 0.05 ms at eps = 0.03; the crossover was near 6/7 bad).
  const std::vector<int> row_prefix = prefix_lengths(order.row_value, n, m, eps);
  const std::vector<int> col_prefix = prefix_lengths(order.col_value, m, n, eps);
  std::int64_t bad = 0;
  for (const int c : row_prefix) bad += c;
  std::vector<bool> row_in(static_cast<std::size_t>(n), true), col_in(static_cast<std::size_t>(m), true);
  const std::int64_t good = static_cast<std::int64_t>(n) * m - bad;
  if (6 * good >= bad) drop_by_bad_entries(order, row_prefix, col_prefix, row_in, col_in);
  else drop_by_good_entries(order, row_prefix, col_prefix, row_in, col_in);
  rows = flagged(row_in);
  cols = flagged(col_in);
}

std::int64_t entries_at_most(const EntryOrder& order, double eps) {
  std::int64_t total = 0;
  for (const int c : prefix_lengths(order.row_value, order.rows, order.cols, eps)) total += c;
  return total;
}

}  // namespace attnrank::detail
