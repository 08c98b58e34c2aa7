#pragma once
// Certified singular values: for every real matrix M in the input (a double
// matrix, a ball of doubles, or exact rationals), lower_i <= sigma_i(M) <= upper_i
// for i = 1..k, proven with directed rounding end to end. Not guaranteed:
// tightness (a bound can be 0 or +inf and still be true).
//
// Method (docs/rank.md, "Certified singular values"). Take approximate singular
// triplets U, s, V in double (no trust needed), then in directed rounding:
//   B = U^T M V (every M in the ball),  e >= ||B - diag(s)||_2,
//   a >= ||U^T U - I||_2,  b >= ||V^T V - I||_2.
// Weyl gives |sigma_i(B) - s_i| <= e, and sigma_i(X Y Z) <= ||X|| sigma_i(Y) ||Z||
// gives sigma_i(B) <= sqrt((1 + a)(1 + b)) sigma_i(M), so
//   sigma_i(M) >= (s_i - e) / sqrt((1 + a)(1 + b)).
// When U and V are square (the full SVD, used when M is small enough), M =
// U^-T B V^-1 also gives sigma_i(M) <= (s_i + e) / sqrt((1 - a)(1 - b)) (Rump,
// "Verified bounds for singular values", BIT 51, 2011). For a truncated SVD the
// upper bounds come from one remainder R = M - U diag(s) V^T, bounded in panels
// and never stored (linalg/detail/svd_remainder.hpp): the Frobenius norm of
// M - (its rank-(i-1) part) for every i from ||R||_F and k x k Gram matrices, or
// s_i + ||R||_2 by Weyl (docs/math.md, 10): sound, loose when the rest of the
// spectrum is large. A double matrix is used in place (no copy, no zero radius).
// No Gram matrix is formed, so resolution is about n u sigma_1, not sqrt(u) sigma_1.

#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <Eigen/Core>

#include <string>
#include <vector>

namespace attnrank {

/// lower <= sigma <= upper; upper may be +inf (no bound was proven).
struct SingularValueBounds {
  double lower = 0;
  double upper = 0;
};

struct CertifiedSingularValues {
  std::vector<SingularValueBounds> values;  ///< sigma_1 >= sigma_2 >= ..., k of them
  bool full = false;       ///< full SVD basis (two-sided bounds) or truncated (upper bounds loose)
  double residual = 0;     ///< e >= ||U^T M V - diag(s)||_2
  double orthogonality = 0;  ///< max(a, b): how far the computed bases are from orthonormal
  /// The approximate right singular vectors of the k largest values (cols x k,
  /// in the order of `values`): not certified, but enough to re-prove a lower
  /// bound independently (certify_singular_value_above), as certificates do.
  Eigen::MatrixXd right_vectors;
};

struct SvdOptions {
  /// Use the full SVD (tight upper bounds) when max(rows, cols) is at most this;
  /// above it, a truncated one (Lanczos) with remainder-norm upper bounds.
  Eigen::Index full_limit = 1024;
  /// false: only the lower bounds are wanted (uppers are reported +inf); a thin
  /// basis of k vectors then serves at every size, which is much cheaper.
  bool upper_bounds = true;
};

/// The k largest singular values of every matrix in the ball M, certified
/// (1 <= k <= min(rows, cols); input_error otherwise and on non-finite entries).
CertifiedSingularValues certified_singular_values(const BallMatrix& M, Eigen::Index k, const SvdOptions& options = {});
/// The same for a double matrix (exactly the doubles given).
CertifiedSingularValues certified_singular_values(const Eigen::MatrixXd& M, Eigen::Index k,
                                                  const SvdOptions& options = {});
/// The same for exact rationals (decimal input): the enclosures contain the
/// singular values of the rational matrix itself, not of its nearest doubles.
CertifiedSingularValues certified_singular_values(const Matrix<Rational>& M, Eigen::Index k,
                                                  const SvdOptions& options = {});

/// true proves sigma_k(M) > t for every real matrix M in the interval matrix M
/// (k = V.cols() <= M.cols(), t >= 0), by another route than the bounds above:
/// with the exact doubles V, V^T M^T M V - t^2 V^T V is proven positive definite
/// by an interval Cholesky in MPFI at the current precision, so ||M x|| > t ||x||
/// on the k-dimensional range of V, and Courant-Fischer gives sigma_k(M) > t.
/// Any V will do (the proof does not trust it); right singular vectors make it
/// sharp. false proves nothing (V poor, or t too close to sigma_k).
bool certify_singular_value_above(const Matrix<Interval>& M, const Eigen::MatrixXd& V, const Interval& t);

/// Certified separations: gap_i <= sigma_i - sigma_(i+1) for i = 1..k-1, i.e.
/// lower_i - upper_(i+1) rounded down; a gap <= 0 proves nothing (not separated).
std::vector<double> certified_gaps(const CertifiedSingularValues& s);

/// An upper bound on ||X||_2 for every X within the bounds: the smaller of the
/// Frobenius norm and sqrt(||X||_1 ||X||_inf), rounded up (+inf, never NaN, when
/// a bound overflows or is not finite).
double norm2_upper(const BoundsMatrix& X);

}  // namespace attnrank
