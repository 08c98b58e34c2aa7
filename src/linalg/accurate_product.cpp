// Accurate products of double matrices (attnrank/linalg/accurate_product.hpp):
// exact slice GEMMs, TwoSum, and directed rounding for the small rest.
#include <attnrank/linalg/accurate_product.hpp>

#include <mpfr.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <stdexcept>

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

/// The splitting constants of each row (or column): sigma1 = 0.75 2^(tau - beta + 53)
/// and sigma2 = 0.75 2^(tau - 2 beta + 53), tau the line's scale exponent (every
/// |entry| <= 2^tau); 0 for a zero or empty line. False when a scale is outside
/// [min_scale, max_scale] or an entry is not finite.
bool scales(const MatrixXd& M, bool by_rows, Eigen::VectorXd& sigma1, Eigen::VectorXd& sigma2, int beta) {
  const Index lines = by_rows ? M.rows() : M.cols(), length = by_rows ? M.cols() : M.rows();
  sigma1.resize(lines);
  sigma2.resize(lines);
  if (!M.allFinite()) return false;  // before maxCoeff, which need not see a NaN
  for (Index i = 0; i < lines; ++i) {
    const double top = length == 0 ? 0.0 : by_rows ? M.row(i).cwiseAbs().maxCoeff() : M.col(i).cwiseAbs().maxCoeff();
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

/// A B + L R +- rad (the extra terms when given: L R a point product, rad >= 0 a
/// radius), as a double-double ball.
struct Extra {
  const MatrixXd* left = nullptr;
  const MatrixXd* right = nullptr;
  MatrixXd rad;
};

std::optional<DoubleDoubleBall> product(const MatrixXd& A, const MatrixXd& B, const Extra& extra) {
  const NearestRounding nearest;
  const int beta = slice_bits(std::max<Index>(A.cols(), 1));
  Slices a, b;
  if (!split(A, true, beta, a) || !split(B, false, beta, b)) return std::nullopt;
  // Exact: every term and partial sum is an integer multiple of the two scales' unit below 2^53.
  const MatrixXd p11 = a.first * b.first, p12 = a.first * b.second, p21 = a.second * b.first,
                 p22 = a.second * b.second;
  // The rest, A B3 + A3 (B1 + B2) (+ L R), as one directed pair over the inner
  // dimension 2k (+ the extra's); B1 + B2 is exact: B rounded to the second grid.
  const Index k = A.cols(), k_extra = extra.left ? extra.left->cols() : 0;
  MatrixXd left(A.rows(), 2 * k + k_extra), right(2 * k + k_extra, B.cols());
  left.leftCols(k) = A;
  left.middleCols(k, k) = a.rest;
  right.topRows(k) = b.rest;
  right.middleRows(k, k) = b.first + b.second;
  if (extra.left) {
    left.rightCols(k_extra) = *extra.left;
    right.bottomRows(k_extra) = *extra.right;
  }
  const BoundsMatrix rest = certified_product_bounds(left, right);
  DoubleDoubleBall out{MatrixXd(A.rows(), B.cols()), MatrixXd(A.rows(), B.cols()), MatrixXd(A.rows(), B.cols())};
  const Index size = out.hi.size();
  double* hi = out.hi.data();
  double* e1 = out.lo.data();  // scratch until the last loop
  double* e2 = out.rad.data();
  // Knuth's TwoSum twice, to nearest: hi + e1 + e2 = p11 + p12 + p21 exactly.
  for (Index t = 0; t < size; ++t) {
    const double x = p11.data()[t], y = p12.data()[t], z = p21.data()[t];
    const double s1 = x + y, v1 = s1 - x;
    e1[t] = (x - (s1 - v1)) + (y - v1);
    const double s2 = s1 + z, v2 = s2 - s1;
    e2[t] = (s1 - (s2 - v2)) + (z - v2);
    hi[t] = s2;
  }
  if (!out.hi.allFinite()) return std::nullopt;
  {
    // The rest e1 + e2 + p22 + [rest], summed upward for its upper and (negated)
    // lower bound; lo is any double between, rad covers both and the extra radius.
    UpwardRounding up;
    const double* q = p22.data();
    const double *rh = rest.hi.data(), *rl = rest.lo.data();
    const double* xr = extra.rad.size() ? extra.rad.data() : nullptr;
    for (Index t = 0; t < size; ++t) {
      const double upper = e1[t] + e2[t] + q[t] + rh[t];
      const double neg_lower = -e1[t] - e2[t] - q[t] - rl[t];
      const double mid = 0.5 * (upper - neg_lower);
      e1[t] = mid;  // out.lo
      const double r = std::max(upper - mid, mid + neg_lower);
      e2[t] = xr ? r + xr[t] : r;  // out.rad; a NaN leaves lo NaN
    }
    detail::rounding_barrier(out.lo);
    detail::rounding_barrier(out.rad);
  }
  if (!out.lo.allFinite() || !out.rad.allFinite()) return std::nullopt;
  return out;
}

void require_shapes(const MatrixXd& A, const MatrixXd& B) {
  if (A.cols() != B.rows()) throw std::invalid_argument("accurate_product: inner dimensions differ");
}

void require_shapes(const DoubleDoubleBall& X) {
  if (X.lo.rows() != X.hi.rows() || X.lo.cols() != X.hi.cols() || X.rad.rows() != X.hi.rows() ||
      X.rad.cols() != X.hi.cols())
    throw std::invalid_argument("accurate_product: hi, lo and rad of the ball differ in shape");
}

}  // namespace

std::optional<DoubleDoubleBall> accurate_product(const MatrixXd& A, const MatrixXd& B) {
  require_shapes(A, B);
  return product(A, B, Extra{});
}

// A X = A hi + A lo +- |A| rad: A lo is ~2^-53 of A hi, so directed rounding is
// accurate enough for it, and it joins the rest's directed pair; |A| rad is one
// GEMM rounded upward.
std::optional<DoubleDoubleBall> accurate_product(const MatrixXd& A, const DoubleDoubleBall& X) {
  require_shapes(X);
  require_shapes(A, X.hi);
  if (!X.lo.allFinite() || !X.rad.allFinite()) return std::nullopt;
  Extra extra{&A, &X.lo, MatrixXd()};
  {
    UpwardRounding up;
    extra.rad.noalias() = A.cwiseAbs() * X.rad;
    detail::rounding_barrier(extra.rad);
  }
  return product(A, X.hi, extra);
}

std::optional<DoubleDoubleBall> accurate_product(const DoubleDoubleBall& X, const MatrixXd& B) {
  require_shapes(X);
  require_shapes(X.hi, B);
  if (!X.lo.allFinite() || !X.rad.allFinite()) return std::nullopt;
  Extra extra{&X.lo, &B, MatrixXd()};
  {
    UpwardRounding up;
    extra.rad.noalias() = X.rad * B.cwiseAbs();
    detail::rounding_barrier(extra.rad);
  }
  return product(X.hi, B, extra);
}

BallMatrix to_ball(const DoubleDoubleBall& X) {
  BallMatrix out;
  out.mid = X.hi + X.lo;  // any double near hi + lo will do
  // hi + lo - mid lies in [-neg_e_down, e_up]: both are computed rounding upward,
  // so each is at least the exact value it stands for.
  UpwardRounding rounding;
  const MatrixXd e_up = (X.hi - out.mid) + X.lo;
  MatrixXd neg_e_down = (out.mid - X.hi) - X.lo;
  detail::rounding_barrier(neg_e_down);
  out.rad = X.rad + e_up.cwiseAbs().cwiseMax(neg_e_down.cwiseAbs());
  detail::rounding_barrier(out.rad);
  return out;
}

namespace {

/// n / d (0 < d, both below 2^64; the sign apart) as hi + lo +- rad in integer
/// arithmetic, without MPFR: most decimals of a data file (up to 19 digits) are
/// such fractions, and MPFR's conversion was a tenth of a certified rank's time.
/// With s chosen so that Q1 = floor(n 2^s / d) has 64 or 65 bits, and Q2 the next
/// 64 bits of the quotient, n / d = (Q1 + (Q2 + f) 2^-64) 2^-s with 0 <= f < 1.
/// H = double(Q1) leaves Q1 - H exact and small (|Q1 - H| <= 2^12), so
/// n / d = (H + (rem + f) 2^-64) 2^-s with rem = (Q1 - H) 2^64 + Q2 an exact
/// 128-bit integer; the only errors are f 2^(-s-64) and the rounding of rem to a
/// double (at most 2^-52 of it).
static_assert(GMP_LIMB_BITS == 64, "small_fraction_ball reads one 64-bit limb");

void small_fraction_ball(std::uint64_t n, std::uint64_t d, bool negative, double& hi, double& lo, double& rad) {
  using u128 = unsigned __int128;
  if (n == 0) {
    hi = lo = rad = 0;
    return;
  }
  const int bits_n = 64 - __builtin_clzll(n), bits_d = 64 - __builtin_clzll(d);
  const int s = 64 + bits_d - bits_n;  // >= 1, and n 2^s < 2^(64 + bits_d) <= 2^128
  const u128 N = static_cast<u128>(n) << s;
  const u128 Q1 = N / d;
  const u128 R1 = N % d;
  const u128 Q2 = (R1 << 64) / d;  // < 2^64, since R1 < d
  const bool f_zero = (R1 << 64) % d == 0;
  const double H = static_cast<double>(Q1);  // an integer of at most 65 bits
  const __int128 rem = (static_cast<__int128>(Q1) - static_cast<__int128>(static_cast<u128>(H))) * (__int128{1} << 64) +
                       static_cast<__int128>(Q2);
  const double rem_d = static_cast<double>(rem);
  const bool l_exact = static_cast<__int128>(rem_d) == rem;
  const double L = std::ldexp(rem_d, -64);  // n / d 2^s = H + (rem + f) 2^-64
  // (H, L) to a normalised pair; exact (TwoSum, round to nearest).
  const double sum = H + L, bv = sum - H, err = (H - (sum - bv)) + (L - bv);
  hi = std::ldexp(sum, -s);  // powers of two: exact, all within [2^-130, 2^66]
  lo = std::ldexp(err, -s);
  const double a = f_zero ? 0.0 : std::ldexp(1.0, -s - 64);
  const double b = l_exact ? 0.0 : std::ldexp(std::fabs(L), -52 - s);
  rad = (a == 0 || b == 0) ? a + b : std::nextafter(a + b, INFINITY);
  if (negative) {
    hi = -hi;
    lo = -lo;
  }
}

}  // namespace

std::optional<DoubleDoubleBall> to_double_double_ball(const Matrix<Rational>& A) {
  DoubleDoubleBall out{MatrixXd(A.rows(), A.cols()), MatrixXd(A.rows(), A.cols()), MatrixXd(A.rows(), A.cols())};
  // q to 128 bits (error below 2^(e - 128), e its exponent), then peeled exactly
  // into doubles: q - hi and then - lo are multiples of 2^(e - 128) of at most 75
  // bits, so both subtractions are exact at 128 bits.
  const bool nearest = std::fegetround() == FE_TONEAREST;  // small_fraction_ball's TwoSum needs it
  mpfr_t q, r;
  mpfr_init2(q, 128);
  mpfr_init2(r, 128);
  bool ok = true;
  for (Index j = 0; j < A.cols() && ok; ++j)
    for (Index i = 0; i < A.rows(); ++i) {
      mpq_srcptr x = A(i, j).backend().data();
      if (nearest && mpz_sizeinbase(mpq_numref(x), 2) <= 64 && mpz_sizeinbase(mpq_denref(x), 2) <= 64) {
        small_fraction_ball(mpz_getlimbn(mpq_numref(x), 0), mpz_getlimbn(mpq_denref(x), 0), mpz_sgn(mpq_numref(x)) < 0,
                            out.hi(i, j), out.lo(i, j), out.rad(i, j));
        continue;
      }
      const int inexact = mpfr_set_q(q, x, MPFR_RNDN);
      if (mpfr_zero_p(q)) {
        out.hi(i, j) = out.lo(i, j) = out.rad(i, j) = 0;
        if (inexact != 0) ok = false;  // a nonzero q below MPFR's range
        continue;
      }
      const long e = mpfr_get_exp(q);
      if (e < -700 || e > 1000) {  // keep hi, lo, rad and the 2^(e - 127) term normal and finite
        ok = false;
        break;
      }
      const double hi = mpfr_get_d(q, MPFR_RNDN);
      mpfr_sub_d(r, q, hi, MPFR_RNDN);  // exact
      const double lo = mpfr_get_d(r, MPFR_RNDN);
      mpfr_sub_d(r, r, lo, MPFR_RNDN);  // exact again
      // |q - hi - lo| <= |r| + |q - rounded q|, the latter below 2^(e - 128).
      const double tail = mpfr_get_d(r, MPFR_RNDA);
      double rad = std::fabs(tail);
      if (inexact != 0) rad = std::nextafter(rad + std::ldexp(1.0, static_cast<int>(e) - 127), INFINITY);
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
