#pragma once
// The search behind error_lower (reach/approximate.hpp, docs/math.md section 9):
// the largest eps for which a certified sigma_(w+1)(log(Â)_RJ C_J) exceeds the
// certified bound on ||eta(eps)||_2, for several widths w at once. Every eps
// accepted is its own proof (R x J, the two certified numbers), so the answer is
// sound whatever the search visits; sharing only saves work: R x J, ||eta|| and
// the certified singular values at one eps serve every width (the singular values
// are computed once per R x J, as many as the widest width needs).

#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/detail/rectangle_above.hpp>
#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <Eigen/Core>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace attnrank::detail {

/// What every width's lower bound shares: the certified singular values of
/// log(Â)_RJ C_J, once per R x J, and below min Â (R x J = every entry, the same
/// for every width and step) the bound on ||eta(eps)||_2 for each eps tried.
/// values() and eta_norm() may be called from two threads at once (after
/// sort_entries()); results are computed outside the lock.
class LowerBoundCache {
 public:
  /// A: the target (unnormalised is fine: the centering removes row scaling).
  /// `below`: lower bounds of Â (kept by reference). `values`: how many singular
  /// values each R x J gets (the widest width + 1).
  LowerBoundCache(const Matrix<Rational>& A, const Eigen::MatrixXd& below, Eigen::Index values)
      : LowerBoundCache(logs_of(A), below, values) {}
  /// The same from logs_of(A), computed already.
  LowerBoundCache(BoundsMatrix logs, const Eigen::MatrixXd& below, Eigen::Index values);
  /// The certified logs of A it needs (zero entries replaced as detail::zeros_replaced does).
  static BoundsMatrix logs_of(const Matrix<Rational>& A);

  /// A lower bound of min Â: below it, R x J is every entry.
  double smallest() const { return smallest_; }
  /// The same over the positive entries (0 when there are none): below it,
  /// R x J is the same set, the one that drops only the zeros (masked or not),
  /// so it is the edge where the searches start.
  double smallest_positive() const { return smallest_positive_; }
  /// The enclosed logs of A (zeros replaced as detail::zeros_replaced does).
  const BoundsMatrix& log() const { return log_; }
  /// The lower bounds of Â it was made with.
  const Eigen::MatrixXd& below() const { return below_; }
  const std::vector<Eigen::Index>& all_rows() const { return all_rows_; }
  const std::vector<Eigen::Index>& all_cols() const { return all_cols_; }

  /// Sorts the entries for rows_and_columns above min Â (once; before threads
  /// share the cache, which then only reads the order).
  void sort_entries();
  /// The same order computed elsewhere, for the same `below` (a memo's), so
  /// sort_entries has nothing left to do. Not owned, not copied (24 bytes an
  /// entry): it must outlive the cache, as a memo outlives the calls it serves.
  void adopt_order(const EntryOrder& order) { adopted_ = &order; }
  /// R x J for threshold t: every entry when t < smallest(), else the rows and
  /// columns whose entries all exceed t (rows_and_columns_above).
  void rows_and_columns(double t, std::vector<Eigen::Index>& rows, std::vector<Eigen::Index>& cols);
  /// eta_norm_upper on R x J; remembered for R x J = every entry.
  double eta_norm(const std::vector<Eigen::Index>& rows, const std::vector<Eigen::Index>& cols, double eps);
  /// The certified singular values of log(Â)_RJ C_J; null when it has fewer
  /// than `index` or fewer than two columns.
  const CertifiedSingularValues* values(const std::vector<Eigen::Index>& rows, const std::vector<Eigen::Index>& cols,
                                        Eigen::Index index);

 private:
  BoundsMatrix log_;
  Eigen::Index values_;
  double smallest_, smallest_positive_;
  const Eigen::MatrixXd& below_;
  EntryOrder order_;  ///< sorted on first use above min Â, unless adopted
  const EntryOrder* adopted_ = nullptr;
  const EntryOrder& order() const { return adopted_ ? *adopted_ : order_; }
  std::vector<Eigen::Index> all_rows_, all_cols_;
  std::mutex mutex_;  ///< guards the maps: two searches may share the cache
  std::map<double, double> full_eta_;
  /// R x J by the number of entries at or below its threshold (entries_at_most).
  static constexpr std::size_t max_remembered_rectangles = 512;
  std::map<std::int64_t, std::pair<std::vector<Eigen::Index>, std::vector<Eigen::Index>>> rectangles_;
  std::map<std::pair<std::vector<Eigen::Index>, std::vector<Eigen::Index>>, CertifiedSingularValues> cache_;
};

/// One width's search: no eps at or above `ceiling` (a certified witness's error)
/// can be impossible, so none is tried; `best` and `proof` are the largest eps
/// proven so far (0: none).
struct LowerSearch {
  Eigen::Index width = 1;
  double ceiling = 0;
  double best = 0;
  ImpossibilityCheck proof;
};

/// sigma_(w+1)(L C_J) / ||eta(eps)|| on R x J in doubles, the norm as
/// eta_norm_upper takes it (min of Frobenius and sqrt(||.||_1 ||.||_inf)): a
/// guide for choosing R x J, never a proof. 0 when R x J is too small for sigma_(w+1).
double approx_ratio(const LowerBoundCache& cache, const std::vector<Eigen::Index>& rows,
                    const std::vector<Eigen::Index>& cols, Eigen::Index width, double eps);

/// How far above a width's best bound its refinement reaches: refine_search's top
/// is this times the best, and a width's bracket asks eps directly only within it.
inline constexpr double refinement_reach = 8;

/// The flops one refine_rectangle may cost (three sweeps of an SVD per line):
/// larger rectangles keep the greedy's choice.
inline constexpr double local_refinement_flops = 4e7;

/// Drops lines of R x J, one at a time, while that raises approx_ratio (the
/// greedy drops lines for their small entries, blind to the singular values);
/// rows and cols only shrink. True when the ratio in doubles ends above 1: a
/// candidate for the certified check, which alone proves anything. A rectangle
/// over local_refinement_flops is left as it is, and the answer is false.
bool refine_rectangle(const LowerBoundCache& cache, std::vector<Eigen::Index>& rows, std::vector<Eigen::Index>& cols,
                      Eigen::Index width, double eps);

/// Whether eps (0 < eps < s.ceiling) is proven for s.width by a locally refined
/// rectangle: s.proof's R x J less its entries at or below eps, then (with
/// `greedy`: each costs a pass over the target) the greedy's R x J for theta = 1,
/// 2, 4, 8; each refined (refine_rectangle) and checked with the certified
/// numbers, which alone decide. On success s.best = max(s.best, eps), with the
/// proof when eps is the larger. The question a width's open bracket asks at
/// width_upper - 1 (is E* > epsilon?), and each step of a single width's refinement.
bool prove_lower_bound_at(LowerSearch& s, double eps, LowerBoundCache& cache, bool greedy = true);

/// Runs every search: the edge just below min Â; above min Â (when the ceiling
/// is higher) `steps_above` geometric steps for each threshold factor theta = 1, 2, 4, 8
/// (R x J drops the entries <= theta eps: eta_ij <= log(theta / (theta - 1)), a
/// smaller R x J with smaller eta, which often proves more); then, for a width with nothing proven, `steps` bisection
/// steps on [0, edge); last, for a single width (not a profile's joint search),
/// from its best, `steps_above` geometric steps
/// up to 8 times it (within the ceiling) whose R x J, the greedy's for theta = 1,
/// 2, 4, 8, is then refined by dropping lines while that raises
/// sigma_(w+1) / ||eta|| in doubles (small R x J only; any R x J is sound, the
/// certified check decides). A step counts for a width only where that width is tried,
/// so each width gets the resolution it would alone, and widths whose answers
/// agree share every point.
void search_lower_bounds(std::vector<LowerSearch>& searches, int steps, int steps_above, LowerBoundCache& cache);

}  // namespace attnrank::detail
