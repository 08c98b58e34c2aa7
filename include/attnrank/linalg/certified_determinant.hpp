#pragma once
// Certified determinant enclosures.
//
// Semantics: `certified_determinant` returns an interval that contains det(X) for
// every real matrix X in the input. Method (Rump's preconditioning, with an
// eigenvalue bound in place of interval elimination):
//  1. approximate LU of the midpoint, P mid(A) ~ L U, and approximate inverses
//     Li of L (unit lower triangular, forced exactly so) and Ui of U (upper
//     triangular, forced exactly so), so det(Li) = 1 and det(Ui) = prod Ui_kk;
//  2. an interval enclosure of Y = Li (P A) Ui, which is close to I;
//  3. with E = Y - I and eps >= ||E||_inf proven below 1, every eigenvalue of Y
//     lies within eps of 1, log(Y) = sum_k (-1)^(k+1) E^k / k converges and
//         log det Y = tr log Y  in  tr E +- n eps^2 / (2 (1 - eps)),
//     since |tr E^k| <= n rho(E)^k <= n eps^k;
//  4. det A = sign(P) det(Y) / prod Ui_kk.
// The width is about n eps^2 + (width of tr E): narrow for well-conditioned A.
// In doubles, when one stage fails (cond(A) above about 1e15), the same steps run
// twice with the first product enclosed to double-double accuracy
// (linalg/detail/two_stage_preconditioner.hpp, method "double-double"): condition
// numbers to about 1e28, at double-GEMM speed.
// When eps < 1 cannot be proven (singular or ill-conditioned at this precision)
// the answer is Hadamard's bound [-H, H], flagged `preconditioned = false`: still
// true, but it says little. More precision (`bits`) can bring the narrow answer back.

#include <attnrank/linalg/accurate_product.hpp>
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <optional>
#include <string>

namespace attnrank {

struct CertifiedDeterminant {
  Interval det;
  /// true: the preconditioned method succeeded (and then 0 is not in det);
  /// false: det is Hadamard's bound [-H, H].
  bool preconditioned = false;
  /// Proven ||Y - I||_inf of step 3 (of the last stage tried; +inf when no
  /// stage could be computed).
  double eps = 0;
  /// "directed-rounding", "double-double", "mpfi", or "hadamard".
  std::string method;
  /// Precision of the last test tried: 53 (one double stage), 106 (two stages,
  /// the first product in double-double), or the MPFI precision.
  unsigned bits = 53;
};

/// det over the ball, with double directed-rounding GEMMs (fast, 53 bits); two
/// stages when one does not prove eps < 1.
CertifiedDeterminant certified_determinant(const BallMatrix& A);
/// det over the double-double ball, by the two-stage test alone.
CertifiedDeterminant certified_determinant(const DoubleDoubleBall& A);
/// det of a matrix of doubles (each the exact real it denotes).
CertifiedDeterminant certified_determinant(const Eigen::MatrixXd& A);
/// det over the interval matrix, in MPFI at the current precision.
CertifiedDeterminant certified_determinant(const Matrix<Interval>& A);
/// det of exact rational data at `bits` of working precision. At 53 bits or less:
/// the one-stage double test on the nearest balls, then the two-stage test on a
/// double-double ball of the data (what a 17-digit decimal needs when A is
/// ill-conditioned); MPFI at 64 bits only when neither could run. Above 53: MPFI.
CertifiedDeterminant certified_determinant(const Matrix<Rational>& A, unsigned bits = 53);

namespace detail {
/// The gate every preconditioned answer passes: det = sign exp(trace +- n eps^2 /
/// (2 (1 - eps))) / diag_product, or nothing unless eps is proven below 1 and
/// trace, diag_product and the result are finite intervals (exposed for its tests).
std::optional<Interval> det_from_near_identity(const Interval& trace, const Interval& eps, Eigen::Index n, int sign,
                                               const Interval& diag_product);
}  // namespace detail

}  // namespace attnrank
