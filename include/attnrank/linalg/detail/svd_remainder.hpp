#pragma once
// Upper bounds on the singular values of every matrix X in a ball, from a
// truncated factorisation X ~ Z V^T (Z = U diag(s), V with k columns) and ONE
// remainder R = X - Z V^T that is never stored (docs/math.md, 10).
//
// Guarantee: every bound returned is >= the quantity it names, for every X in
// the ball and the exact products of the doubles Z and V given; +inf (never NaN)
// when the arithmetic overflows. Any Z and V will do: they only decide how tight
// the bounds are.
//
// The remainder is visited in panels of columns: each panel of Z V^T is bounded
// by a directed pair of small GEMMs (fl_up(Z Vp^T) and fl_up(-Z Vp^T)) and folded
// into the norms while it is in cache, so nothing of size rows x cols is
// allocated and X is read once, on two threads when it is large.

#include <attnrank/numbers/directed_rounding.hpp>

#include <Eigen/Core>

#include <vector>

namespace attnrank::detail {

/// The matrices X with |X - mid| <= *rad entrywise, or the point matrix mid when
/// rad is null; seen in place, without a copy (and without reading a zero radius).
struct BallView {
  const Eigen::MatrixXd& mid;
  const Eigen::MatrixXd* rad = nullptr;
};

/// Bounds of X - D for X within b and the point matrix D (same shape).
BoundsMatrix minus_point(const BoundsMatrix& b, const Eigen::MatrixXd& D);

/// Bounds on the remainder's norms, for every X in the ball.
struct RemainderNorms {
  double frobenius2 = 0;  ///< >= ||X - Z V^T||_F^2
  double norm2 = 0;       ///< >= ||X - Z V^T||_2: min(Frobenius, sqrt(||.||_1 ||.||_inf))
};

/// The blocked pass over R = X - Z V^T (Z rows x k, V cols x k). `panel` columns
/// at a time; `threads` 1 or 2 (two split the panels; each rounds upward on its
/// own). remainder_norms(M, Z, V) chooses both.
RemainderNorms remainder_norms(const BallView& M, const Eigen::MatrixXd& Z, const Eigen::MatrixXd& V,
                               Eigen::Index panel, int threads);
RemainderNorms remainder_norms(const BallView& M, const Eigen::MatrixXd& Z, const Eigen::MatrixXd& V);

/// What the upper bounds reuse from the lower bounds' certificate.
struct TruncatedCertificate {
  const Eigen::MatrixXd& Z;  ///< any rows x k double matrix; fl(U diag(s)) makes the bounds tight
  const Eigen::MatrixXd& V;  ///< cols x k
  const BoundsMatrix& MV;    ///< encloses X V for every X in the ball
  const BoundsMatrix& GV;    ///< encloses V^T V
  double b = 0;              ///< >= ||V^T V - I||_2
};

/// upper_i >= sigma_i(X) for i = 1..k and every X in the ball, the smaller of:
///  * Frobenius: sigma_i(X) <= ||X - sum_(t<i) z_t v_t^T||_F, whose square is
///    ||R||_F^2 + 2 sum_(t>=i) z_t^T R v_t + sum_(s,t>=i) (z_s^T z_t)(v_s^T v_t),
///    with R V = X V - Z (V^T V) enclosed from MV and GV;
///  * Weyl: sigma_i(X) <= sigma_i(Z) sqrt(1 + b) + ||R||_2, and
///    sigma_i(Z)^2 <= sorted_i^2 + ||Z^T Z - diag(s^2)||_2.
/// `s` holds the values Z was scaled by (column order), `sorted` |s| decreasing.
std::vector<double> remainder_upper_bounds(const BallView& M, const TruncatedCertificate& c, const Eigen::VectorXd& s,
                                           const std::vector<double>& sorted);

}  // namespace attnrank::detail
