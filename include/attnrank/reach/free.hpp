#pragma once
// The reachability decision: can a head of width d_k produce the target A?
//
// Free scores (any Q, K with d_k columns): softmax(Q K^T / sqrt(d_k)) = A exactly
// iff some score matrix of rank <= d_k lies in {log A + c 1^T}, iff
//     floor = rank(log(A) C) <= d_k
// (docs/math.md; proofs/ formalises it). `reach` encloses the floor,
//     floor_lower <= floor <= floor_upper,
// and answers about exact producibility:
//  * unreachable  when d_k < floor_lower: a floor_lower x floor_lower minor of
//                 log(A) C is proven nonsingular in interval arithmetic;
//  * reachable    when floor_upper <= d_k: floor_upper is n - 1 (C 1 = 0), or,
//                 for a rational target, n minus the number of independent
//                 rational vectors v with E_t C v = 0 for every exponent matrix
//                 of log A = sum_t log(q_t) E_t (reach/log_exponents.hpp), checked exactly;
//  * undecided    otherwise, with a hint: more bits may raise floor_lower; only
//                 exact structure lowers floor_upper.
// A target with a zero entry is unreachable by every finite score matrix.
// Whatever the verdict, a witness Q, K (n x d_k, from the truncated SVD of
// log(A) C) and a certified upper bound on max |softmax(Q K^T/sqrt(d_k)) - Â|
// (Â = A with rows normalised) say how close a head of width d_k comes.

#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/reach/log_exponents.hpp>
#include <attnrank/reach/target.hpp>
#include <attnrank/reach/verdict.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnrank {

class Mask;  // attention/mask.hpp

struct ReachOptions {
  /// Precision of the floor's lower bound: 53 uses doubles with directed
  /// rounding; more uses MPFI (for n up to mpfi_size_limit).
  unsigned bits = 53;
  Eigen::Index mpfi_size_limit = 400;
  /// Above this n, an `unreachable` verdict is first sought from the leading
  /// (d_k + 1) x (d_k + 1) minor alone (certified logs of d_k + 1 rows instead of
  /// n): floor_lower is then d_k + 1, all the verdict needs. `full_floor` skips it.
  Eigen::Index quick_verdict_size = 256;
  bool full_floor = false;
  /// Under a nested mask, the floors of all blocks come from two factorisations
  /// per chain (reach/detail/chain_minors.hpp); where they fall short of a block's
  /// shape, the block's own minor search runs if all such searches together cost
  /// at most this many flops (estimated), else on the squarest such block only.
  /// full_floor searches every one.
  double block_search_flops = 2e9;
  bool witness = true;
  /// Above 53 bits, targets up to this size get an MPFR witness (its certified
  /// error can then reach ~2^-bits instead of ~1e-16).
  Eigen::Index high_precision_witness_size = 64;
  DecompositionLimits limits;
};

/// Proven bounds on floor = rank(log(A) C) and their proofs.
struct FloorBounds {
  Eigen::Index lower = 0, upper = 0;
  /// log(A) C [minor_rows, minor_cols] is proven nonsingular: floor >= lower.
  std::vector<Eigen::Index> minor_rows, minor_cols;
  double minor_residual = 0;  ///< proven ||I - R M||_inf < 1 for that minor
  unsigned lower_bits = 53;
  /// true when lower came from the quick (d_k + 1) minor and the floor may be larger.
  bool lower_is_partial = false;
  /// Exact proof of floor <= upper (when upper < n - 1): pairwise coprime bases
  /// and integer vectors v (columns of `kernel`) with E_t C v = 0 for every t.
  std::vector<Integer> bases;
  Matrix<Integer> kernel;
  std::string upper_reason;  ///< "C 1 = 0", "exact kernel", or why no exact bound
};

struct ReachResult {
  Eigen::Index n = 0, dk = 0;
  Verdict verdict = Verdict::undecided;
  FloorBounds floor;
  bool has_zero_entry = false;
  std::vector<std::pair<Eigen::Index, Eigen::Index>> zeros;  ///< first few zero entries
  std::optional<Witness> witness;
  std::string reason;  ///< one sentence: why this verdict
  std::string hint;    ///< for undecided: what would help
};

/// Throws input_error unless 1 <= dk <= n: the widths a head on n tokens can have.
void require_head_width(Eigen::Index dk, Eigen::Index n);

/// Decides whether a head of width dk produces A (n x n, entries >= 0, no zero
/// row; 1 <= dk <= n). Throws input_error on a bad target or dk.
ReachResult reach(const Matrix<Rational>& A, Eigen::Index dk, const ReachOptions& options = {});

/// Certified max |softmax(Q K^T / sqrt(dk)) - Â| for a numeric witness, in MPFI at
/// `bits` (products enclosed by directed rounding).
double certified_witness_error(const Matrix<Rational>& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                               unsigned bits = 64);

/// The same bound in doubles with directed rounding (attention/certified_softmax.hpp)
/// against `target`, bounds of Â (normalized_target_bounds(A)): certified too, a
/// few ulps looser than MPFI and far faster (no MPFR softmax). +inf when Q or K
/// is not finite or a bound overflows.
double fast_certified_witness_error(const BoundsMatrix& target, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K);

/// The certified error of a double witness as producers state it: in doubles with
/// directed rounding (fast_certified_witness_error: a few ulps looser than MPFI,
/// some 30 times faster at n = 512); in MPFI at max(mpfi_bits, 64) as well where
/// that bound is below witness_error_mpfi_below (a near-exact witness, whose bound
/// is mostly rounding slack that MPFI removes) or not finite; the smaller is kept.
/// `bits` receives the route of the bound returned: 53 for doubles, else MPFI's.
/// `target_bounds`: normalized_target_bounds(A), when the caller has it.
inline constexpr double witness_error_mpfi_below = 1e-9;
double stated_witness_error(const Matrix<Rational>& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                            unsigned mpfi_bits, unsigned& bits, const BoundsMatrix* target_bounds = nullptr);

/// What a checker re-proves for a stated error: true when either route (doubles
/// with directed rounding, or MPFI at max(bits, 64)) bounds the witness's error by
/// `stated`. Either is a proof; the cheap one is tried first.
bool witness_error_within(const Matrix<Rational>& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                          unsigned bits, double stated);

/// The same for an exact (rational) witness, all in MPFI at `bits`.
double certified_witness_error(const Matrix<Rational>& A, const Matrix<Rational>& Q, const Matrix<Rational>& K,
                               unsigned bits);

/// The pattern a witness head makes, softmax(Q K^T / sqrt(d_k)) row by row, in
/// doubles. Uncertified (a picture of the head); its certified distance to the
/// target is the witness's max_abs_error.
Eigen::MatrixXd approx_witness_pattern(const Witness& w);

/// Singular values of the centered log log(A) C (numeric, from its midpoint):
/// all of them up to n = 1024, beyond that the `leading` largest (Lanczos).
/// A picture of how far the floor is from each width, not a proof.
Eigen::VectorXd approx_centered_log_spectrum(const Matrix<Rational>& A, Eigen::Index leading);

namespace detail {
/// 0, 1, ..., n - 1: the leading rows or columns of a minor.
std::vector<Eigen::Index> iota_indices(Eigen::Index n);
/// max |softmax(S) - Â| for enclosed scores S (MPFI), rounded up to a double:
/// the certified witness error shared by every witness (free, embeddings and
/// masked: with `mask`, the softmax over the allowed keys, 0 elsewhere).
double softmax_distance(const Matrix<Rational>& A, const Matrix<Interval>& S, const Mask* mask = nullptr);
/// Q K^T / sqrt(d_k) of a double witness, enclosed in MPFI at the current
/// precision (the product by directed rounding); d_k = Q.cols().
Matrix<Interval> enclosed_witness_scores(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K);
/// S / sqrt(d_k), entry by entry, enclosed: the attention scaling of every
/// certified witness error (d_k = 1 leaves S as it is: sqrt(1) is exact).
void scale_by_root_dk(Matrix<Interval>& S, Eigen::Index dk);
/// The target with each zero replaced by 1e-12 of its row's largest entry: the
/// positive matrix a witness for a target with zeros is computed from.
Matrix<Rational> zeros_replaced(const Matrix<Rational>& A);
/// Row i of zeros_replaced into `out` (a copy of A), only at the columns j with
/// replace(j): each zero there becomes 1e-12 of the row's largest entry.
template <class Replace>
void replace_zeros_in_row(const Matrix<Rational>& A, Eigen::Index i, const Replace& replace, Matrix<Rational>& out) {
  const Rational* top = nullptr;  // found without copying a Rational
  bool any = false;
  for (Eigen::Index j = 0; j < A.cols(); ++j) {
    if (!top || A(i, j) > *top) top = &A(i, j);
    any = any || (mpq_sgn(A(i, j).backend().data()) == 0 && replace(j));
  }
  if (!any) return;
  const Rational small = *top / Rational(1000000000000LL);
  for (Eigen::Index j = 0; j < A.cols(); ++j)
    if (mpq_sgn(A(i, j).backend().data()) == 0 && replace(j)) out(i, j) = small;
}
/// Q, K from the truncated SVD of the centered log LC (doubles, uncertified):
/// Q K^T / sqrt(dk) = U_k S_k V_k^T.
Witness truncated_witness(const Eigen::MatrixXd& LC, Eigen::Index dk);
}  // namespace detail

}  // namespace attnrank
