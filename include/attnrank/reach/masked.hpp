#pragma once
// Reachability under a mask: can a masked head of width d_k produce A?
//
// Omega is the allowed set (attention/mask.hpp); A is zero exactly off Omega and
// L = log A on Omega. A head produces A iff some S of rank <= d_k has
// S = L + c 1^T on Omega for some c (masked scores are -inf, so only Omega
// matters). For any completion T of L, min_c rank(T + c 1^T) = rank(T C) =
// rank([T; 1^T]) - 1, hence (docs/math.md; proofs/ formalises the reduction)
//     floor_Omega(A) = mr([L; 1^T]) - 1,
// mr the minimal rank over all completions of the partial matrix [L; 1^T].
//
// Nested masks (the rows' allowed sets form a chain: causal, prefix-LM, causal
// with a bidirectional prefix): ordering rows by how many keys they allow and
// columns by how many rows allow them makes every row a prefix, [L; 1^T] is
// block lower triangular, and (Woerdeman 1987, "The lower order of lower
// triangular operators and minimal rank extensions"; Cohen, Johnson, Rodman and
// Woerdeman 1989, "Ranks of completions of partial matrices")
//     mr = sum_k rank(B_k) - sum_k rank(B_k ∩ B_k+1)
// over the maximal fully specified blocks B_k. Every block contains the ones
// row, and rank([T; 1^T]) = rank(T C) + 1, so with floor(B) = rank(L_B C) (the
// block's own centered log; 0 for a block with no target row or one column)
//     floor_Omega = sum_k floor(B_k) - sum_k floor(O_k),   O_k = B_k ∩ B_k+1.
// Bounds follow: lower = sum lo(B_k) - sum hi(O_k), upper = sum hi(B_k) -
// sum lo(O_k), each block's lo a proven nonsingular minor and hi its shape or
// an exact kernel (reach/log_exponents.hpp). For a generic causal target every
// bound is tight and the floor is floor(n/2).
//
// Other masks: minimal rank completion is hard in general. Each fully specified
// rectangle R x J gives floor_Omega >= floor(R x J) (a completion restricts to
// it); the upper bound is n - 1 (a completion [T; 1^T] has n columns). Between
// them the verdict is `undecided`, with the reason.
//
// How close a masked head comes (the approximate question, reach/approximate.hpp)
// has the same lower bound: the lemma on R x J needs only that every entry there
// exceeds eps, so R x J lies inside the allowed set (Â is 0 off it), where
// log P = S - lse row by row, with lse over the allowed keys. The upper bound is
// certified error of the better of the masked witness and an L-BFGS search on
// the masked softmax started from it.

#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/free.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace attnrank {

/// A nested mask as a staircase: in the orders `rows` and `cols` (permutations
/// of 0..n-1) row rows[i] allows exactly the columns cols[0 .. width[i] - 1],
/// widths non-decreasing.
struct Staircase {
  std::vector<Eigen::Index> rows, cols, width;
};

/// The staircase of a mask whose rows' allowed sets form a chain, or nothing.
std::optional<Staircase> staircase_of(const Mask& mask);

/// A fully allowed block: target rows (0-based) by columns, every position allowed.
struct AllowedBlock {
  std::vector<Eigen::Index> rows, cols;
};

/// The blocks the floor bounds use, a function of the mask alone (so a
/// certificate checker derives them itself): for a nested mask the staircase's
/// maximal blocks B_k and their overlaps O_k = B_k ∩ B_k+1, in staircase order;
/// otherwise each distinct row pattern's keys with every row allowing them all
/// (and no overlaps).
struct MaskedBlockLayout {
  bool nested = false;
  std::vector<AllowedBlock> blocks, overlaps;
};
MaskedBlockLayout masked_block_layout(const Mask& mask);

/// The blocks of masked_block_layout (the B_k, or the rectangles).
std::vector<AllowedBlock> fully_allowed_blocks(const Mask& mask);

/// The fully allowed block of masked_block_layout with the largest
/// min(rows, columns - 1) (the most a block's floor can be; the first such),
/// or nothing when no block has two columns and a row.
std::optional<AllowedBlock> largest_allowed_block(const Mask& mask);

/// Proven bounds on floor(B) = rank(log(A)_{rows, cols} C) of one fully
/// specified block (0-based target rows and columns; the ones row is implicit).
struct MaskedBlock {
  std::vector<Eigen::Index> rows, cols;
  Eigen::Index lower = 0, upper = 0;
  /// The proof of lower: log(A)_{rows, cols} C restricted to these positions
  /// (indices into rows and cols) is proven nonsingular, ||I - R M|| <= residual.
  std::vector<Eigen::Index> minor_rows, minor_cols;
  double minor_residual = 0;
  /// true: the proof is instead that [log(A)_{minor_rows, minor_cols}; 1^T] (one
  /// more column than rows) is nonsingular, which proves the same lower:
  /// rank([L; 1^T]) = rank(L C) + 1 (reach/detail/chain_minors.hpp).
  bool minor_with_ones_row = false;
  std::string upper_reason;  ///< "shape", "exact kernel", "a single column" or "no target row"
  /// The proof of an "exact kernel" upper: pairwise coprime bases over which
  /// every entry of the block factors, and independent integer vectors (one per
  /// column, |cols| entries each) annihilated by every centered exponent matrix,
  /// so upper = |cols| - kernel.cols(). Empty otherwise.
  std::vector<Integer> bases;
  Matrix<Integer> kernel;
};

/// min(rows, columns - 1): the most floor(B) of a block can be (0 with no target
/// row or a single column).
inline Eigen::Index block_shape(Eigen::Index rows, Eigen::Index cols) {
  return rows == 0 || cols <= 1 ? 0 : std::min(rows, cols - 1);
}
inline Eigen::Index block_shape(const MaskedBlock& b) {
  return block_shape(static_cast<Eigen::Index>(b.rows.size()), static_cast<Eigen::Index>(b.cols.size()));
}

struct MaskedFloorBounds {
  Eigen::Index lower = 0, upper = 0;
  bool nested = false;
  /// nested: the staircase's blocks B_k and overlaps O_k (lower = sum of the
  /// blocks' lowers minus the overlaps' uppers, upper the other way round);
  /// otherwise: the rectangles, and lower is the best of their lowers.
  std::vector<MaskedBlock> blocks, overlaps;
  unsigned lower_bits = 53;
  std::string lower_reason, upper_reason;
};

struct MaskedReachResult {
  Eigen::Index n = 0, dk = 0;
  std::string mask;  ///< Mask::name()
  Verdict verdict = Verdict::undecided;
  MaskedFloorBounds floor;
  bool has_zero_entry = false;  ///< a zero at an allowed position (floor then holds only `nested`)
  std::vector<std::pair<Eigen::Index, Eigen::Index>> zeros;
  /// A masked head of width d_k: scores Q K^T / sqrt(d_k), masked softmax;
  /// max_abs_error is certified (doubles, directed rounding) against Â.
  std::optional<Witness> witness;
  std::string reason, hint;
};

/// Checks a target against a mask: validate_target, the mask's size, and no
/// nonzero entry at a masked position (an input error naming `source`, the
/// row, the column and the value: a masked head puts exactly 0 there).
void validate_masked_target(const Matrix<Rational>& A, const Mask& mask, const std::string& source);
/// The same checks, in the same words, on a pattern of doubles (validate_target's
/// overload for doubles first: every entry finite).
void validate_masked_target(const Eigen::MatrixXd& A, const Mask& mask, const std::string& source);

/// Whether A (n >= 2) is zero exactly on the strictly upper triangle: a causal
/// pattern asked about without a mask.
bool zeros_are_causal(const Matrix<Rational>& A);

/// Bounds on floor_Omega(A) as above. Precondition: A passed
/// validate_masked_target and is positive on the allowed set.
MaskedFloorBounds masked_floor_bounds(const Matrix<Rational>& A, const Mask& mask, const ReachOptions& options = {});

/// Decides whether a head of width dk (1 <= dk <= n) with this mask produces A.
/// Throws input_error on a bad target, mask or dk. A zero at an allowed
/// position is unreachable (softmax over the allowed keys is positive).
MaskedReachResult reach(const Matrix<Rational>& A, Eigen::Index dk, const Mask& mask, const ReachOptions& options = {});

/// A masked head of width dk near A, uncertified: Q, K (n x dk) with
/// Q K^T / sqrt(dk) ~ L + c 1^T on the allowed set, by alternating least
/// squares from a completed truncated SVD (at most `sweeps` sweeps; both factors
/// refit per row and per column over the allowed positions only).
Witness approx_masked_witness(const Matrix<Rational>& A, const Mask& mask, Eigen::Index dk, int sweeps = 60);

/// The flops the minimal-rank staircase completion may cost (about n^4 / 6): up to
/// n of about 600 it is a second start; beyond, the row means start alone.
inline constexpr double staircase_completion_budget = 2e10;

/// What the masked witnesses of every width up to `widest` share, computed once:
/// log A on the allowed set, its completions (each row's masked positions at the
/// row's mean; for a nested mask also the minimal-rank staircase completion, within
/// staircase_completion_budget), and
/// each completion's row means and truncated SVD. Every width's start is a
/// truncation of these, so a width profile costs one SVD per completion instead
/// of one per width.
struct MaskedWitnessStarts {
  struct Start {
    Eigen::MatrixXd completion;
    Eigen::VectorXd row_means, singular_values;
    Eigen::MatrixXd U, V;  ///< the leading `widest` singular vectors of the centered completion
  };
  explicit MaskedWitnessStarts(Mask m) : mask(std::move(m)) {}
  Mask mask;
  Eigen::Index widest = 0;
  Eigen::MatrixXd target;  ///< the normalised target in doubles, to choose between the fits
  std::vector<Start> starts;
};
MaskedWitnessStarts masked_witness_starts(const Matrix<Rational>& A, const Mask& mask, Eigen::Index widest);
/// approx_masked_witness at width dk (1 <= dk <= starts.widest) from shared starts:
/// the same witness the single-width call gives.
Witness approx_masked_witness(const MaskedWitnessStarts& starts, Eigen::Index dk, int sweeps = 60);

/// The pattern a masked witness head makes, the masked softmax of
/// Q K^T / sqrt(d_k) row by row, in doubles. Uncertified (a picture of the
/// head); its certified distance to the target is the witness's max_abs_error.
Eigen::MatrixXd approx_masked_witness_pattern(const Witness& w, const Mask& mask);

/// error_lower <= E*_Omega(A, d_k) <= error_upper for masked heads: the lower
/// bound of approx_error_bounds (valid under the mask, see above), the upper the
/// certified error (doubles, directed rounding) of the better of
/// approx_masked_witness and, with options.optimise, the L-BFGS search on the
/// masked softmax started from it (reach/detail/witness_search.hpp; seeded
/// restarts). A and dk as for reach with a mask.
ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Eigen::Index dk, const Mask& mask,
                                 const ApproxOptions& options = {});

/// approx_width for masked heads: for every d_k = 1..max_dk (0: n) the lower
/// bound of approx_error_bounds with the mask, and the masked witness's error
/// where a fit can move width_upper (options.first_fit first, then max_dk, then
/// bisection over the widths the lower bounds leave open; a width left out keeps
/// the bound of a narrower one, or 1); the width below a witness within epsilon
/// asked directly whether it misses (close_bracket_from_below); then, with
/// options.optimise, the search only where it can lower width_upper
/// (bisection over the open widths, as approx_width). Each bound is carried to
/// its neighbours (E*_Omega is non-increasing in d_k: upper bounds carry up,
/// lower bounds down). input_error on a bad target, mask, max_dk or epsilon
/// outside [0, 1].
WidthResult approx_width(const Matrix<Rational>& A, double epsilon, Eigen::Index max_dk, const Mask& mask,
                         const ApproxOptions& options = {});

/// Certified max |masked softmax(Q K^T / sqrt(d_k)) - Â| over every entry (masked
/// entries are 0 on both sides), in doubles with directed rounding; +inf when a
/// bound is not finite.
double certified_masked_witness_error(const Matrix<Rational>& A, const Mask& mask, const Eigen::MatrixXd& Q,
                                      const Eigen::MatrixXd& K);
/// The same bound against Â's certified bounds (normalized_target_bounds(A)),
/// computed once where many witnesses of one target are certified.
double certified_masked_witness_error(const BoundsMatrix& target, const Mask& mask, const Eigen::MatrixXd& Q,
                                      const Eigen::MatrixXd& K);

/// The same bound in MPFI at `bits` (scores enclosed by directed rounding, the
/// masked softmax in interval arithmetic): the certificate checker's own route.
double certified_masked_witness_error(const Matrix<Rational>& A, const Mask& mask, const Eigen::MatrixXd& Q,
                                      const Eigen::MatrixXd& K, unsigned bits);

namespace detail {
/// zeros_replaced for a masked target: zeros at allowed positions become 1e-12
/// of their row's largest entry (the witness's fit needs a finite log there);
/// masked positions stay exactly 0, so the fitted target is the masked one.
Matrix<Rational> allowed_zeros_replaced(const Matrix<Rational>& A, const Mask& mask);
}  // namespace detail

}  // namespace attnrank
