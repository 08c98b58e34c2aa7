// The free-scores decision of attnrank/reach/free.hpp: floor bounds, witness, verdict.
#include <attnrank/reach/free.hpp>

#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/softmax.hpp>
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/linalg/detail/balanced_factors.hpp>
#include <attnrank/linalg/product.hpp>

#include <Eigen/SVD>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace attnrank {
double stated_witness_error(const Matrix<Rational>& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                            unsigned mpfi_bits, unsigned& bits, const BoundsMatrix* target_bounds) {
  const double fast = target_bounds ? fast_certified_witness_error(*target_bounds, Q, K)
                                    : fast_certified_witness_error(normalized_target_bounds(A), Q, K);
  bits = 53;
  if (std::isfinite(fast) && !(fast < witness_error_mpfi_below)) return fast;
  const unsigned precise_bits = std::max(mpfi_bits, 64u);
  const double precise = certified_witness_error(A, Q, K, precise_bits);
  if (precise < fast || !std::isfinite(fast)) {
    bits = precise_bits;
    return precise;
  }
  return fast;
}

bool witness_error_within(const Matrix<Rational>& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                          unsigned bits, double stated) {
  if (fast_certified_witness_error(normalized_target_bounds(A), Q, K) <= stated) return true;
  return certified_witness_error(A, Q, K, std::max(bits, 64u)) <= stated;
}

namespace detail {

using Eigen::Index;

std::vector<Index> iota_indices(Index n) {
  std::vector<Index> v(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

/// Lower bound of the floor: the (n-1) x (n-1) leading block first (generic
/// targets have floor n - 1, and C 1 = 0 makes the full matrix singular), then
/// the general certified rank; MPFI at higher precision when asked.
void floor_lower_bound(const Matrix<Rational>& A, const BallMatrix& ball, const ReachOptions& o, FloorBounds& f) {
  const Index n = A.rows();
  f.lower = 0;
  f.lower_bits = 53;
  if (n <= 1) return;
  const std::vector<Index> lead = iota_indices(n - 1);
  if (const auto r = certify_nonsingular_minor(ball, lead, lead)) {
    f.lower = n - 1;
    f.minor_rows = f.minor_cols = lead;
    f.minor_residual = *r;
    return;
  }
  const CertifiedRank rb = certified_rank(ball, /*try_two_stages=*/false);  // singular by construction: C 1 = 0
  f.lower = rb.lower;
  f.minor_rows = rb.pivot_rows;
  f.minor_cols = rb.pivot_cols;
  f.minor_residual = rb.residual_bound;
  if (f.lower < n - 1 && o.bits > 53 && n <= o.mpfi_size_limit) {
    const PrecisionScope scope(o.bits);
    const CertifiedRank hp = certified_rank(centered_log(A));
    if (hp.lower > f.lower) {
      f.lower = hp.lower;
      f.minor_rows = hp.pivot_rows;
      f.minor_cols = hp.pivot_cols;
      f.minor_residual = hp.residual_bound;
      f.lower_bits = hp.bits;
    }
  }
}

/// Upper bound of the floor: n - 1, or the exact kernel of the stacked exponents.
void floor_upper_bound(const Matrix<Rational>& A, const ReachOptions& o, FloorBounds& f) {
  const Index n = A.rows();
  f.upper = std::max<Index>(n - 1, 0);
  f.upper_reason = "C 1 = 0, so the floor is at most n - 1";
  if (f.lower >= f.upper) return;
  const std::optional<LogDecomposition> d = decompose_log(A, o.limits);
  if (!d) {
    f.upper_reason = "n - 1 only: the target's numerators and denominators exceed the exact-step limits";
    return;
  }
  f.bases = d->bases;
  const ExactRank r = centered_exponents_rank(*d, n);
  f.upper = std::min(f.upper, r.rank);
  f.kernel = r.kernel;
  f.upper_reason = d->bases.empty() ? "exact: log A = 0"
                                    : "exact: " + std::to_string(r.kernel.cols()) +
                                          " independent rational kernel vectors common to every exponent matrix E_t C";
}

/// Truncated SVD of the centered log: Q K^T / sqrt(dk) = U_k S_k V_k^T.
Witness truncated_witness(const Eigen::MatrixXd& LC, Index dk) {
  const TruncatedSvd svd = approx_truncated_svd(LC, dk);
  Witness w;
  std::tie(w.Q, w.K) = balanced_factors(svd.U, svd.s, svd.V, dk, std::sqrt(static_cast<double>(dk)));
  return w;
}

void scale_by_root_dk(Matrix<Interval>& S, Eigen::Index dk) {
  if (dk == 1) return;
  const Interval root = sqrt(Interval(static_cast<long>(dk)));
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < S.cols(); ++j) mpfi_div(S(i, j).backend().data(), S(i, j).backend().data(), root.backend().data());
}

/// max |softmax(S) - Â| for scores enclosed in S (MPFI), rounded up to a double.
double softmax_distance(const Matrix<Rational>& A, const Matrix<Interval>& S, const Mask* mask) {
  const Matrix<Interval> P = mask ? softmax_rows(S, *mask) : softmax_rows(S);
  const Matrix<Interval> T = normalized_target(A);
  // sup |p - t| over the two intervals = max(p.hi - t.lo, t.hi - p.lo), each
  // difference rounded up (in place: no temporaries per entry).
  Real worst = 0, up = 0;
  for (Eigen::Index i = 0; i < P.rows(); ++i)
    for (Eigen::Index j = 0; j < P.cols(); ++j) {
      mpfi_srcptr p = P(i, j).backend().data(), t = T(i, j).backend().data();
      if (mpfi_nan_p(p) || mpfi_nan_p(t)) return INFINITY;
      mpfr_sub(up.backend().data(), &p->right, &t->left, MPFR_RNDU);
      if (mpfr_cmp(up.backend().data(), worst.backend().data()) > 0) mpfr_set(worst.backend().data(), up.backend().data(), MPFR_RNDU);
      mpfr_sub(up.backend().data(), &t->right, &p->left, MPFR_RNDU);
      if (mpfr_cmp(up.backend().data(), worst.backend().data()) > 0) mpfr_set(worst.backend().data(), up.backend().data(), MPFR_RNDU);
    }
  if (!scalar_traits<Real>::is_finite(worst)) return INFINITY;
  return mpfr_get_d(worst.backend().data(), MPFR_RNDU);
}

Matrix<Interval> enclosed_witness_scores(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K) {
  using Eigen::Index;
  const BoundsMatrix qk = certified_product_bounds(Q, Eigen::MatrixXd(K.transpose()));
  Matrix<Interval> S(Q.rows(), K.rows());
  for (Index i = 0; i < S.rows(); ++i)
    for (Index j = 0; j < S.cols(); ++j) mpfi_interv_d(S(i, j).backend().data(), qk.lo(i, j), qk.hi(i, j));
  scale_by_root_dk(S, Q.cols());
  return S;
}

}  // namespace detail

double certified_witness_error(const Matrix<Rational>& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                      unsigned bits) {
  const Eigen::Index n = A.rows();
  if (Q.rows() != n || K.rows() != n || Q.cols() != K.cols() || Q.cols() < 1)
    throw input_error("witness: Q and K must both be " + std::to_string(n) + " x d_k");
  if (!Q.allFinite() || !K.allFinite()) return INFINITY;
  const PrecisionScope scope(std::max(bits, 64u));
  return detail::softmax_distance(A, detail::enclosed_witness_scores(Q, K));
}

double fast_certified_witness_error(const BoundsMatrix& target, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K) {
  const Eigen::Index n = target.lo.rows();
  if (Q.rows() != n || K.rows() != n || Q.cols() != K.cols() || Q.cols() < 1)
    throw input_error("witness: Q and K must both be " + std::to_string(n) + " x d_k");
  if (!Q.allFinite() || !K.allFinite()) return INFINITY;
  return max_softmax_distance_upper(certified_scaled_scores(Q, K), nullptr, target);
}

namespace detail {
Matrix<Rational> zeros_replaced(const Matrix<Rational>& A) {
  Matrix<Rational> out = A;
  for (Index i = 0; i < A.rows(); ++i) replace_zeros_in_row(A, i, [](Index) { return true; }, out);
  return out;
}
}  // namespace detail

namespace detail {
/// Truncated SVD of the centered log in MPFR at the current precision.
Witness high_precision_witness(const Matrix<Rational>& A, Eigen::Index dk) {
  const Matrix<Interval> LCi = centered_log(A);
  const Matrix<Real> LC = LCi.unaryExpr([](const Interval& x) { return approx_midpoint_real(x); });
  const Eigen::JacobiSVD<Matrix<Real>> svd(LC, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Real root_dk = sqrt(Real(static_cast<long>(dk)));
  Witness w;
  w.bits = PrecisionScope::bits();
  const auto [Q, K] = balanced_factors(svd.matrixU(), svd.singularValues(), svd.matrixV(), dk, root_dk);
  w.Q_exact = Q.unaryExpr([](const Real& x) { return to_rational(x); });
  w.K_exact = K.unaryExpr([](const Real& x) { return to_rational(x); });
  w.Q = w.Q_exact.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
  w.K = w.K_exact.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
  return w;
}
}  // namespace detail

double certified_witness_error(const Matrix<Rational>& A, const Matrix<Rational>& Q, const Matrix<Rational>& K,
                                      unsigned bits) {
  if (Q.rows() != A.rows() || K.rows() != A.rows() || Q.cols() != K.cols() || Q.cols() < 1)
    throw input_error("witness: Q and K must both be " + std::to_string(A.rows()) + " x d_k");
  const PrecisionScope scope(std::max(bits, 64u));
  Matrix<Interval> S = multiply_transposed(from_rational<Interval>(Q), from_rational<Interval>(K));
  detail::scale_by_root_dk(S, Q.cols());
  return detail::softmax_distance(A, S);
}

void require_head_width(Eigen::Index dk, Eigen::Index n) {
  if (dk < 1 || dk > n)
    throw input_error("d_k = " + std::to_string(dk) + " is out of range: a head on n = " + std::to_string(n) +
                      " tokens has 1 <= d_k <= n");
}

ReachResult reach(const Matrix<Rational>& A, Eigen::Index dk, const ReachOptions& o) {
  using namespace detail;
  validate_target(A, "target");
  const Index n = A.rows();
  require_head_width(dk, n);
  require_precision_bits(o.bits);
  ReachResult res;
  res.n = n;
  res.dk = dk;
  const auto zeros = zero_entries(A);
  if (!zeros.empty()) {
    res.has_zero_entry = true;
    res.zeros.assign(zeros.begin(), zeros.begin() + std::min<std::size_t>(zeros.size(), 8));
    res.verdict = Verdict::unreachable;
    res.reason = "the target has a zero entry (" +
                 entry_text("A", static_cast<long>(zeros[0].first), static_cast<long>(zeros[0].second)) +
                 "); softmax of finite scores is positive everywhere";
  }
  const Matrix<Rational> replaced = zeros.empty() ? Matrix<Rational>() : zeros_replaced(A);
  const Matrix<Rational>& positive = zeros.empty() ? A : replaced;
  if (!res.has_zero_entry) {
    bool decided = false;
    if (n > o.quick_verdict_size && dk + 1 < n - 1 && !o.full_floor) {
      const std::vector<Index> lead = iota_indices(dk + 1);
      const BallMatrix rows = certified_centered_log_ball(positive.topRows(dk + 1));
      if (const auto r = certify_nonsingular_minor(rows, lead, lead)) {
        res.floor.lower = dk + 1;
        res.floor.lower_is_partial = true;
        res.floor.minor_rows = res.floor.minor_cols = lead;
        res.floor.minor_residual = *r;
        res.floor.upper = n - 1;
        res.floor.upper_reason = "C 1 = 0, so the floor is at most n - 1";
        decided = true;
      }
    }
    if (!decided) {
      floor_lower_bound(positive, certified_centered_log_ball(positive), o, res.floor);
      floor_upper_bound(positive, o, res.floor);
    }
    if (dk < res.floor.lower) {
      res.verdict = Verdict::unreachable;
      res.reason = "floor >= " + std::to_string(res.floor.lower) + " > d_k = " + std::to_string(dk) +
                   ": a " + std::to_string(res.floor.lower) + " x " + std::to_string(res.floor.lower) +
                   " minor of log(A) C is nonsingular, and every score matrix Q K^T has rank <= d_k";
    } else if (res.floor.upper <= dk) {
      res.verdict = Verdict::reachable;
      res.reason = "floor <= " + std::to_string(res.floor.upper) + " <= d_k = " + std::to_string(dk) + " (" +
                   res.floor.upper_reason + "): S = log A + c 1^T with c = -log(A) 1 / n has rank <= d_k";
    } else {
      res.verdict = Verdict::undecided;
      res.reason = std::to_string(res.floor.lower) + " <= floor <= " + std::to_string(res.floor.upper) +
                   " and d_k = " + std::to_string(dk) + " lies in between";
      res.hint = "raise the precision, bits (now " + std::to_string(res.floor.lower_bits) +
                 ") to settle whether these entries, exactly as written, are produced: more precision can prove a "
                 "larger nonsingular minor (floor_lower), while floor_upper drops only with exact structure of the "
                 "target (rational entries whose logs share a kernel). That settles exact producibility only; how close "
                 "a head of width " + std::to_string(dk) + " comes is the witness error, whatever the verdict";
    }
  }
  if (o.witness) {
    // The witness is numeric (double logs); only its error bound is certified.
    const Eigen::MatrixXd L = approx_centered_log(positive);
    if (o.bits > 53 && n <= o.high_precision_witness_size) {
      const PrecisionScope scope(o.bits);
      Witness w = high_precision_witness(positive, dk);
      w.error_bits = o.bits;
      w.max_abs_error = certified_witness_error(A, w.Q_exact, w.K_exact, w.error_bits);
      res.witness = std::move(w);
    } else {
      Witness w = truncated_witness(L, dk);
      w.max_abs_error = stated_witness_error(A, w.Q, w.K, o.bits, w.error_bits);
      res.witness = std::move(w);
    }
  }
  return res;
}

Eigen::MatrixXd approx_witness_pattern(const Witness& w) {
  Eigen::MatrixXd S = w.Q * w.K.transpose() / std::sqrt(static_cast<double>(w.Q.cols()));
  S = (S.colwise() - S.rowwise().maxCoeff()).array().exp().matrix();
  return (S.array().colwise() / S.rowwise().sum().array()).matrix();
}

Eigen::VectorXd approx_centered_log_spectrum(const Matrix<Rational>& A, Eigen::Index leading) {
  const Eigen::MatrixXd L = certified_centered_log_ball(A).mid;
  return A.rows() <= 1024 ? approx_rank(L).singular_values : approx_top_singular_values(L, leading).values;
}

}  // namespace attnrank
