// The balls around exact and interval data (attnrank/numbers/balls.hpp): every
// conversion rounds its radius away from the midpoint, so the ball contains the value.
#include <attnrank/numbers/balls.hpp>

#include <attnrank/numbers/scalar_traits.hpp>

#include <mpfr.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>

namespace attnrank {

using Eigen::Index;
using Eigen::MatrixXd;

BallMatrix to_ball(const Matrix<Rational>& A) {
  BallMatrix b{Eigen::MatrixXd(A.rows(), A.cols()), Eigen::MatrixXd(A.rows(), A.cols())};
  Rational diff;
  mpfr_t t;
  mpfr_init2(t, 64);
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      const double m = scalar_traits<double>::from_rational(A(i, j));
      b.mid(i, j) = m;
      if (!std::isfinite(m)) {
        b.rad(i, j) = INFINITY;
        continue;
      }
      diff = A(i, j) - to_rational(m);
      mpfr_set_q(t, diff.backend().data(), MPFR_RNDA);
      b.rad(i, j) = std::fabs(mpfr_get_d(t, MPFR_RNDA));
    }
  mpfr_clear(t);
  return b;
}

BallMatrix to_ball(const Matrix<Interval>& A) {
  BallMatrix b{Eigen::MatrixXd(A.rows(), A.cols()), Eigen::MatrixXd(A.rows(), A.cols())};
  mpfr_t lo, hi, d;
  mpfr_inits2(64, lo, hi, d, static_cast<mpfr_ptr>(nullptr));
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      mpfr_set_prec(lo, mpfi_get_prec(A(i, j).backend().data()));
      mpfr_set_prec(hi, mpfi_get_prec(A(i, j).backend().data()));
      mpfr_set_prec(d, mpfi_get_prec(A(i, j).backend().data()));
      mpfi_get_left(lo, A(i, j).backend().data());
      mpfi_get_right(hi, A(i, j).backend().data());
      const double m = approx_midpoint(A(i, j));  // any double will do: the radius covers the rest
      b.mid(i, j) = m;
      mpfr_sub_d(hi, hi, m, MPFR_RNDU);  // hi - m, up
      mpfr_d_sub(lo, m, lo, MPFR_RNDU);  // m - lo, up
      mpfr_max(d, hi, lo, MPFR_RNDU);
      b.rad(i, j) = std::isfinite(m) ? mpfr_get_d(d, MPFR_RNDU) : INFINITY;
      if (b.rad(i, j) < 0) b.rad(i, j) = 0;
    }
  mpfr_clears(lo, hi, d, static_cast<mpfr_ptr>(nullptr));
  return b;
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
