// Certified determinants (attnrank/linalg/certified_determinant.hpp): preconditioned enclosures, Hadamard otherwise.
#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/linalg/detail/finite_checks.hpp>

#include <attnrank/linalg/detail/require_square.hpp>
#include <attnrank/linalg/detail/two_stage_preconditioner.hpp>
#include <attnrank/linalg/product.hpp>

#include <attnrank/linalg/detail/dense_decompositions.hpp>
#include <attnrank/numbers/balls.hpp>

#include <cmath>
#include <limits>
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

std::optional<TriangularPreconditioner> triangular_preconditioner(const Eigen::MatrixXd& M) {
  const Eigen::Index n = M.rows();
  const Eigen::PartialPivLU<Eigen::MatrixXd> lu(M);
  const Eigen::MatrixXd I = Eigen::MatrixXd::Identity(n, n);
  TriangularPreconditioner out;
  // A pivot that is exactly 0 (the nearest doubles of a nearly singular matrix can
  // be singular) is moved to u max|pivot|: any triangular factors are valid
  // preconditioners, since the proof is the enclosure of Y, not their accuracy.
  Eigen::MatrixXd LU = lu.matrixLU();
  double top = n > 0 ? LU.diagonal().cwiseAbs().maxCoeff() : 1.0;
  out.pivot_ratio = n > 0 && top > 0 ? LU.diagonal().cwiseAbs().minCoeff() / top : 1.0;
  if (!(top > 0) || !std::isfinite(top)) top = 1;
  for (Eigen::Index k = 0; k < n; ++k)
    if (LU(k, k) == 0) LU(k, k) = top * std::numeric_limits<double>::epsilon();
  out.Li = LU.triangularView<Eigen::UnitLower>().solve(I);
  out.Ui = LU.triangularView<Eigen::Upper>().solve(I);
  out.Li.triangularView<Eigen::StrictlyUpper>().setZero();
  out.Li.diagonal().setOnes();
  out.Ui.triangularView<Eigen::StrictlyLower>().setZero();
  if (!out.Li.allFinite() || !out.Ui.allFinite() || (out.Ui.diagonal().array() == 0).any()) return std::nullopt;
  out.P = lu.permutationP();
  out.sign = static_cast<int>(lu.permutationP().determinant());
  return out;
}

std::optional<TwoStagePreconditioned> precondition_two_stage(const DoubleDoubleBall& A,
                                                             const TriangularPreconditioner* given) {
  std::optional<TriangularPreconditioner> computed;
  if (!given) computed = triangular_preconditioner(A.hi);
  const TriangularPreconditioner* first = given ? given : computed ? &*computed : nullptr;
  if (!first) return std::nullopt;
  const DoubleDoubleBall PA{first->P * A.hi, first->P * A.lo, first->P * A.rad};
  const auto T = accurate_product(first->Li, PA);
  if (!T) return std::nullopt;
  const auto Z = accurate_product(*T, first->Ui);
  if (!Z) return std::nullopt;
  const BallMatrix z = to_ball(*Z);
  if (!z.mid.allFinite() || !z.rad.allFinite()) return std::nullopt;
  const auto second = triangular_preconditioner(z.mid);
  if (!second) return std::nullopt;
  const BallMatrix Qz{second->P * z.mid, second->P * z.rad};
  const BoundsMatrix Y = certified_product_bounds(to_ball(certified_product_bounds(second->Li, Qz)), second->Ui);
  TwoStagePreconditioned out;
  out.identity_minus_y = identity_minus(Y);
  out.eps = norm_inf_upper(out.identity_minus_y);
  out.sign = first->sign * second->sign;
  const Eigen::Index n = A.hi.rows();
  out.diagonal.resize(2 * n);
  out.diagonal << first->Ui.diagonal(), second->Ui.diagonal();
  return out;
}

/// The determinant from proven bounds of I - Y (Y = the preconditioned matrix),
/// its norm bound eps, the permutations' sign and the inverse factors' diagonal
/// entries: det = sign det(Y) / prod diagonal. Nothing unless eps < 1.
std::optional<Interval> det_from_preconditioned(const BoundsMatrix& identity_minus_y, double eps, int sign,
                                                const Eigen::VectorXd& diagonal) {
  if (!(eps < 1)) return std::nullopt;  // false for NaN too
  const Eigen::Index n = identity_minus_y.lo.rows();
  Interval trace = 0, diag_product = 1;
  for (Eigen::Index k = 0; k < n; ++k) {
    Interval e;  // (Y - I)_kk in [-(I - Y).hi, -(I - Y).lo]
    mpfi_interv_d(e.backend().data(), -identity_minus_y.hi(k, k), -identity_minus_y.lo(k, k));
    trace += e;
  }
  for (Eigen::Index k = 0; k < diagonal.size(); ++k) diag_product *= Interval(diagonal(k));
  return det_from_near_identity(trace, Interval(eps), n, sign, diag_product);
}

/// Hadamard's bound over the ball of doubles.
Interval hadamard_enclosure(const BallMatrix& A) {
  return hadamard_enclosure(A.mid.rows(), [&](Eigen::Index i, Eigen::Index j) {
    return Interval(std::fabs(A.mid(i, j))) + Interval(A.rad(i, j));
  });
}

/// The one-stage test in doubles with the preconditioner `pre` of A.mid: a
/// preconditioned answer, or (preconditioned = false, det left empty) the residual
/// bound of the failed test.
CertifiedDeterminant determinant_one_stage(const BallMatrix& A, const std::optional<TriangularPreconditioner>& pre) {
  CertifiedDeterminant out;
  out.bits = 53;
  out.eps = INFINITY;
  // A speed rule only (the two-stage test comes next, and either way the proof is
  // Y's enclosure): when the pivots spread beyond 1 / u, the products' rounding,
  // about u max|U_kk| / min|U_kk|, cannot leave Y within 1 of I.
  if (pre && pre->pivot_ratio >= std::numeric_limits<double>::epsilon()) {
    const BallMatrix PA{pre->P * A.mid, pre->P * A.rad};
    const BoundsMatrix Y = certified_product_bounds(to_ball(certified_product_bounds(pre->Li, PA)), pre->Ui);
    const BoundsMatrix E = identity_minus(Y);  // I - Y; its norm and negated trace are what we need
    out.eps = norm_inf_upper(E);
    if (const auto det = det_from_preconditioned(E, out.eps, pre->sign, pre->Ui.diagonal())) {
      out.det = *det;
      out.preconditioned = true;
      out.method = "directed-rounding";
      return out;
    }
  }
  out.method = "hadamard";
  return out;
}

/// The two-stage test (its first stage's factors `first`, or computed when null),
/// or Hadamard's bound.
CertifiedDeterminant determinant_two_stages(const DoubleDoubleBall& A, const TriangularPreconditioner* first) {
  require_square(A.hi.rows(), A.hi.cols());
  const PrecisionScope scope(128);  // for the final scalar steps only
  CertifiedDeterminant out;
  out.bits = 106;
  out.eps = INFINITY;
  if (A.hi.rows() == 0) {
    out.det = 1;
    out.preconditioned = true;
    out.method = "double-double";
    return out;
  }
  if (!A.hi.allFinite() || !A.lo.allFinite() || !A.rad.allFinite())
    throw input_error("certified determinant: the matrix has a NaN or infinite entry");
  if (const auto pre = precondition_two_stage(A, first)) {
    out.eps = pre->eps;
    if (const auto det = det_from_preconditioned(pre->identity_minus_y, pre->eps, pre->sign, pre->diagonal)) {
      out.det = *det;
      out.preconditioned = true;
      out.method = "double-double";
      return out;
    }
  }
  out.method = "hadamard";
  // |x| <= |hi| + |lo| + rad, each sum rounded up.
  BallMatrix outer{Eigen::MatrixXd::Zero(A.hi.rows(), A.hi.cols()), A.rad};
  {
    UpwardRounding up;
    outer.rad = A.hi.cwiseAbs() + A.lo.cwiseAbs() + A.rad;
    rounding_barrier(outer.rad);
  }
  out.det = hadamard_enclosure(outer);
  return out;
}

/// The tests in doubles on a nonempty square matrix: one stage on the ball b, then
/// (given `dd`, a double-double ball holding the same matrices) two stages, whose
/// first reuses the factors of b.mid: any triangular factors are valid, the proof
/// is Y's enclosure. Neither proven: Hadamard's bound over b, with the residual
/// and precision (106) of the two-stage test when it ran.
CertifiedDeterminant determinant_in_doubles(const BallMatrix& b, const DoubleDoubleBall* dd) {
  const PrecisionScope scope(128);  // for the final scalar steps only
  const auto pre = triangular_preconditioner(b.mid);
  CertifiedDeterminant one = determinant_one_stage(b, pre);
  if (one.preconditioned) return one;
  if (dd) {
    CertifiedDeterminant two = determinant_two_stages(*dd, pre ? &*pre : nullptr);
    if (two.preconditioned) return two;
    if (std::isfinite(two.eps)) {  // report the further test's residual
      one.eps = two.eps;
      one.bits = two.bits;
    }
  }
  one.det = hadamard_enclosure(b);
  return one;
}

}  // namespace detail

CertifiedDeterminant certified_determinant(const DoubleDoubleBall& A) {
  return detail::determinant_two_stages(A, nullptr);
}

CertifiedDeterminant certified_determinant(const BallMatrix& A) {
  using namespace detail;
  require_square(A.mid.rows(), A.mid.cols());
  require_finite_ball(A);
  if (A.mid.rows() == 0) {
    CertifiedDeterminant out;
    out.det = 1;
    out.preconditioned = true;
    out.method = "directed-rounding";
    return out;
  }
  // Too ill-conditioned for one double stage: the same ball, two stages.
  const DoubleDoubleBall same{A.mid, Eigen::MatrixXd::Zero(A.mid.rows(), A.mid.cols()), A.rad};
  return determinant_in_doubles(A, &same);
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
  if (A.rows() == 0) return certified_determinant(BallMatrix{});
  if (bits <= 53) {
    // One conversion serves both tests: the double balls are read off the
    // double-double ones (as tight: mid the nearest double, rad about |lo|).
    const auto dd = to_double_double_ball(A);
    const BallMatrix b = dd ? to_ball(*dd) : to_ball(A);
    if (b.mid.allFinite() && b.rad.allFinite()) {
      // The two-stage test runs on the data themselves: a 17-digit decimal is not
      // a double, and its ball of doubles may hold singular matrices when A is
      // ill-conditioned.
      const CertifiedDeterminant d = detail::determinant_in_doubles(b, dd ? &*dd : nullptr);
      // bits 106: the two-stage test ran and failed, and MPFI at 64 bits would not
      // reach further, so the answer stands (Hadamard's bound).
      if (d.preconditioned || d.bits == 106) return d;
    }
  }
  const PrecisionScope scope(std::max(bits, 64u));
  return certified_determinant(from_rational<Interval>(A));
}

}  // namespace attnrank
