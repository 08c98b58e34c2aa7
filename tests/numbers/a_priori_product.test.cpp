// Tests for numbers/a_priori_product.hpp: the bounds contain the exact product
// (exact rationals are the oracle) for entries of any size, subnormal products
// included, whatever rounding mode the caller holds; an overflow is an infinite
// bound, never a wrong finite one.
#include "support.hpp"

#include <attnrank/numbers/a_priori_product.hpp>

#include <cfenv>
#include <cmath>
#include <limits>

using namespace attnrank;

namespace {

/// rows x cols entries c * (integer in [-1000, 1000]) / 1000 with c drawn per matrix,
/// from the smallest subnormal to DBL_MAX.
Eigen::MatrixXd gen_matrix(Eigen::Index rows, Eigen::Index cols) {
  const double c = *rc::gen::element(1.0, 1e-3, 1e3, 1e-160, 1e-300, 1e150, 1e300, 0x1p-1070, 0x1p-1074,
                                     std::numeric_limits<double>::max());
  Eigen::MatrixXd M(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) M(i, j) = c * (*rc::gen::inRange(-1000, 1001) / 1000.0);  // no c x 1000
  return M;
}

Matrix<Rational> exact(const Eigen::MatrixXd& M) {
  Matrix<Rational> out(M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) out(i, j) = Rational(M(i, j));
  return out;
}

/// lo <= X <= hi. An infinite end or NaN is "no bound there" (what the header
/// promises on overflow); it is allowed only when `may_overflow`.
void require_enclosed(const BoundsMatrix& B, const Matrix<Rational>& X, bool may_overflow) {
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = 0; j < X.cols(); ++j) {
      const double lo = B.lo(i, j), hi = B.hi(i, j);
      if (!may_overflow) RC_ASSERT(std::isfinite(lo) && std::isfinite(hi));
      if (std::isfinite(lo)) RC_ASSERT(Rational(lo) <= X(i, j));
      if (std::isfinite(hi)) RC_ASSERT(X(i, j) <= Rational(hi));
      RC_ASSERT(!(lo == INFINITY || hi == -INFINITY));  // an infinite end on the wrong side is a wrong bound
    }
}

/// Whether sums of k products of entries of A and B, or the squares in their
/// norms, can come near the end of the double range.
bool near_overflow(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B) {
  const double a = A.cwiseAbs().maxCoeff(), b = B.cwiseAbs().maxCoeff();
  return a > 1e153 || b > 1e153 || a * b * static_cast<double>(A.cols() + 1) > 1e290;
}

int gen_mode() { return *rc::gen::element(FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO); }

}  // namespace

TEST_CASE("attnrank::a_priori_product_bounds") {
  rc::prop("contains A B exactly, for entries from 2^-1074 to DBL_MAX", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 7), k = *rc::gen::inRange<Eigen::Index>(1, 40),
               n = *rc::gen::inRange<Eigen::Index>(1, 7);
    const Eigen::MatrixXd A = gen_matrix(m, k), B = gen_matrix(k, n);
    const int saved = std::fegetround();
    std::fesetround(gen_mode());
    const BoundsMatrix P = a_priori_product_bounds(A, B, row_norms_upper(A), row_norms_upper(B.transpose()));
    std::fesetround(saved);
    require_enclosed(P, exact(A) * exact(B), near_overflow(A, B));
  });
  SECTION("the width is gamma_k ||a|| ||b|| at most, for unit-size entries") {
    const Eigen::MatrixXd A = Eigen::MatrixXd::Constant(3, 1000, 0.1), B = Eigen::MatrixXd::Constant(1000, 2, 0.3);
    const BoundsMatrix P = a_priori_product_bounds(A, B, row_norms_upper(A), row_norms_upper(B.transpose()));
    const double bound = 2 * 1000 * 0x1p-53 * 1.01 * std::sqrt(1000 * 0.01) * std::sqrt(1000 * 0.09);
    CHECK(((P.hi - P.lo).array() <= bound).all());
    CHECK((P.lo.array() <= 30.0).all());
    CHECK((P.hi.array() >= 30.0).all());  // 1000 x 0.1 x 0.3: not a double sum, but bounded either side
  }
}

TEST_CASE("attnrank::a_priori_interval_product_bounds") {
  rc::prop("contains X V exactly for every X in [P.lo, P.hi] (its ends and midpoints)", [] {
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 6), k = *rc::gen::inRange<Eigen::Index>(1, 30),
               n = *rc::gen::inRange<Eigen::Index>(1, 5);
    const Eigen::MatrixXd lo = gen_matrix(m, k);
    const double radius = *rc::gen::element(0.0, 1e-15, 1e-3, 1.0);
    BoundsMatrix P{lo, (lo.array() + radius * (lo.array().abs() + 1e-300)).matrix()};
    RC_PRE(P.hi.allFinite());  // an interval matrix of finite ends
    const Eigen::MatrixXd V = gen_matrix(k, n);
    const Eigen::RowVectorXd v_max = V.cwiseAbs().colwise().maxCoeff();
    const int saved = std::fegetround();
    std::fesetround(gen_mode());
    const BoundsMatrix B = a_priori_interval_product_bounds(P, V, v_max);
    std::fesetround(saved);
    Matrix<Rational> X(m, k);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < k; ++j) {
        const int where = *rc::gen::inRange(0, 3);
        X(i, j) = where == 0 ? Rational(P.lo(i, j))
                  : where == 1 ? Rational(P.hi(i, j))
                               : (Rational(P.lo(i, j)) + Rational(P.hi(i, j))) / 2;
      }
    require_enclosed(B, X * exact(V), near_overflow(P.lo.cwiseAbs().cwiseMax(P.hi.cwiseAbs()), V));
  });
}

TEST_CASE("attnrank::a_priori_interval_product_bounds at the end of the double range") {
  rc::prop("X V past DBL_MAX with a finite radius: infinite ends or true ones, never a false band", [] {
    // Weights whose rows sum past 1 times values up to DBL_MAX: fl(mid V) overflows to
    // +-inf (or NaN) while (gamma_k sum |mid| + sum rad) max |V| stays finite, the case a
    // nearest GEMM cannot bound by itself (the fused attention head's overflow).
    const auto m = *rc::gen::inRange<Eigen::Index>(1, 4), k = *rc::gen::inRange<Eigen::Index>(1, 40),
               n = *rc::gen::inRange<Eigen::Index>(1, 4);
    const double top = *rc::gen::element(std::numeric_limits<double>::max(), 1e308, 3e307, 4.4e305, 1.0);
    Eigen::MatrixXd lo(m, k), V(k, n);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < k; ++j) lo(i, j) = *rc::gen::inRange(0, 1001) / 1000.0;
    for (Eigen::Index i = 0; i < k; ++i)
      for (Eigen::Index j = 0; j < n; ++j) V(i, j) = top * (*rc::gen::inRange(-1000, 1001) / 1000.0);  // the quotient first: top x 1000 overflows
    const double radius = *rc::gen::element(0.0, 1e-15, 1e-3);
    const BoundsMatrix P{lo, (lo.array() + radius).matrix()};
    const int saved = std::fegetround();
    std::fesetround(gen_mode());
    const BoundsMatrix B = a_priori_interval_product_bounds(P, V, V.cwiseAbs().colwise().maxCoeff());
    std::fesetround(saved);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) RC_ASSERT(!(B.lo(i, j) > B.hi(i, j)));
    require_enclosed(B, exact(P.lo) * exact(V), true);
    require_enclosed(B, exact(P.hi) * exact(V), true);
  });
}

TEST_CASE("attnrank::a_priori_residual_norm_upper") {
  rc::prop("bounds ||I - R M||_inf (exact rationals) from above, or is +inf; R an approximate inverse or anything", [] {
    const auto k = *rc::gen::inRange<Eigen::Index>(1, 24);
    const Eigen::MatrixXd M = gen_matrix(k, k);
    // Mostly M's approximate inverse (the residual then near 0, where the bound's slack shows),
    // sometimes an unrelated matrix (a residual of any size).
    const bool inverse = *rc::gen::arbitrary<bool>();
    const Eigen::MatrixXd R = inverse ? Eigen::MatrixXd(M.partialPivLu().inverse()) : gen_matrix(k, k);
    if (!R.allFinite()) return;
    const int mode = gen_mode();
    const int saved = std::fegetround();
    std::fesetround(mode);
    const double bound = a_priori_residual_norm_upper(R, M);
    std::fesetround(saved);
    RC_ASSERT(!std::isnan(bound));
    RC_ASSERT(bound >= 0);
    if (std::isinf(bound)) return;
    const Matrix<Rational> E = Matrix<Rational>::Identity(k, k) - exact(R) * exact(M);
    Rational worst = 0;
    for (Eigen::Index i = 0; i < k; ++i) {
      Rational row = 0;
      for (Eigen::Index j = 0; j < k; ++j) row += abs(E(i, j));
      worst = std::max(worst, row);
    }
    RC_ASSERT(worst <= Rational(bound));
  });
  SECTION("refuses shapes that are not square of one size") {
    CHECK_THROWS(a_priori_residual_norm_upper(Eigen::MatrixXd::Zero(2, 3), Eigen::MatrixXd::Zero(3, 2)));
    CHECK_THROWS(a_priori_residual_norm_upper(Eigen::MatrixXd::Zero(2, 2), Eigen::MatrixXd::Zero(3, 3)));
  }
}
