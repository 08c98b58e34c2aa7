// attnrank/reach/detail/chain_minors.hpp: a nested mask's block floors from two
// factorisations per chain.
//  * sound: every bound is a ones-row minor inside its block that MPFI re-proves
//    nonsingular, and never above the block's exact floor (targets 2^M, whose
//    floors are exact integer ranks);
//  * not vacuous: on generic targets the chains alone prove every block's shape,
//    so the staircase formula gives the floor with no per-block search.
#include "mask_support.hpp"

#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/reach/centered_log.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>
#include <attnrank/reach/detail/chain_minors.hpp>
#include <attnrank/reach/masked.hpp>

#include <random>

using namespace attnrank;
using namespace attnrank::test;

namespace {

using Eigen::Index;

std::vector<MaskedBlock> unbounded_blocks(const std::vector<AllowedBlock>& blocks) {
  std::vector<MaskedBlock> out;
  for (const AllowedBlock& a : blocks) {
    MaskedBlock b;
    b.rows = a.rows;
    b.cols = a.cols;
    out.push_back(b);
  }
  return out;
}

std::vector<MaskedBlock*> pointers(std::vector<MaskedBlock>& blocks) {
  std::vector<MaskedBlock*> out;
  for (MaskedBlock& b : blocks) out.push_back(&b);
  return out;
}

/// Enclosures of log A on the allowed set (1 counts elsewhere), as the floor reads them.
BoundsMatrix allowed_logs(const Matrix<Rational>& A, const Mask& mask) {
  Matrix<Rational> ones_off = A;
  for (Index i = 0; i < A.rows(); ++i)
    for (Index j = 0; j < A.cols(); ++j)
      if (!mask.allows(i, j)) ones_off(i, j) = 1;
  return certified_log_bounds(ones_off);
}

/// rank(M_B C) exactly, for the integer exponents M of a 2^M target (log A = M log 2).
Index exact_block_floor(const Matrix<Integer>& M, const MaskedBlock& b) {
  const auto r = static_cast<Index>(b.rows.size()), m = static_cast<Index>(b.cols.size());
  if (r == 0 || m <= 1) return 0;
  Matrix<Rational> centered(r, m);  // M_B (m I - 1 1^T): the same rank as M_B C
  for (Index i = 0; i < r; ++i) {
    Integer sum = 0;
    for (Index j = 0; j < m; ++j) sum += M(b.rows[static_cast<std::size_t>(i)], b.cols[static_cast<std::size_t>(j)]);
    for (Index j = 0; j < m; ++j)
      centered(i, j) = Rational(M(b.rows[static_cast<std::size_t>(i)], b.cols[static_cast<std::size_t>(j)]) * m - sum);
  }
  return exact_rank(centered).rank;
}

}  // namespace

TEST_CASE("attnrank::detail::chain_lower_bounds", "[property]") {
  rc::prop("every bound is a ones-row minor of its block that MPFI re-proves, never above the block's exact floor", [] {
    const auto n = *rc::gen::inRange<Index>(2, 15);
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    RC_PRE(staircase_of(mask).has_value());
    const auto r = *rc::gen::inRange<Index>(1, n + 1);
    const Matrix<Integer> M = gen_low_rank_exponents(n, r);
    const Matrix<Rational> A = masked_power_target(M, mask);
    const MaskedBlockLayout layout = masked_block_layout(mask);
    const BoundsMatrix logs = allowed_logs(A, mask);
    for (const auto* list : {&layout.blocks, &layout.overlaps}) {
      std::vector<MaskedBlock> chain = unbounded_blocks(*list);
      detail::chain_lower_bounds(logs, pointers(chain));
      for (const MaskedBlock& b : chain) {
        RC_ASSERT(b.lower <= exact_block_floor(M, b));
        if (b.lower == 0) continue;
        RC_ASSERT(b.minor_with_ones_row);
        RC_ASSERT(static_cast<Index>(b.minor_rows.size()) == b.lower);
        RC_ASSERT(static_cast<Index>(b.minor_cols.size()) == b.lower + 1);
        std::vector<Index> rows, cols;
        for (Index t : b.minor_rows) rows.push_back(b.rows.at(static_cast<std::size_t>(t)));
        for (Index t : b.minor_cols) cols.push_back(b.cols.at(static_cast<std::size_t>(t)));
        for (Index i : rows)
          for (Index j : cols) RC_ASSERT(mask.allows(i, j));
        detail::check_ones_row_minor_proof(A(rows, cols), 128, "a chain's minor", 64);  // throws if not proven
      }
    }
  });
  SECTION("generic causal and prefix-LM targets: the chains alone prove every shape, and the floor is floor(n / 2)") {
    std::mt19937_64 rng(4242);
    INFO("seed 4242");
    ReachOptions chains_only;
    chains_only.block_search_flops = 0;
    for (Index n : {2, 3, 5, 8, 13, 21, 34, 55}) {
      INFO("n = " << n);
      const Matrix<Rational> A = generic_causal_target(n, rng);
      const MaskedFloorBounds f = masked_floor_bounds(A, Mask::causal(n), chains_only);
      CHECK(f.lower == n / 2);
      CHECK(f.upper == n / 2);
      for (const auto* list : {&f.blocks, &f.overlaps})
        for (const MaskedBlock& b : *list) CHECK(b.lower == block_shape(b));
      // A bidirectional prefix of p tokens, causal after: rows below p allow the whole prefix.
      const Index p = std::max<Index>(1, n / 3);
      Matrix<Rational> allowed(n, n);
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j) allowed(i, j) = j <= std::max(i, p - 1) ? 1 : 0;
      const Mask prefix = Mask::from_matrix(allowed, "prefix-LM");
      Matrix<Rational> B = A;
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j)
          if (prefix.allows(i, j) && B(i, j) == 0) B(i, j) = Rational(1 + i + j, 3 + 2 * n);
      const MaskedFloorBounds g = masked_floor_bounds(B, prefix, chains_only);
      for (const auto* list : {&g.blocks, &g.overlaps})
        for (const MaskedBlock& b : *list) CHECK(b.lower == block_shape(b));
      CHECK(g.lower == g.upper);
    }
  }
  SECTION("blocks that are not a chain are a logic error") {
    std::vector<MaskedBlock> two(2);
    two[0].rows = {0, 1};
    two[0].cols = {0};
    two[1].rows = {0};  // not a suffix of {0, 1}
    two[1].cols = {0, 1};
    BoundsMatrix logs{Eigen::MatrixXd::Zero(2, 2), Eigen::MatrixXd::Zero(2, 2)};
    CHECK_THROWS_AS(detail::chain_lower_bounds(logs, pointers(two)), std::logic_error);
  }
}
