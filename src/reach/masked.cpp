// Reachability under a mask (attnrank/reach/masked.hpp): the staircase, block
// floors, the verdict.
#include <attnrank/reach/masked.hpp>

#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/reach/detail/chain_minors.hpp>
#include <attnrank/reach/target.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace attnrank {
namespace {

using Eigen::Index;

/// What every block needs: the logs on the allowed set once, the exact
/// decomposition once (for exact kernels), the options.
struct BlockContext {
  const Matrix<Rational>& A;
  const ReachOptions& o;
  BoundsMatrix logs;  // log A on the allowed set, 0 elsewhere (A counts as 1 there)
  std::optional<LogDecomposition> decomposition;
  bool decomposition_tried = false;

  const std::optional<LogDecomposition>& exact() {
    if (!decomposition_tried) {
      decomposition_tried = true;
      // The zeros (masked positions) count as 1: log 1 = 0, never read.
      decomposition = decompose_log_where(A, o.limits, [&](Index i, Index j) { return detail::entry_sign(A(i, j)) != 0; });
    }
    return decomposition;
  }
};

/// Records a minor of log(A)_B C proving floor(B) >= lower when that beats the block's bound.
void adopt(MaskedBlock& b, Index lower, const std::vector<Index>& rows, const std::vector<Index>& cols, double residual) {
  if (lower <= b.lower) return;
  b.lower = lower;
  b.minor_rows.assign(rows.begin(), rows.begin() + lower);
  b.minor_cols.assign(cols.begin(), cols.begin() + lower);
  b.minor_residual = residual;
  b.minor_with_ones_row = false;
}

/// The block's lower bound in doubles: its leading minor (a generic block has
/// full rank min(rows, columns - 1): one test, no pivot search), else the
/// general certified rank. Reads only the logs, so blocks run on threads.
void lower_in_doubles(const BlockContext& c, MaskedBlock& b) {
  const Index r = static_cast<Index>(b.rows.size()), m = static_cast<Index>(b.cols.size());
  if (r == 0 || m <= 1) return;  // only the ones row, or log(A) C_1 = 0
  const Index shape = std::min(r, m - 1);
  const BoundsMatrix sub{c.logs.lo(b.rows, b.cols), c.logs.hi(b.rows, b.cols)};
  const BallMatrix ball = certified_row_centered(sub);
  const std::vector<Index> lead = detail::iota_indices(shape);
  // A large block of low numeric rank (a planted head) fails the leading-minor
  // test after paying a full factorisation; 64 pivots tell it apart first.
  constexpr Index probe = 64;
  const bool low_rank = shape > probe && numeric_rank_up_to(ball.mid, probe) < probe;
  if (const std::optional<double> residual = low_rank ? std::nullopt : certify_nonsingular_minor(ball, lead, lead)) {
    adopt(b, shape, lead, lead, *residual);
    return;
  }
  const CertifiedRank cr = certified_rank(ball, /*try_two_stages=*/false);  // singular by construction: C 1 = 0
  adopt(b, std::min(cr.lower, shape), cr.pivot_rows, cr.pivot_cols, cr.residual_bound);
}

/// The rest, one block at a time: MPFI at --bits where doubles fell short, and
/// the upper bound (shape, or the exact kernel of the block's exponents).
void finish(BlockContext& c, MaskedBlock& b) {
  const Index r = static_cast<Index>(b.rows.size()), m = static_cast<Index>(b.cols.size());
  if (r == 0 || m <= 1) {
    b.upper_reason = r == 0 ? "no target row" : "a single column";
    return;
  }
  const Index shape = std::min(r, m - 1);
  if (b.lower < shape && c.o.bits > 53 && std::max(r, m) <= c.o.mpfi_size_limit) {
    const PrecisionScope scope(c.o.bits);
    const Matrix<Rational> block = c.A(b.rows, b.cols);
    const CertifiedRank hp = certified_rank(centered_log(block));
    adopt(b, std::min(hp.lower, shape), hp.pivot_rows, hp.pivot_cols, hp.residual_bound);
  }
  b.upper = shape;
  b.upper_reason = "shape";
  if (b.lower < b.upper && c.exact()) {
    LogDecomposition d;
    d.bases = c.exact()->bases;
    for (const Matrix<Integer>& E : c.exact()->exponents) d.exponents.push_back(E(b.rows, b.cols));
    ExactRank er = centered_exponents_rank(d, static_cast<Index>(b.cols.size()));
    if (er.rank < b.upper && er.rank >= b.lower) {  // (below lower would contradict a proven minor)
      b.upper = er.rank;
      b.upper_reason = "exact kernel";
      b.bases = d.bases;
      b.kernel = std::move(er.kernel);
    }
  }
}

/// What lower_in_doubles costs at most on a block, in flops.
double search_flops(const MaskedBlock& b) {
  const double r = static_cast<double>(b.rows.size()), m = static_cast<double>(b.cols.size());
  return 4 * r * m * std::min(r, m);
}

/// Bounds on rank(log(A)_{rows, cols} C) for every block of `all` (index sets
/// filled in): the minor search on `searched`, then finish on all. The searches
/// are independent: dealt to threads in contiguous halves (a staircase's costs
/// are symmetric about its middle).
void bound_blocks(BlockContext& c, const std::vector<MaskedBlock*>& all, const std::vector<MaskedBlock*>& searched) {
  double flops = 0;
  for (const MaskedBlock* b : searched) flops += search_flops(*b);
  // for_row_blocks counts MPFR operations (about 50 flops each).
  detail::for_row_blocks(static_cast<long>(searched.size()), flops / 50, [&](long begin, long end) {
    for (long k = begin; k < end; ++k) lower_in_doubles(c, *searched[static_cast<std::size_t>(k)]);
  });
  for (MaskedBlock* b : all) finish(c, *b);
}

/// The blocks of a staircase the minor search still runs on: those the chains
/// left below their shape; all of them when their searches fit
/// block_search_flops (or with full_floor), else the squarest such B_k alone
/// (an overlap cannot raise the best block, and so many short blocks put the
/// staircase formula out of reach).
std::vector<MaskedBlock*> left_short(const std::vector<MaskedBlock*>& all, const std::vector<MaskedBlock*>& blocks,
                                     const ReachOptions& o) {
  std::vector<MaskedBlock*> out;
  double flops = 0;
  for (MaskedBlock* b : all)
    if (b->lower < block_shape(*b)) {
      out.push_back(b);
      flops += search_flops(*b);
    }
  if (o.full_floor || flops <= o.block_search_flops) return out;
  MaskedBlock* squarest = nullptr;
  for (MaskedBlock* b : blocks)
    if (b->lower < block_shape(*b) && (!squarest || block_shape(*b) > block_shape(*squarest))) squarest = b;
  if (!squarest) return {};
  return {squarest};
}

std::vector<Index> first(const std::vector<Index>& order, Index count) {
  return std::vector<Index>(order.begin(), order.begin() + count);
}

std::string sum_text(const std::vector<MaskedBlock>& blocks, bool lower) {
  Index total = 0;
  for (const MaskedBlock& b : blocks) total += lower ? b.lower : b.upper;
  return std::to_string(total);
}

/// The staircase's levels: the distinct row widths, then n for the ones row (full width).
std::vector<Index> levels_of(const Staircase& st, Index n) {
  std::vector<Index> levels(st.width.begin(), st.width.end());
  levels.push_back(n);
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  return levels;
}

/// The target rows allowing at least `width` keys.
std::vector<Index> rows_from(const Staircase& st, Index width) {
  std::vector<Index> rows;
  for (std::size_t i = 0; i < st.rows.size(); ++i)
    if (st.width[i] >= width) rows.push_back(st.rows[i]);
  return rows;
}

/// Each distinct row pattern's keys, with every row allowing them all.
std::vector<AllowedBlock> rectangles_of(const Mask& mask) {
  const Index n = mask.size();
  std::vector<AllowedBlock> out;
  for (Index i = 0; i < n; ++i) {
    std::vector<Index> cols;
    for (Index j = 0; j < n; ++j)
      if (mask.allows(i, j)) cols.push_back(j);
    if (std::any_of(out.begin(), out.end(), [&](const AllowedBlock& b) { return b.cols == cols; })) continue;
    std::vector<Index> rows;
    for (Index r = 0; r < n; ++r)
      if (std::all_of(cols.begin(), cols.end(), [&](Index j) { return mask.allows(r, j); })) rows.push_back(r);
    out.push_back({std::move(rows), std::move(cols)});
  }
  return out;
}

std::vector<MaskedBlock> unbounded(std::vector<AllowedBlock> blocks) {
  std::vector<MaskedBlock> out;
  for (AllowedBlock& a : blocks) {
    MaskedBlock b;
    b.rows = std::move(a.rows);
    b.cols = std::move(a.cols);
    out.push_back(std::move(b));
  }
  return out;
}

MaskedFloorBounds nested_bounds(BlockContext& c, MaskedBlockLayout layout) {
  const Index n = c.A.rows();
  MaskedFloorBounds f;
  f.nested = true;
  f.blocks = unbounded(std::move(layout.blocks));
  f.overlaps = unbounded(std::move(layout.overlaps));
  std::vector<MaskedBlock*> all, blocks, overlaps;  // all: in staircase order, blocks and overlaps interleaved
  for (std::size_t k = 0; k < f.blocks.size(); ++k) {
    all.push_back(&f.blocks[k]);
    blocks.push_back(&f.blocks[k]);
    if (k < f.overlaps.size()) {
      all.push_back(&f.overlaps[k]);
      overlaps.push_back(&f.overlaps[k]);
    }
  }
  // The two chains' factorisations first (one thread each), then the search where they fall short.
  const double n3 = std::pow(static_cast<double>(n), 3);
  detail::for_row_blocks(2, n3 / 50, [&](long begin, long end) {
    for (long k = begin; k < end; ++k) detail::chain_lower_bounds(c.logs, k == 0 ? blocks : overlaps);
  });
  bound_blocks(c, all, left_short(all, blocks, c.o));
  Index lower = 0, upper = 0, best_block = 0;
  for (const MaskedBlock& b : f.blocks) {
    lower += b.lower;
    upper += b.upper;
    best_block = std::max(best_block, b.lower);
  }
  for (const MaskedBlock& o : f.overlaps) {
    lower -= o.upper;
    upper -= o.lower;
  }
  f.lower = std::max({lower, best_block, Index{0}});
  f.upper = std::max(f.lower, std::min(upper, n - 1));
  f.lower_reason = "the staircase formula floor = sum floor(B_k) - sum floor(O_k) over " +
                   std::to_string(f.blocks.size()) + " blocks and " + std::to_string(f.overlaps.size()) +
                   " overlaps: blocks' proven minors sum to " + sum_text(f.blocks, true) +
                   ", overlaps' ranks are at most " + sum_text(f.overlaps, false);
  f.upper_reason = "the same formula: blocks' ranks are at most " + sum_text(f.blocks, false) +
                   " (shapes and exact kernels), overlaps' proven minors sum to " + sum_text(f.overlaps, true);
  return f;
}

MaskedFloorBounds rectangle_bounds(BlockContext& c, MaskedBlockLayout layout) {
  const Index n = c.A.rows();
  MaskedFloorBounds f;
  f.blocks = unbounded(std::move(layout.blocks));
  std::vector<MaskedBlock*> all;
  for (MaskedBlock& b : f.blocks) all.push_back(&b);
  bound_blocks(c, all, all);
  for (const MaskedBlock& b : f.blocks) f.lower = std::max(f.lower, b.lower);
  f.upper = n - 1;
  f.lower_reason = "the best of " + std::to_string(f.blocks.size()) +
                   " fully allowed rectangles (each row's keys, and every row allowing them all): a completion "
                   "restricts to each, so the floor is at least each rectangle's own floor";
  f.upper_reason = "a completion [T; 1^T] has n columns, so floor <= n - 1; the mask is not nested, and minimal rank "
                   "completion for such patterns is not decided here";
  return f;
}

}  // namespace

MaskedBlockLayout masked_block_layout(const Mask& mask) {
  MaskedBlockLayout layout;
  const std::optional<Staircase> st = staircase_of(mask);
  if (!st) {
    layout.blocks = rectangles_of(mask);
    return layout;
  }
  layout.nested = true;
  const std::vector<Index> levels = levels_of(*st, mask.size());
  for (std::size_t k = 0; k < levels.size(); ++k) {
    layout.blocks.push_back({rows_from(*st, levels[k]), first(st->cols, levels[k])});
    if (k + 1 < levels.size()) layout.overlaps.push_back({rows_from(*st, levels[k + 1]), first(st->cols, levels[k])});
  }
  return layout;
}

std::vector<AllowedBlock> fully_allowed_blocks(const Mask& mask) { return masked_block_layout(mask).blocks; }

namespace detail {
Matrix<Rational> allowed_zeros_replaced(const Matrix<Rational>& A, const Mask& mask) {
  Matrix<Rational> out = A;
  for (Index i = 0; i < A.rows(); ++i) replace_zeros_in_row(A, i, [&](Index j) { return mask.allows(i, j); }, out);
  for (Index i = 0; i < A.rows(); ++i)
    for (Index j = 0; j < A.cols(); ++j)
      if (!mask.allows(i, j) && mpq_sgn(out(i, j).backend().data()) != 0) out(i, j) = 0;  // 0 where masked, whatever A holds
  return out;
}
}  // namespace detail

std::optional<AllowedBlock> largest_allowed_block(const Mask& mask) {
  std::optional<AllowedBlock> best;
  Index best_shape = 0;
  for (AllowedBlock& b : masked_block_layout(mask).blocks) {
    const Index shape = b.cols.size() < 2 ? 0 : std::min<Index>(static_cast<Index>(b.rows.size()), static_cast<Index>(b.cols.size()) - 1);
    if (shape > best_shape) {
      best_shape = shape;
      best = std::move(b);
    }
  }
  return best;
}

std::optional<Staircase> staircase_of(const Mask& mask) {
  const Index n = mask.size();
  Staircase st;
  st.rows.resize(static_cast<std::size_t>(n));
  std::iota(st.rows.begin(), st.rows.end(), Index{0});
  std::stable_sort(st.rows.begin(), st.rows.end(),
                   [&](Index a, Index b) { return mask.allowed_in_row(a) < mask.allowed_in_row(b); });
  std::vector<char> placed(static_cast<std::size_t>(n), 0);
  for (std::size_t k = 0; k < st.rows.size(); ++k) {
    const Index r = st.rows[k];
    // The columns placed so far must all be allowed here (the chain); add the new ones.
    for (Index j : st.cols)
      if (!mask.allows(r, j)) return std::nullopt;
    for (Index j = 0; j < n; ++j)
      if (mask.allows(r, j) && !placed[static_cast<std::size_t>(j)]) {
        placed[static_cast<std::size_t>(j)] = 1;
        st.cols.push_back(j);
      }
    st.width.push_back(mask.allowed_in_row(r));
  }
  for (Index j = 0; j < n; ++j)  // keys no query attends to: seen by the ones row alone
    if (!placed[static_cast<std::size_t>(j)]) st.cols.push_back(j);
  return st;
}

namespace {

/// validate_masked_target past validate_target, on rationals or on doubles.
template <class Derived>
void validate_masked_entries(const Eigen::MatrixBase<Derived>& A, const Mask& mask, const std::string& source) {
  mask.require_size(A.rows(), source);
  for (Index i = 0; i < A.rows(); ++i)
    for (Index j = 0; j < A.cols(); ++j)
      if (!mask.allows(i, j) && detail::entry_sign(A(i, j)) != 0) {
        // The weights exactly where the mask blocks and nowhere else: a mask in the other convention.
        bool complement = true;
        for (Index r = 0; r < A.rows() && complement; ++r)
          for (Index c = 0; c < A.cols() && complement; ++c)
            complement = (detail::entry_sign(A(r, c)) != 0) != mask.allows(r, c);
        const std::string shown = detail::entry_decimal(A(i, j));
        throw input_error(entry_text(source, i, j) + " is " +
                              shown + " at a masked position; a masked head puts exactly 0 there" +
                              (complement ? std::string(". The pattern's weights are exactly where the mask blocks: ") +
                                                inverted_mask_hint
                                          : std::string()),
                          source, static_cast<long>(i + 1), static_cast<long>(j + 1));
      }
}

}  // namespace

void validate_masked_target(const Matrix<Rational>& A, const Mask& mask, const std::string& source) {
  validate_target(A, source);
  validate_masked_entries(A, mask, source);
}

void validate_masked_target(const Eigen::MatrixXd& A, const Mask& mask, const std::string& source) {
  validate_target(A, source);
  validate_masked_entries(A, mask, source);
}

bool zeros_are_causal(const Matrix<Rational>& A) {
  if (A.rows() < 2 || A.rows() != A.cols()) return false;
  for (Index i = 0; i < A.rows(); ++i)
    for (Index j = 0; j < A.cols(); ++j)
      if ((mpq_sgn(A(i, j).backend().data()) == 0) != (j > i)) return false;
  return true;
}

MaskedFloorBounds masked_floor_bounds(const Matrix<Rational>& A, const Mask& mask, const ReachOptions& o) {
  // Masked positions count as 1 (log 1 = 0, never read); A is not copied.
  BlockContext c{A, o, certified_log_bounds_where(A, [&](Index i, Index j) { return mask.allows(i, j); }),
                 std::nullopt, false};
  MaskedBlockLayout layout = masked_block_layout(mask);
  MaskedFloorBounds f = layout.nested ? nested_bounds(c, std::move(layout)) : rectangle_bounds(c, std::move(layout));
  f.lower_bits = o.bits;
  return f;
}

MaskedReachResult reach(const Matrix<Rational>& A, Index dk, const Mask& mask, const ReachOptions& o) {
  validate_masked_target(A, mask, "target");
  const Index n = A.rows();
  require_head_width(dk, n);
  require_precision_bits(o.bits);
  MaskedReachResult res;
  res.n = n;
  res.dk = dk;
  res.mask = mask.name();
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      if (mask.allows(i, j) && mpq_sgn(A(i, j).backend().data()) == 0) res.zeros.emplace_back(i, j);
  res.floor.nested = staircase_of(mask).has_value();
  if (!res.zeros.empty()) {
    res.has_zero_entry = true;
    res.verdict = Verdict::unreachable;
    res.reason = "the target has a zero at an allowed position (" +
                 entry_text("A", static_cast<long>(res.zeros[0].first), static_cast<long>(res.zeros[0].second)) +
                 "); softmax of finite scores over the allowed keys is positive there";
    if (res.zeros.size() > 8) res.zeros.resize(8);
  } else {
    res.floor = masked_floor_bounds(A, mask, o);
    const MaskedFloorBounds& f = res.floor;
    if (dk < f.lower) {
      res.verdict = Verdict::unreachable;
      res.reason = "floor >= " + std::to_string(f.lower) + " > d_k = " + std::to_string(dk) + " (" + f.lower_reason +
                   "), and every score matrix Q K^T has rank <= d_k";
    } else if (f.upper <= dk) {
      res.verdict = Verdict::reachable;
      res.reason = "floor <= " + std::to_string(f.upper) + " <= d_k = " + std::to_string(dk) + " (" + f.upper_reason +
                   "): some completion of log A + c 1^T on the allowed set has rank <= d_k";
    } else {
      res.verdict = Verdict::undecided;
      res.reason = std::to_string(f.lower) + " <= floor <= " + std::to_string(f.upper) + " and d_k = " +
                   std::to_string(dk) + " lies in between";
      res.hint = f.nested ? "raise the precision, bits (now " + std::to_string(f.lower_bits) +
                                "): more precision can prove larger minors in the blocks and overlaps; only exact "
                                "structure of the target lowers the blocks' upper bounds"
                          : "the mask is not nested (its rows' allowed sets are not a chain), so only the rectangle "
                            "bound and n - 1 are proven; minimal rank completion for such masks is hard in general";
    }
  }
  if (o.witness) {
    const Matrix<Rational> positive = res.has_zero_entry ? detail::allowed_zeros_replaced(A, mask) : A;
    Witness w = approx_masked_witness(positive, mask, dk);
    w.error_bits = 53;
    w.max_abs_error = certified_masked_witness_error(A, mask, w.Q, w.K);
    res.witness = std::move(w);
  }
  return res;
}

}  // namespace attnrank
