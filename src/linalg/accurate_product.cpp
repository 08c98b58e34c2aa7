// Accurate products of double matrices (attnrank/linalg/accurate_product.hpp):
// exact slice GEMMs, TwoSum, and directed rounding for the small rest.
#include <attnrank/linalg/accurate_product.hpp>

#include <mpfr.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <vector>

namespace attnrank {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;

constexpr int min_scale = -400, max_scale = 400;

/// M = first + second + rest exactly, each slice on its row's (or column's) scale.
struct Slices {
  MatrixXd first, second, rest;
};

/// beta with k 2^(2 beta) <= 2^53: slice products of inner dimension k are exact.
int slice_bits(Index k) {
  int log2k = 0;
  while ((Index{1} << log2k) < k) ++log2k;
  return (53 - log2k) / 2;
}

/// The scale exponent tau (every |entry| <= 2^tau) of each row (or column), 0 for
/// a zero row; false when a scale is outside [min_scale, max_scale] or an entry is
/// not finite.
bool scales(const MatrixXd& M, bool by_rows, Eigen::VectorXd& sigma1, Eigen::VectorXd& sigma2, int beta) {
  const Index lines = by_rows ? M.rows() : M.cols();
  sigma1.resize(lines);
  sigma2.resize(lines);
  for (Index i = 0; i < lines; ++i) {
    const double top = by_rows ? M.row(i).cwiseAbs().maxCoeff() : M.col(i).cwiseAbs().maxCoeff();
    if (!std::isfinite(top)) return false;
    if (top == 0) {
      sigma1(i) = sigma2(i) = 0;
      continue;
    }
    int tau = 0;
    std::frexp(top, &tau);  // top = m 2^tau, m in [1/2, 1): top <= 2^tau
    if (tau < min_scale || tau > max_scale) return false;
    // fl(x + sigma) - sigma rounds x to a multiple of ulp(sigma + x) = 2^(tau - beta),
    // since sigma + x stays in [2^(s-1), 2^s) for s = tau - beta + 53 (beta <= 51).
    sigma1(i) = std::ldexp(0.75, tau - beta + 53);
    sigma2(i) = std::ldexp(0.75, tau - 2 * beta + 53);
  }
  return true;
}

bool split(const MatrixXd& M, bool by_rows, int beta, Slices& out) {
  Eigen::VectorXd s1, s2;
  if (!scales(M, by_rows, s1, s2, beta)) return false;
  out.first.resize(M.rows(), M.cols());
  out.second.resize(M.rows(), M.cols());
  out.rest.resize(M.rows(), M.cols());
  for (Index j = 0; j < M.cols(); ++j)
    for (Index i = 0; i < M.rows(); ++i) {
      const double a = by_rows ? s1(i) : s1(j), b = by_rows ? s2(i) : s2(j);
      double x = M(i, j);
      double f = x + a;
      detail::rounding_barrier(f);
      f -= a;
      const double r = x - f;  // exact: f is x rounded to a coarser grid
      double g = r + b;
      detail::rounding_barrier(g);
      g -= b;
      out.first(i, j) = f;
      out.second(i, j) = g;
      out.rest(i, j) = r - g;
    }
  return true;
}

/// Knuth's TwoSum, elementwise: s + e = a + b exactly (round to nearest, no overflow).
void two_sum(const MatrixXd& a, const MatrixXd& b, MatrixXd& s, MatrixXd& e) {
  s = a + b;
  const MatrixXd bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

/// mid +- rad containing the sum of the point matrices `point` (exact doubles) and
/// of one member of each enclosure in `bounds`.
void enclose_sum(const std::vector<const MatrixXd*>& point, const std::vector<const BoundsMatrix*>& bounds,
                 MatrixXd& mid, MatrixXd& rad) {
  const Index m = point.front()->rows(), n = point.front()->cols();
  MatrixXd up = MatrixXd::Zero(m, n), neg_down = MatrixXd::Zero(m, n);
  {
    UpwardRounding rounding;
    for (const MatrixXd* p : point) {
      up += *p;
      neg_down -= *p;
    }
    for (const BoundsMatrix* b : bounds) {
      up += b->hi;
      neg_down -= b->lo;
    }
    detail::rounding_barrier(up);
    detail::rounding_barrier(neg_down);
  }
  mid = 0.5 * (up - neg_down);  // any double will do: the radius covers the rest
  UpwardRounding rounding;
  rad = (up - mid).cwiseMax(mid + neg_down);  // neg_down = -down: mid - down
  detail::rounding_barrier(rad);
}

/// Round to nearest on this thread while alive (TwoSum needs it), whatever the
/// caller's mode; Eigen's thread count is left alone (the exact GEMMs are exact in
/// any mode, on any thread).
class NearestRounding {
 public:
  NearestRounding() : saved_(std::fegetround()) { std::fesetround(FE_TONEAREST); }
  ~NearestRounding() { std::fesetround(saved_); }
  NearestRounding(const NearestRounding&) = delete;
  NearestRounding& operator=(const NearestRounding&) = delete;

 private:
  int saved_;
};

/// A B + (the enclosure `more`, if given), as a double-double ball.
std::optional<DoubleDoubleBall> product(const MatrixXd& A, const MatrixXd& B, const BoundsMatrix* more) {
  const NearestRounding nearest;
  const int beta = slice_bits(std::max<Index>(A.cols(), 1));
  Slices a, b;
  if (!split(A, true, beta, a) || !split(B, false, beta, b)) return std::nullopt;
  // Exact: every term and partial sum is an integer multiple of the two scales' unit below 2^53.
  const MatrixXd p11 = a.first * b.first, p12 = a.first * b.second, p21 = a.second * b.first,
                 p22 = a.second * b.second;
  const MatrixXd b12 = b.first + b.second;  // exact: B rounded to the second grid
  const BoundsMatrix r1 = certified_product_bounds(A, b.rest), r2 = certified_product_bounds(a.rest, b12);
  DoubleDoubleBall out;
  MatrixXd s, e1, e2;
  two_sum(p11, p12, s, e1);
  two_sum(s, p21, out.hi, e2);
  if (!out.hi.allFinite()) return std::nullopt;
  std::vector<const BoundsMatrix*> bounds{&r1, &r2};
  if (more) bounds.push_back(more);
  enclose_sum({&e1, &e2, &p22}, bounds, out.lo, out.rad);
  if (!out.lo.allFinite() || !out.rad.allFinite()) return std::nullopt;
  return out;
}

}  // namespace

std::optional<DoubleDoubleBall> accurate_product(const MatrixXd& A, const MatrixXd& B) {
  return product(A, B, nullptr);
}

std::optional<DoubleDoubleBall> accurate_product(const MatrixXd& A, const DoubleDoubleBall& X) {
  // A X = A hi + (A lo +- |A| rad): the second part is ~2^-53 of the first, so
  // directed rounding is accurate enough for it. X.lo and X.rad carry the ball's
  // old radius, folded into the bounds by certified_product_bounds.
  const BoundsMatrix low = certified_product_bounds(A, BallMatrix{X.lo, X.rad});
  return product(A, X.hi, &low);
}

std::optional<DoubleDoubleBall> accurate_product(const DoubleDoubleBall& X, const MatrixXd& B) {
  const BoundsMatrix low = certified_product_bounds(BallMatrix{X.lo, X.rad}, B);
  return product(X.hi, B, &low);
}

BallMatrix to_ball(const DoubleDoubleBall& X) {
  BallMatrix out;
  out.mid = X.hi + X.lo;
  // |hi + lo - mid| <= ulp(mid) / 2: bounded upward by the exact error, which
  // TwoSum's e term gives; here the simpler |(hi - mid) + lo| rounded up.
  UpwardRounding rounding;
  const MatrixXd e_up = (X.hi - out.mid) + X.lo;
  MatrixXd neg_e_down = (out.mid - X.hi) - X.lo;
  detail::rounding_barrier(neg_e_down);
  out.rad = X.rad + e_up.cwiseAbs().cwiseMax(neg_e_down.cwiseAbs());
  detail::rounding_barrier(out.rad);
  return out;
}

std::optional<DoubleDoubleBall> to_double_double_ball(const Matrix<Rational>& A) {
  DoubleDoubleBall out{MatrixXd(A.rows(), A.cols()), MatrixXd(A.rows(), A.cols()), MatrixXd(A.rows(), A.cols())};
  // q to 256 bits (error <= 2^-255 |q|), then peeled exactly into doubles.
  mpfr_t q, r;
  mpfr_init2(q, 256);
  mpfr_init2(r, 256);
  bool ok = true;
  for (Index j = 0; j < A.cols() && ok; ++j)
    for (Index i = 0; i < A.rows(); ++i) {
      const int inexact = mpfr_set_q(q, A(i, j).backend().data(), MPFR_RNDN);
      if (mpfr_zero_p(q)) {
        out.hi(i, j) = out.lo(i, j) = out.rad(i, j) = 0;
        if (inexact != 0) ok = false;  // a nonzero q below MPFR's range
        continue;
      }
      const long e = mpfr_get_exp(q);
      if (e < -700 || e > 1000) {  // keep hi, lo, rad and the 2^(e - 254) term normal and finite
        ok = false;
        break;
      }
      const double hi = mpfr_get_d(q, MPFR_RNDN);
      mpfr_sub_d(r, q, hi, MPFR_RNDN);  // exact: r fits in 256 bits
      const double lo = mpfr_get_d(r, MPFR_RNDN);
      mpfr_sub_d(r, r, lo, MPFR_RNDN);  // exact again
      // |q - hi - lo| <= |r| + 2^-255 |q|, the latter below 2^(e - 255).
      const double tail = mpfr_get_d(r, MPFR_RNDA);
      double rad = std::fabs(tail);
      if (inexact != 0) rad = std::nextafter(rad + std::ldexp(1.0, static_cast<int>(e) - 254), INFINITY);
      out.hi(i, j) = hi;
      out.lo(i, j) = lo;
      out.rad(i, j) = rad;
    }
  mpfr_clear(q);
  mpfr_clear(r);
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace attnrank
