// Certified determinants (attnrank/linalg/certified_determinant.hpp): preconditioned enclosures, Hadamard otherwise.
#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/linalg/detail/finite_checks.hpp>

#include <attnrank/linalg/detail/require_square.hpp>
#include <attnrank/linalg/product.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>

#include <cmath>
#include <optional>

namespace attnrank {
namespace detail {

/// Step 3-4 in MPFI: det = sign * exp(trace +- n eps^2 / (2 (1 - eps))) / diag_product.
/// The one gate every preconditioned answer passes: nothing unless eps is proven
/// below 1 and trace, diag_product and the result are finite intervals (a NaN
/// anywhere, e.g. from inf - inf in a product of huge inverses, proves nothing;
/// NaN is never an enclosure).
std::optional<Interval> det_from_near_identity(const Interval& trace, const Interval& eps, Eigen::Index n, int sign,
                                                      const Interval& diag_product) {
  using traits = scalar_traits<Interval>;
  if (!traits::is_finite(eps) || !(upper_bound(eps) < 1)) return std::nullopt;
  if (!traits::is_finite(trace) || !traits::is_finite(diag_product) || mpfi_has_zero(diag_product.backend().data()) > 0) return std::nullopt;
  const Interval delta = Interval(n) * eps * eps / (2 * (1 - eps));
  Interval log_det;
  mpfi_interv_fr(log_det.backend().data(), lower_bound(Interval(trace - delta)).backend().data(),
                 upper_bound(Interval(trace + delta)).backend().data());
  Interval det = exp(log_det) / diag_product;
  if (!traits::is_finite(det)) return std::nullopt;
  return sign < 0 ? Interval(-det) : det;
}

/// Hadamard: |det X| <= prod_i ||row_i(X)||_2 for all X with |X - mid| <= rad.
template <class Mag>
Interval hadamard_enclosure(Eigen::Index n, Mag magnitude) {
  Interval bound = 1;
  for (Eigen::Index i = 0; i < n; ++i) {
    Interval s = 0;
    for (Eigen::Index j = 0; j < n; ++j) {
      const Interval m = magnitude(i, j);
      s += m * m;
    }
    bound *= sqrt(s);
  }
  Interval out;
  const Real h = upper_bound(bound);
  Real neg_h = -h;
  mpfi_interv_fr(out.backend().data(), neg_h.backend().data(), h.backend().data());
  return out;
}

}  // namespace detail

CertifiedDeterminant certified_determinant(const BallMatrix& A) {
  using namespace detail;
  require_square(A.mid.rows(), A.mid.cols());
  require_finite_ball(A);
  const Eigen::Index n = A.mid.rows();
  const PrecisionScope scope(128);  // for the final scalar steps only
  CertifiedDeterminant out;
  out.bits = 53;
  if (n == 0) {
    out.det = 1;
    out.preconditioned = true;
    out.method = "directed-rounding";
    return out;
  }
  const Eigen::PartialPivLU<Eigen::MatrixXd> lu(A.mid);
  const Eigen::MatrixXd I = Eigen::MatrixXd::Identity(n, n);
  Eigen::MatrixXd Li = lu.matrixLU().triangularView<Eigen::UnitLower>().solve(I);
  Eigen::MatrixXd Ui = lu.matrixLU().triangularView<Eigen::Upper>().solve(I);
  Li.triangularView<Eigen::StrictlyUpper>().setZero();
  Li.diagonal().setOnes();
  Ui.triangularView<Eigen::StrictlyLower>().setZero();
  out.eps = INFINITY;
  if (Li.allFinite() && Ui.allFinite() && (Ui.diagonal().array() != 0).all()) {
    const BallMatrix PA{lu.permutationP() * A.mid, lu.permutationP() * A.rad};
    const BoundsMatrix Y = certified_product_bounds(to_ball(certified_product_bounds(Li, PA)), Ui);
    BoundsMatrix E = identity_minus(Y);  // I - Y; its norm and negated trace are what we need
    out.eps = norm_inf_upper(E);
    if (out.eps < 1) {  // false for NaN too
      Interval trace = 0, diag_product = 1;
      for (Eigen::Index k = 0; k < n; ++k) {
        Interval e;  // (Y - I)_kk in [-(I - Y).hi, -(I - Y).lo]
        mpfi_interv_d(e.backend().data(), -E.hi(k, k), -E.lo(k, k));
        trace += e;
        diag_product *= Interval(Ui(k, k));
      }
      if (const auto det = det_from_near_identity(trace, Interval(out.eps), n,
                                                  static_cast<int>(lu.permutationP().determinant()), diag_product)) {
        out.det = *det;
        out.preconditioned = true;
        out.method = "directed-rounding";
        return out;
      }
    }
  }
  out.method = "hadamard";
  out.det = hadamard_enclosure(n, [&](Eigen::Index i, Eigen::Index j) {
    return Interval(std::fabs(A.mid(i, j))) + Interval(A.rad(i, j));
  });
  return out;
}

CertifiedDeterminant certified_determinant(const Eigen::MatrixXd& A) {
  return certified_determinant(BallMatrix{A, Eigen::MatrixXd::Zero(A.rows(), A.cols())});
}

CertifiedDeterminant certified_determinant(const Matrix<Interval>& A) {
  using namespace detail;
  require_square(A.rows(), A.cols());
  const Eigen::Index n = A.rows();
  CertifiedDeterminant out;
  out.bits = PrecisionScope::bits();
  require_finite_intervals(A, "certified determinant");
  if (n == 0) {
    out.det = 1;
    out.preconditioned = true;
    out.method = "mpfi";
    return out;
  }
  const Matrix<Real> mid = A.unaryExpr([](const Interval& x) { return approx_midpoint_real(x); });
  const Eigen::PartialPivLU<Matrix<Real>> lu(mid);
  const Matrix<Real> I = Matrix<Real>::Identity(n, n);
  Matrix<Real> Li = lu.matrixLU().triangularView<Eigen::UnitLower>().solve(I);
  Matrix<Real> Ui = lu.matrixLU().triangularView<Eigen::Upper>().solve(I);
  Li.triangularView<Eigen::StrictlyUpper>().setZero();
  Li.diagonal().setOnes();
  Ui.triangularView<Eigen::StrictlyLower>().setZero();
  out.eps = INFINITY;
  bool finite = true;
  for (Eigen::Index i = 0; i < n && finite; ++i)
    for (Eigen::Index j = 0; j < n; ++j)
      if (!scalar_traits<Real>::is_finite(Li(i, j)) || !scalar_traits<Real>::is_finite(Ui(i, j))) finite = false;
  for (Eigen::Index k = 0; k < n && finite; ++k)
    if (Ui(k, k) == 0) finite = false;
  if (finite) {
    const Matrix<Interval> PA = lu.permutationP() * A;
    const Matrix<Interval> Y = multiply(multiply(Matrix<Interval>(Li.cast<Interval>()), PA), Matrix<Interval>(Ui.cast<Interval>()));
    // eps = max row sum of |Y - I|; a NaN row sum fails every comparison, so it
    // is tested for explicitly instead of being skipped by the max.
    Interval eps = 0, trace = 0, diag_product = 1;
    bool eps_known = true;
    for (Eigen::Index i = 0; i < n; ++i) {
      Interval row = 0;
      for (Eigen::Index j = 0; j < n; ++j) row += abs(Interval(Y(i, j) - (i == j ? 1 : 0)));
      if (!scalar_traits<Interval>::is_finite(row)) eps_known = false;
      else if (upper_bound(row) > upper_bound(eps)) eps = Interval(upper_bound(row));
      trace += Y(i, i) - 1;
      diag_product *= Interval(Ui(i, i));
    }
    // fabs: MPFI's [0, 0] has the upper end -0, which is not a bound to print.
    out.eps = eps_known ? std::fabs(mpfr_get_d(upper_bound(eps).backend().data(), MPFR_RNDU)) : INFINITY;
    if (eps_known) {
      if (const auto det = det_from_near_identity(trace, eps, n, static_cast<int>(lu.permutationP().determinant()),
                                                  diag_product)) {
        out.det = *det;
        out.preconditioned = true;
        out.method = "mpfi";
        return out;
      }
    }
  }
  out.method = "hadamard";
  out.det = hadamard_enclosure(n, [&](Eigen::Index i, Eigen::Index j) { return Interval(abs(A(i, j))); });
  return out;
}

CertifiedDeterminant certified_determinant(const Matrix<Rational>& A, unsigned bits) {
  detail::require_square(A.rows(), A.cols());
  require_precision_bits(bits);
  if (bits <= 53) {
    const BallMatrix b = to_ball(A);
    if (b.mid.allFinite() && b.rad.allFinite()) {
      CertifiedDeterminant d = certified_determinant(b);
      if (d.preconditioned) return d;
    }
  }
  const PrecisionScope scope(std::max(bits, 64u));
  return certified_determinant(from_rational<Interval>(A));
}

}  // namespace attnrank
