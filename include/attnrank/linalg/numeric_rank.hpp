#pragma once
// Numeric rank: fast and uncertified. Singular values come from floating-point
// algorithms with backward error about eps * sigma_max; nothing here is proven,
// and the names say so (approx_*). Use linalg/certified_rank.hpp or linalg/exact_rank.hpp for
// answers that must hold.
//
//  * approx_rank: all singular values (Eigen's BDCSVD), the numerical rank at a
//    tolerance (default sigma_max * max(m, n) * eps, as NumPy's matrix_rank and
//    MATLAB's rank use) and the gap sigma_r / sigma_(r+1), which says how sharp
//    the cut is: a gap near 1 means the rank is a matter of taste.
//  * approx_top_singular_values: the k largest by Lanczos (Spectra's
//    SymEigsSolver on the Gram matrix A^T A or A A^T), for big matrices where a
//    full SVD is wasteful.
//  * approx_truncated_svd: the k leading singular triplets, by Lanczos when that
//    is cheaper than a full SVD (its vectors refined by Rayleigh-Ritz on their
//    span, so both bases are orthonormal to rounding), with convergence checked: a failed or
//    unconverged Lanczos run is retried with a wider subspace, then replaced by
//    a dense BDCSVD, so it always returns k triplets (never throws on hard
//    spectra such as n - 1 equal singular values or rank 1).
//  * approx_low_rank_distance: Eckart-Young, the distance from A to the nearest
//    matrix of rank <= k: sigma_(k+1) in the spectral norm and
//    sqrt(sum_(i>k) sigma_i^2) in the Frobenius norm.

#include <attnrank/numbers/decimal.hpp>
#include <attnrank/error.hpp>

#include <Eigen/Core>
#include <Eigen/SVD>

#include <optional>
#include <string>

namespace attnrank {

/// A rational matrix as the nearest doubles, for the numeric algorithms, with
/// what the rounding did that a reader must know: entries whose magnitude is
/// beyond the double range are refused (input_error naming `source`, row and
/// column), and nonzero entries below the normal range (they become 0 or lose
/// digits as subnormals) are counted, the first one named.
struct DoubleConversion {
  Eigen::MatrixXd values;
  Eigen::Index underflows = 0;  ///< nonzero entries with |x| < 2^-1022
  Eigen::Index first_row = -1, first_col = -1;
  std::string first_value;  ///< the first such entry, in scientific notation
};
DoubleConversion approx_to_double(const Matrix<Rational>& A, const std::string& source);

struct ApproxRank {
  Eigen::VectorXd singular_values;  ///< all, descending
  double tolerance = 0;             ///< singular values above it count
  Eigen::Index rank = 0;
  /// sigma_rank / sigma_(rank+1); +inf when sigma_(rank+1) is 0 or absent, 0 when
  /// rank is 0 and sigma_1 > 0 is cut (then the gap is undefined: reported 0).
  double gap = 0;
};

/// Numerical rank and singular values of A. `tolerance` overrides the default
/// sigma_max * max(m, n) * eps. Throws input_error on NaN or infinite entries.
ApproxRank approx_rank(const Eigen::MatrixXd& A, std::optional<double> tolerance = std::nullopt);

struct TopSingularValues {
  Eigen::VectorXd values;      ///< the k largest, descending (fewer if not converged)
  Eigen::Index converged = 0;  ///< how many Lanczos converged (== k on success)
};

/// The k largest singular values of A by Lanczos (1 <= k < min(m, n)); the
/// dense SVD answers when Lanczos does not converge (converged == k always).
TopSingularValues approx_top_singular_values(const Eigen::MatrixXd& A, Eigen::Index k);

struct TruncatedSvd {
  Eigen::MatrixXd U, V;  ///< m x k and n x k, orthonormal columns
  Eigen::VectorXd s;     ///< the k largest singular values, descending
  std::string method;    ///< "dense", "lanczos" or "dense after lanczos failed"
};

/// The k leading singular triplets of A (0 <= k <= min(m, n)), A ~ U diag(s) V^T.
/// Uncertified. Throws input_error on non-finite entries or k out of range.
TruncatedSvd approx_truncated_svd(const Eigen::MatrixXd& A, Eigen::Index k);

struct LowRankDistance {
  double spectral = 0;   ///< ||A - A_k||_2 = sigma_(k+1)
  double frobenius = 0;  ///< ||A - A_k||_F
};

/// Distance from A to the nearest matrix of rank <= k (0 <= k < min(m, n)), from
/// the k + 1 largest singular values (Lanczos) and ||A||_F.
LowRankDistance approx_low_rank_distance(const Eigen::MatrixXd& A, Eigen::Index k);

/// The default tolerance of a numeric rank: sigma_max max(rows, cols) eps, eps
/// the double epsilon (the usual choice, LAPACK's and NumPy's matrix_rank's).
double default_rank_tolerance(double sigma_max, Eigen::Index rows, Eigen::Index cols);

struct TopRankBounds {
  TopSingularValues top;      ///< sigma_1 .. sigma_(k+1), descending
  LowRankDistance distance;   ///< from A to the nearest matrix of rank <= k
  double tolerance = 0;       ///< singular values above it count
  Eigen::Index lower = 0;     ///< how many of the k + 1 exceed the tolerance
  Eigen::Index upper = 0;     ///< that count when one of the k + 1 is below it, else min(m, n)
};

/// Numeric rank bounds from the k + 1 largest singular values (Lanczos), for a
/// matrix too big for the full SVD (1 <= k, k + 1 < min(m, n); uncertified).
/// `tolerance` overrides default_rank_tolerance.
TopRankBounds approx_rank_from_top(const Eigen::MatrixXd& A, Eigen::Index k, std::optional<double> tolerance = std::nullopt);

namespace detail {
/// The k leading triplets from a full decomposition (BDCSVD, or JacobiSVD when
/// BDCSVD returns NaN), labelled `method`; exposed for the tests of that guard.
TruncatedSvd dense_truncated_svd(const Eigen::MatrixXd& A, Eigen::Index k, std::string method);
/// Every factor finite.
bool all_finite(const TruncatedSvd& t);
}  // namespace detail

}  // namespace attnrank
