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
//    rounding (the logs proven at double speed, numbers/certified_log.hpp), is
//    error_lower.
// With fixed embeddings X the same bounds hold for heads Q = X W^Q, K = X W^K:
// error_lower at width min(d_k, rank X), error_upper from optimised weights.
// The gap between the bounds is reported, never hidden: it is the honest state of
// the question. Certificates carry both bounds with their proofs
// (reach/detail/approximate_certificate.hpp).

#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/reach/free.hpp>
#include <attnrank/reach/search_monitor.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace attnrank {

class ApproxMemo;  // reach/approx_memo.hpp

struct ApproxOptions {
  unsigned bits = 64;             ///< MPFI precision of the witness's certified error
  int restarts = 2;               ///< seeded random restarts besides the SVD start
  std::uint64_t seed = 1;         ///< seed of the restarts (printed by the CLI)
  int max_iterations = 200;       ///< L-BFGS iterations per stage
  int bisection_steps = 24;       ///< bisection steps for error_lower below min Â (one certified SVD)
  int bisection_steps_above = 8;  ///< and above it, per threshold (each step may need a new certified SVD)
  /// Surrogate evaluations in all (each about 6 n^2 d_k flops); 0: about
  /// search_flops' worth, between min_evaluations and 20000. Later starts run only
  /// while some is left. The budget counts work, not time: the search is
  /// reproducible from the seed (SearchMonitor adds a wall-clock limit).
  long max_evaluations = 0;
  double search_flops = 2.5e10;
  long min_evaluations = 50;
  /// When positive, min_evaluations counts at most this many flops' worth: the
  /// floor of evaluations stays a fixed amount of work where each is dear.
  double min_evaluation_flops = 0;
  /// No search at all when the budget comes to fewer evaluations than this.
  long skip_below = 0;
  /// The floored-target starts (two more truncated SVDs) besides the log-domain one.
  bool floored_starts = true;
  /// false: no search, the log-domain and floored starts only (fast; the upper
  /// bounds are those of the starts).
  bool optimise = true;
  /// The searches' wall-clock budget and progress, shared by every copy of these
  /// options (nullptr: the evaluation budget alone ends a search). Not owned.
  SearchMonitor* monitor = nullptr;
  /// approx_width only: a second search after the first (this one's, with
  /// optimise), run only where the first left the bracket open, on its own budget
  /// and monitor -- the cheap band, then the optimiser. Not owned; nullptr: none.
  const ApproxOptions* then_search = nullptr;
  /// approx_width only: when positive, then_search runs only where the open
  /// widths' best certified error is within this factor of epsilon
  /// (detail::search_within_reach); 0: wherever the bracket is open.
  double then_search_reach = 0;
  /// The target's shared work (reach/approx_memo.hpp), made for this very target
  /// and mask: what it holds is taken from it instead of computed again (the same
  /// values). Not owned; nullptr: the call computes its own.
  ApproxMemo* memo = nullptr;
  /// approx_width under a mask: the width whose fit comes first (0: max_dk). A
  /// witness within epsilon there settles every wider width without a fit;
  /// otherwise max_dk is next. A scan names reach's d_k, whose fit its memo holds.
  Eigen::Index first_fit = 0;
};

/// The proof of error_lower (empty when error_lower is 0): the rows R and
/// columns J (0-based) of the entries it used, the certified lower bound on
/// sigma_(d_k+1)(log(Â)_RJ C_J) it beat, and the approximate right singular
/// vectors (|J| x (d_k+1)) that let a checker re-prove that bound on its own
/// (certify_singular_value_above).
struct LowerBoundProof {
  std::vector<Eigen::Index> rows, cols;
  double sigma_lower = 0;
  Eigen::MatrixXd vectors;
  /// At width 1 the order bound may prove more (reach/detail/order_bound.hpp):
  /// then rows are its two rows, cols its two key pairs, and vectors is empty.
  bool orders = false;
};

/// error_lower <= E*(A, d_k) <= error_upper, both certified.
struct ApproxBounds {
  Eigen::Index n = 0, dk = 0;
  double error_lower = 0;  ///< every head of width d_k misses Â by at least this somewhere
  double error_upper = std::numeric_limits<double>::infinity();  ///< the witness is within this
  /// The free question: the best Q, K found; witness.max_abs_error == error_upper.
  /// With fixed embeddings it is empty, and the witness is the weights below.
  Witness witness;
  /// Fixed embeddings X: the head weights W^Q, W^K (d_model x d_k) behind
  /// error_upper, which is certified for exactly these doubles on the exact X,
  /// in MPFI at weights_error_bits.
  Eigen::MatrixXd WQ, WK;
  unsigned weights_error_bits = 0;
  double start_error = std::numeric_limits<double>::infinity();  ///< certified error of the log-domain start
  LowerBoundProof lower_proof;
  std::string lower_reason;
};

/// Certified bounds on E*(A, d_k). A as for reach (n x n, entries >= 0, no zero row;
/// zero entries allowed: they only shrink R x J); 1 <= d_k <= n. input_error otherwise.
ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Eigen::Index dk, const ApproxOptions& options = {});

/// The same question for a head on fixed embeddings X (n x d_model):
/// E*_X(A, d_k) = inf over W^Q, W^K (d_model x d_k) of
/// max |softmax((X W^Q)(X W^K)^T / sqrt(d_k)) - Â|, for 1 <= d_k <= d_model.
/// error_lower is the free bound at width min(d_k, rank X) (X M X^T is one score
/// matrix of that rank, so E*_X >= E*(A, min(d_k, rank X))); error_upper
/// optimises the weights from the free starts mapped by X's pseudo-inverse.
ApproxBounds approx_error_bounds(const Matrix<Rational>& A, const Matrix<Rational>& X, Eigen::Index dk,
                                 const ApproxOptions& options = {});

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
  /// width_upper from the starts alone, before any search (0: none within epsilon).
  Eigen::Index start_width_upper = 0;
  /// width_upper after the first search stage, before options.then_search.
  Eigen::Index first_search_width_upper = 0;
  std::vector<WidthProfileEntry> profile;
};

/// Bounds for d_k = 1..max_dk (max_dk <= n; 0 means n). Every width gets its
/// lower bound (the widths search together, reach/detail/lower_bound_search.hpp:
/// each point's certified SVD serves all) and the certified error of its start
/// (a truncation of one SVD; certified in doubles with directed rounding,
/// attention/certified_softmax.hpp, when its error estimated in doubles improves
/// on every narrower width's, whose bound holds too). Then, with options.optimise, the
/// search runs only where it can lower width_upper: by bisection over the widths
/// from width_lower to width_upper - 1. Each bound carries to the neighbouring
/// widths (E* is non-increasing in d_k). input_error on bad input or eps outside [0, 1].
WidthResult approx_width(const Matrix<Rational>& A, double epsilon, Eigen::Index max_dk = 0,
                         const ApproxOptions& options = {});

/// Joins a band proven elsewhere for the same target (reach's at one d_k, an exact
/// verdict's 0) to the profile: width dk's entry becomes the intersection, and
/// every bound carries to the neighbouring widths again, so the width, the band at
/// d_k and its epsilon verdict tell one story. Both bands are proven, so the
/// intersection is never empty; dk beyond max_dk carries its lower bound only
/// (E* is non-increasing: it bounds every narrower width).
void add_band(WidthResult& w, Eigen::Index dk, double error_lower, double error_upper);

namespace detail {
/// Carries each bound of out.profile to the neighbouring widths and reads off
/// width_lower and width_upper. E* is non-increasing in d_k (a head of width d is
/// one of width d + 1 with a zero column, rescaled): lower bounds carry from the
/// right, upper bounds from the left.
void settle_width(WidthResult& out);
/// Whether a search could still lower width_upper: none within epsilon yet, or
/// widths between width_lower and width_upper not settled.
bool bracket_open(const WidthResult& w);
/// After settle_width, with the bracket open: whether the widest open width (the
/// last below width_upper, or max_dk when none is within epsilon) has a certified
/// error within `reach` times epsilon, the best any open width has (upper bounds
/// carry to wider widths). A search that gains less than that factor over it
/// cannot bring a witness within epsilon.
bool search_within_reach(const WidthResult& w, double reach);
/// After settle_width: the search, only where it can lower width_upper, by
/// bisection over the open widths [width_lower, width_upper) (a witness within
/// epsilon at d settles every width above d). searched_upper(d_k) returns the
/// certified error of the searched witness at that width; settles again.
void search_open_widths(WidthResult& out, const std::function<double(Eigen::Index)>& searched_upper);
/// error_lower, its proof and its reason for every width first..last at once: one
/// context (the certified logs, the cache of certified singular values), the
/// widths' searches sharing every point (lower_bound_search.hpp). ceilings[k] is a
/// certified error at width first + k (no eps at or above it can be impossible);
/// n and dk are set, the upper bound left to the caller.
/// With a mask (nullptr: none), the order bound at width 1 uses only keys both of
/// its rows allow.
std::vector<ApproxBounds> free_lower_bounds(const Matrix<Rational>& A, Eigen::Index first, Eigen::Index last,
                                            const std::vector<double>& ceilings, const ApproxOptions& options,
                                            const Mask* mask = nullptr);
/// A certified lower bound on E*(dk) aimed at eps (>= eps: E*(dk) >= eps is
/// proven), b holding width dk's bound from a joint search (its error_upper the
/// ceiling): when eps is within refinement_reach of b.error_lower, width dk's own
/// search (reach's at dk, refinement included), then a locally refined rectangle
/// at eps itself (lower_bound_search.hpp's prove_lower_bound_at); otherwise
/// b.error_lower as it is. b keeps the better bound, with its proof and reason.
/// With a mask, its target's memo (options.memo) supplies the logs.
double free_lower_bound_above(const Matrix<Rational>& A, Eigen::Index dk, double eps, const ApproxOptions& options,
                              const Mask* mask, ApproxBounds& b);
/// After settle_width, when a witness is within epsilon at width_upper and the
/// width d = width_upper - 1 is not proven to miss (and is not `tried`, which it
/// becomes): lower_toward(d, eps'), with eps' the double just above epsilon,
/// returns a certified lower bound on E*(d), which joins d's entry. When it is
/// >= eps' > epsilon, d and every narrower width miss: the bracket closes.
void close_bracket_from_below(WidthResult& w, Eigen::Index& tried,
                              const std::function<double(Eigen::Index, double)>& lower_toward);
/// input_error unless 0 <= epsilon <= 1 and 1 <= max_dk <= n.
void require_width_question(double epsilon, Eigen::Index max_dk, Eigen::Index n);
/// Certified: for this eps and d_k, no P = softmax(S) with rank S <= d_k has
/// max |P - Â| <= eps.
struct ImpossibilityCheck {
  bool impossible = false;
  std::vector<Eigen::Index> rows, cols;  ///< R x J
  double sigma_lower = 0;  ///< certified lower bound on sigma_(d_k+1)(log(Â)_RJ C_J)
  double eta_norm = 0;     ///< certified upper bound on ||eta(eps)||_2 over R x J
};
/// eta_ij = -log(1 - eps / Â_ij) rounded up on R x J (`below` holds lower bounds
/// of Â, each > eps there; +inf otherwise), and the smaller of its Frobenius and
/// sqrt(||.||_1 ||.||_inf) norms, rounded up: >= ||E||_2 for every |E| <= eta.
double eta_norm_upper(const Eigen::MatrixXd& below, const std::vector<Eigen::Index>& rows,
                      const std::vector<Eigen::Index>& cols, double eps);
}  // namespace detail

}  // namespace attnrank
