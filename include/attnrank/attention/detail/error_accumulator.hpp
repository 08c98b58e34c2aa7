#pragma once
// Proven bounds on a kernel tensor's error against enclosures of the exact tensor,
// matrix by matrix (one per batch and head): the max absolute error with its place,
// the max of |exact|, and the mean and root-mean-square of the absolute errors.
//
// Guarantee: for enclosures lo <= E <= hi and a computed O, each entry's error
// lies in [max(O - hi, lo - O, 0), max(O - lo, hi - O)], each end rounded
// outward; the maxima, sums and square roots of those ends are taken in the
// rounding direction of the bound they give. The mean and RMS sums are kept
// scaled by a power of two per matrix (exact, or rounded the right way where it
// underflows), so squares of errors near DBL_MAX or 2^-1074 neither overflow nor
// vanish. A non-finite entry of O is an infinite error there: every error bound
// is +inf, and the first such entry in C order is the worst place. A NaN end of
// an enclosure encloses nothing: that entry's upper bound is +inf. An exact value of
// +inf (the enclosure [+inf, +inf]: FlashAttention's logsumexp of a query row without a
// key) is matched by +inf alone: error 0 there, and it is left out of max |exact|; a
// finite value there has an infinite error (proven).

#include <attnrank/attention/kernel_check.hpp>

#include <optional>
#include <vector>

namespace attnrank::detail {

class ErrorAccumulator {
 public:
  /// Adds matrix t: enclosure [E.lo, E.hi] of the exact tensor, O the kernel's.
  void add(std::size_t t, const BoundsMatrix& E, const Eigen::MatrixXd& O);
  /// The same from MPFI enclosures (each end rounded outward to double first).
  void add(std::size_t t, const Matrix<Interval>& E, const Eigen::MatrixXd& O);
  /// The bounds over every matrix added.
  OutputError finish() const;
  /// Largest hi - lo of the enclosures seen, rounded up.
  double width() const { return width_; }
  /// Also bound each entry's error in ulps of `format` (OutputError::ulps); call before add.
  void measure_ulps(const NumberFormat& format) {
    ulps_ = UlpReport{};
    ulps_->format = format.name;
    format_ = format;
  }

 private:
  struct Place {
    std::size_t t = 0;
    Eigen::Index i = 0, j = 0;
  };
  /// Sums of the error bounds of one matrix, scaled by 2^scale: sum of lower
  /// ends (rounded down), of upper ends (up), and of their squares.
  struct Sums {
    double lower = 0, upper = 0, lower2 = 0, upper2 = 0;
    int scale = 0;
  };

  void nonfinite(std::size_t t, Eigen::Index i, Eigen::Index j) { infinite_error(t, i, j, result_.nonfinite); }
  /// An infinite error at (t, i, j), counted in `counter` (nonfinite or infinity_missed).
  void infinite_error(std::size_t t, Eigen::Index i, Eigen::Index j, std::size_t& counter);
  void record(std::size_t t, Eigen::Index i, Eigen::Index j, double lower, double upper, double mig, double mag);
  /// Adds the mean and RMS sums of one matrix's error bounds (entries where O is
  /// not finite excluded: they are counted by `nonfinite`).
  void add_sums(const Eigen::MatrixXd& lower, const Eigen::MatrixXd& upper, const Eigen::MatrixXd& O);

  OutputError result_;
  Place lower_at_, upper_at_;
  double width_ = 0;
  bool seen_ = false;
  bool upper_sum_infinite_ = false;  // an entry's upper bound is +inf
  std::vector<Sums> sums_;
  double entries_ = 0;
  std::optional<UlpReport> ulps_;
  NumberFormat format_;
};

/// Bounds [lo, hi] on c / r for candidate and reference errors (see KernelCheck).
void ratio_bounds(const OutputError& candidate, const OutputError& reference, double& lo, double& hi);

}  // namespace attnrank::detail
