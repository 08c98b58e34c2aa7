#pragma once
// How close can a head of width d_k come? For a target A (rows normalised to Â),
//     E*(A, d_k) = inf over Q, K (n x d_k) of max_ij |softmax(Q K^T / sqrt(d_k)) - Â|_ij.
// Deciding E* <= eps is NP-hard for fixed d_k > 1, so the answer is two certified
// bounds, error_lower <= E* <= error_upper, that meet when they can:
//  * error_upper is the certified max error (MPFI, as every witness error) of a
//    witness: the truncated SVD of log(A) C, improved by L-BFGS on a smooth
//    surrogate of the max error (seeded restarts). The optimiser is not trusted;
//    only the final witness's error is, and it is certified for those Q, K.
//  * error_lower: if every |P_ij - Â_ij| <= eps with P = softmax(S), rank S <= d_k,
//    on rows R and columns J where eps < Â_ij, then with L = log Â on R x J,
//        sigma_(d_k+1)(L C_J) <= ||eta||_2,  eta_ij = -log(1 - eps / Â_ij)
//    (docs/math.md, "The approximate question"). So an eps whose bound on ||eta||_2
//    falls below a certified lower bound on sigma_(d_k+1)(L C_J) is impossible, and
//    E* >= eps. The largest eps found by bisection, each step checked in directed
//    rounding and MPFR, is error_lower.
// The gap between the bounds is reported, never hidden: it is the honest state of
// the question.

#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/reach/free.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace attnrank {

struct ApproxOptions {
  unsigned bits = 64;             ///< MPFI precision of the witness's certified error
  int restarts = 2;               ///< seeded random restarts besides the SVD start
  std::uint64_t seed = 1;         ///< seed of the restarts (printed by the CLI)
  int max_iterations = 200;       ///< L-BFGS iterations per stage
  int bisection_steps = 24;       ///< bisection steps for error_lower below min Â (one certified SVD)
  int bisection_steps_above = 8;  ///< and above it, per threshold (each step may need a new certified SVD)
  /// Surrogate evaluations in all (each about 6 n^2 d_k flops); 0: about 2.5e10
  /// flops' worth, between 50 and 20000. Later starts run only while some is left.
  long max_evaluations = 0;
};

/// error_lower <= E*(A, d_k) <= error_upper, both certified.
struct ApproxBounds {
  Eigen::Index n = 0, dk = 0;
  double error_lower = 0;  ///< every head of width d_k misses Â by at least this somewhere
  double error_upper = std::numeric_limits<double>::infinity();  ///< `witness` is within this
  Witness witness;         ///< the best witness found; witness.max_abs_error == error_upper
  double start_error = std::numeric_limits<double>::infinity();  ///< certified error of the SVD start
  /// The proof of error_lower: the rows and columns R x J it used (sizes), and the
  /// certified lower bound on sigma_(d_k+1)(log(Â)_RJ C_J) it beat.
  Eigen::Index lower_rows = 0, lower_cols = 0;
  double sigma_lower = 0;
  std::string lower_reason;
};

/// Certified bounds on E*(A, d_k). A as for reach (n x n, entries >= 0, no zero row;
/// zero entries allowed: they only shrink R x J); 1 <= d_k <= n. input_error otherwise.
ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Eigen::Index dk, const ApproxOptions& options = {});

enum class EpsilonVerdict { within, not_within, undecided };
/// "within": error_upper <= eps (a certified witness); "not_within": error_lower >
/// eps (every head misses); "undecided" otherwise.
EpsilonVerdict epsilon_verdict(const ApproxBounds& b, double epsilon);
const char* to_string(EpsilonVerdict v);

struct WidthProfileEntry {
  Eigen::Index dk = 0;
  double error_lower = 0, error_upper = 0;
};

/// The smallest width that comes within eps, bracketed: every d_k < width_lower is
/// proven to miss eps (error_lower > eps); at width_upper a certified witness is
/// within eps (0 when none up to max_dk is). The profile lists each d_k's bounds.
struct WidthResult {
  double epsilon = 0;
  Eigen::Index width_lower = 1, width_upper = 0, max_dk = 0;
  std::vector<WidthProfileEntry> profile;
};

/// Bounds for d_k = 1..max_dk (max_dk <= n; 0 means n). Above the first width
/// with a certified witness within eps, no further witness is optimised: those
/// widths carry its error_upper (E* is non-increasing in d_k) and compute their
/// lower bounds only. input_error on bad input or eps outside [0, 1].
WidthResult approx_width(const Matrix<Rational>& A, double epsilon, Eigen::Index max_dk = 0,
                         const ApproxOptions& options = {});

namespace detail {
/// Certified: for this eps and d_k, no P = softmax(S) with rank S <= d_k has
/// max |P - Â| <= eps. `sigma` caches the certified singular values per R x J.
struct ImpossibilityCheck {
  bool impossible = false;
  Eigen::Index rows = 0, cols = 0;
  double sigma_lower = 0;  ///< certified lower bound on sigma_(d_k+1)(log(Â)_RJ C_J)
  double eta_norm = 0;     ///< certified upper bound on ||eta(eps)||_2 over R x J
};
/// eta_ij = -log(1 - eps / Â_ij) rounded up on R x J (`below` holds lower bounds
/// of Â, each > eps there; +inf otherwise), and the smaller of its Frobenius and
/// sqrt(||.||_1 ||.||_inf) norms, rounded up: >= ||E||_2 for every |E| <= eta.
double eta_norm_upper(const Eigen::MatrixXd& below, const std::vector<Eigen::Index>& rows,
                      const std::vector<Eigen::Index>& cols, double eps);
/// Rows and columns whose entries all exceed eps (by their lower bounds `below`):
/// greedily drop the row or column with the most other entries until none is
/// left (any choice is sound).
void rows_and_columns_above(const Eigen::MatrixXd& below, double eps, std::vector<Eigen::Index>& rows,
                            std::vector<Eigen::Index>& cols);
}  // namespace detail

}  // namespace attnrank
