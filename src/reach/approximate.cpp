// The approximate question of attnrank/reach/approximate.hpp: certified bounds
// error_lower <= E*(A, d_k) <= error_upper.
#include <attnrank/reach/approximate.hpp>

#include <attnrank/linalg/detail/balanced_factors.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/target.hpp>

#include <LBFGS.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <utility>

namespace attnrank {
namespace {

using Eigen::Index;
constexpr double inf = std::numeric_limits<double>::infinity();

/// Â rounded down entry by entry (0 <= below <= Â): the entry rounded down
/// over the row sum rounded up, in MPFR. Every use below only needs a lower
/// bound of Â: it decides which entries exceed eps and bounds eps / Â from above.
Eigen::MatrixXd normalized_below(const Matrix<Rational>& A) {
  Eigen::MatrixXd below(A.rows(), A.cols());
  mpfr_t a, sum;
  mpfr_inits2(64, a, sum, static_cast<mpfr_ptr>(nullptr));
  for (Index i = 0; i < A.rows(); ++i) {
    Rational s = 0;
    for (Index j = 0; j < A.cols(); ++j) s += A(i, j);
    mpfr_set_q(sum, s.backend().data(), MPFR_RNDU);
    for (Index j = 0; j < A.cols(); ++j) {
      mpfr_set_q(a, A(i, j).backend().data(), MPFR_RNDD);
      mpfr_div(a, a, sum, MPFR_RNDD);
      below(i, j) = mpfr_get_d(a, MPFR_RNDD);
    }
  }
  mpfr_clears(a, sum, static_cast<mpfr_ptr>(nullptr));
  return below;
}

/// The smooth surrogate the optimiser minimises over x = [vec Q; vec K]:
/// with D = softmax(Q K^T / sqrt(d_k)) - T, either sum D^2 (tau = 0) or
/// tau log sum exp(D^2 / tau), a smooth maximum of the squared errors. It keeps
/// the point with the smallest max |D| it has seen (the optimiser is not trusted
/// to end there).
/// Thrown by the surrogate when the evaluation budget is spent: ends the run.
struct BudgetSpent {};

class Surrogate {
 public:
  Surrogate(const Eigen::MatrixXd& T, Index dk, double tau, long& budget)
      : T_(T), n_(T.rows()), dk_(dk), tau_(tau), budget_(budget) {}

  double operator()(const Eigen::VectorXd& x, Eigen::VectorXd& grad) {
    if (budget_-- <= 0) throw BudgetSpent{};
    const Eigen::Map<const Eigen::MatrixXd> Q(x.data(), n_, dk_), K(x.data() + n_ * dk_, n_, dk_);
    const double r = std::sqrt(static_cast<double>(dk_));
    Eigen::MatrixXd P = Q * K.transpose() / r;
    P = (P.colwise() - P.rowwise().maxCoeff()).array().exp().matrix();
    P.array().colwise() /= P.rowwise().sum().array();
    const Eigen::MatrixXd D = P - T_;
    const double worst = D.cwiseAbs().maxCoeff();
    if (std::isfinite(worst) && worst < best_error_) {
      best_error_ = worst;
      best_ = x;
    }
    Eigen::MatrixXd G;  // d f / d P
    double f;
    if (tau_ == 0) {
      f = D.squaredNorm();
      G = 2 * D;
    } else {
      const Eigen::ArrayXXd z = D.array().square() / tau_;
      const double top = z.maxCoeff();
      const Eigen::ArrayXXd w = (z - top).exp();
      const double total = w.sum();
      f = tau_ * (top + std::log(total));
      G = (2 * D.array() * w / total).matrix();
    }
    // Softmax rows: d f / d S_ij = P_ij (G_ij - sum_k G_ik P_ik).
    const Eigen::VectorXd inner = (G.array() * P.array()).rowwise().sum();
    const Eigen::MatrixXd dS = (P.array() * (G.colwise() - inner).array()).matrix() / r;
    grad.resize(x.size());
    if (!std::isfinite(f) || !dS.allFinite()) {  // a trial step overflowed: report it as uphill, not NaN
      grad.setZero();
      return inf;
    }
    Eigen::Map<Eigen::MatrixXd>(grad.data(), n_, dk_) = dS * K;
    Eigen::Map<Eigen::MatrixXd>(grad.data() + n_ * dk_, n_, dk_) = dS.transpose() * Q;
    return f;
  }

  double best_error() const { return best_error_; }
  const Eigen::VectorXd& best() const { return best_; }

 private:
  const Eigen::MatrixXd& T_;
  Index n_, dk_;
  double tau_;
  long& budget_;
  double best_error_ = inf;
  Eigen::VectorXd best_;
};

/// Runs L-BFGS from x: the squared error first, then four smooth maxima, each 8
/// times colder than the last (the temperature follows the max error). Returns
/// the point with the smallest max error seen (x if none better).
Eigen::VectorXd optimise(const Eigen::MatrixXd& T, Index dk, Eigen::VectorXd x, int max_iterations, long& budget,
                         double& best_error) {
  LBFGSpp::LBFGSParam<double> param;
  param.max_iterations = max_iterations;
  param.epsilon = 1e-12;
  param.epsilon_rel = 1e-12;
  param.past = 5;
  param.delta = 1e-12;
  // Strong Wolfe line searches keep every curvature pair positive (Armijo alone,
  // LBFGSpp's default, lets a bad pair turn the direction uphill).
  param.linesearch = LBFGSpp::LBFGS_LINESEARCH_BACKTRACKING_STRONG_WOLFE;
  param.max_linesearch = 40;
  Eigen::VectorXd best = x;
  best_error = inf;
  double scale = 0;  // the current max error, which sets the smooth maximum's temperature
  for (int stage = 0; stage < 5; ++stage) {
    const double tau = stage == 0 ? 0.0 : scale * scale / std::pow(8.0, stage);
    if (stage > 0 && !(tau > 0)) break;
    if (budget <= 0) break;
    Surrogate f(T, dk, tau, budget);
    LBFGSpp::LBFGSSolver<double, LBFGSpp::LineSearchNocedalWright> solver(param);
    // A line search that cannot progress throws; the run then starts afresh
    // (memory cleared) from the best point, while that still helps.
    double before = inf;
    for (int attempt = 0; attempt < 4 && (attempt == 0 || f.best_error() < before); ++attempt) {
      before = f.best_error();
      Eigen::VectorXd y = attempt == 0 ? best : f.best();
      double fx;
      try {
        solver.minimize(f, y, fx);
        break;
      } catch (const BudgetSpent&) {
        break;  // the budget ends the run; the best point seen stays
      } catch (const std::exception&) {
      }
    }
    if (f.best_error() < best_error) {
      best_error = f.best_error();
      best = f.best();
    }
    scale = best_error;
  }
  return best;
}

Eigen::VectorXd pack(const Witness& w) {
  Eigen::VectorXd x(w.Q.size() + w.K.size());
  Eigen::Map<Eigen::MatrixXd>(x.data(), w.Q.rows(), w.Q.cols()) = w.Q;
  Eigen::Map<Eigen::MatrixXd>(x.data() + w.Q.size(), w.K.rows(), w.K.cols()) = w.K;
  return x;
}

Witness unpack(const Eigen::VectorXd& x, Index n, Index dk) {
  Witness w;
  w.Q = Eigen::Map<const Eigen::MatrixXd>(x.data(), n, dk);
  w.K = Eigen::Map<const Eigen::MatrixXd>(x.data() + n * dk, n, dk);
  return w;
}

/// Certified singular values of log(Â)_RJ C_J, computed once per R x J.
class SigmaCache {
 public:
  /// A: the target (unnormalised is fine: the centering removes row scaling).
  /// The logs are enclosed once; each R x J slices and centers them.
  SigmaCache(const Matrix<Rational>& A, Index values)
      : log_(certified_log_bounds(detail::zeros_replaced(A))), values_(values) {}

  /// A certified lower bound on sigma_(index)(log(Â)_RJ C_J), 1-based; 0 when
  /// the submatrix has fewer singular values than that.
  double lower(const std::vector<Index>& rows, const std::vector<Index>& cols, Index index) {
    const Index p = std::min<Index>(static_cast<Index>(rows.size()), static_cast<Index>(cols.size()));
    if (index > p || cols.size() < 2) return 0;
    auto key = std::make_pair(rows, cols);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      const BoundsMatrix sub{log_.lo(rows, cols), log_.hi(rows, cols)};
      const BallMatrix LC = certified_row_centered(sub);
      SvdOptions lower_only;
      lower_only.upper_bounds = false;
      it = cache_.emplace(std::move(key), certified_singular_values(LC, std::min(values_, p), lower_only)).first;
    }
    const auto& v = it->second.values;
    return index <= static_cast<Index>(v.size()) ? v[static_cast<std::size_t>(index - 1)].lower : 0;
  }

 private:
  BoundsMatrix log_;  ///< log A entrywise (zeros replaced: those entries are never in R x J)
  Index values_;
  std::map<std::pair<std::vector<Index>, std::vector<Index>>, CertifiedSingularValues> cache_;
};

detail::ImpossibilityCheck check_impossible(const Eigen::MatrixXd& normalized, Index dk, double eps, SigmaCache& sigma,
                                            double theta = 1) {
  detail::ImpossibilityCheck c;
  std::vector<Index> rows, cols;
  detail::rows_and_columns_above(normalized, theta * eps, rows, cols);
  c.rows = static_cast<Index>(rows.size());
  c.cols = static_cast<Index>(cols.size());
  if (c.rows == 0 || c.cols < 2) return c;
  c.sigma_lower = sigma.lower(rows, cols, dk + 1);
  if (!(c.sigma_lower > 0)) return c;
  c.eta_norm = detail::eta_norm_upper(normalized, rows, cols, eps);
  c.impossible = c.eta_norm < c.sigma_lower;
  return c;
}

/// Bisection for the largest impossible eps in [lo, hi): each accepted step is
/// its own proof, so the answer is sound even where the check is not monotone
/// in eps (R x J changes as eps passes entries of Â).
void bisect(const Eigen::MatrixXd& normalized, Index dk, double lo, double hi, int steps, SigmaCache& sigma,
            detail::ImpossibilityCheck& proof, double& best, double theta = 1) {
  for (int s = 0; s < steps && lo < hi; ++s) {
    const double mid = 0.5 * (lo + hi);
    const detail::ImpossibilityCheck c = check_impossible(normalized, dk, mid, sigma, theta);
    if (c.impossible) {
      lo = mid;
      if (mid > best) {
        best = mid;
        proof = c;
      }
    } else {
      hi = mid;
    }
  }
}

/// error_lower: first below min Â, where R x J is every entry and one certified
/// SVD serves every step; then, when even that is impossible, above it, where
/// each step may choose a new R x J (and pay a new certified SVD).
void lower_bound(const Eigen::MatrixXd& normalized, Index dk, double hi, int steps, int steps_above,
                 SigmaCache& sigma, ApproxBounds& out) {
  if (!(hi > 0)) return;
  double best = 0;
  detail::ImpossibilityCheck proof;
  const double smallest = normalized.minCoeff();  // a lower bound of min Â
  const double full_top = std::min(hi, smallest);
  if (full_top > 0) {
    const double edge = std::nextafter(full_top, 0.0);
    const detail::ImpossibilityCheck c = check_impossible(normalized, dk, edge, sigma);
    if (c.impossible) {
      best = edge;
      proof = c;
    } else {
      bisect(normalized, dk, 0, edge, steps, sigma, proof, best);
    }
  }
  // Above min Â: R x J drops the entries <= theta eps; theta = 2 keeps every
  // eta_ij <= log 2, which often proves more than dropping only those <= eps.
  if (full_top < hi)
    for (const double theta : {1.0, 2.0}) bisect(normalized, dk, full_top, hi, steps_above, sigma, proof, best, theta);
  out.error_lower = best;
  out.lower_rows = proof.rows;
  out.lower_cols = proof.cols;
  out.sigma_lower = proof.sigma_lower;
}

void validate(const Matrix<Rational>& A, Index dk) {
  validate_target(A, "target");
  if (dk < 1 || dk > A.rows())
    throw input_error("d_k = " + std::to_string(dk) + " is out of range: a head on n = " + std::to_string(A.rows()) +
                      " tokens has 1 <= d_k <= n");
}

ApproxBounds bounds_with(const Matrix<Rational>& A, const Eigen::MatrixXd& normalized, Index dk,
                         const ApproxOptions& o, SigmaCache& sigma) {
  const Index n = A.rows();
  ApproxBounds out;
  out.n = n;
  out.dk = dk;
  const unsigned bits = std::max(o.bits, 64u);
  // The start: the log-domain optimum, certified as it is.
  Witness start = detail::truncated_witness(approx_centered_log(detail::zeros_replaced(A)), dk);
  start.error_bits = bits;
  start.max_abs_error = certified_witness_error(A, start.Q, start.K, bits);
  out.start_error = start.max_abs_error;
  out.witness = start;
  const Eigen::MatrixXd T = approx_normalized_target(A);
  // The budget: evaluations cost about 6 n^2 d_k flops; by default about 2.5e10
  // flops in all (a few seconds), at most 20000 evaluations. Runs go in order
  // while some is left.
  long budget = o.max_evaluations > 0 ? o.max_evaluations
                                      : static_cast<long>(std::clamp(2.5e10 / (6.0 * double(n) * double(n) * double(dk)),
                                                                     50.0, 20000.0));
  // Starts: the log-domain optimum, and the same for the target with its entries
  // floored at 0.01 / n and 0.1 / n. Tiny entries dominate log A (a weight of 1e-9
  // is a score 20 below its row), while the max error cares little about them, so
  // the floored starts are often far better for saturated patterns.
  std::vector<Eigen::VectorXd> starts{pack(start)};
  for (const double floor : {0.01, 0.1}) {
    const Eigen::MatrixXd floored = T.cwiseMax(floor / static_cast<double>(n));
    const Eigen::MatrixXd L = floored.array().log().matrix();
    const Eigen::MatrixXd LC = L.colwise() - L.rowwise().mean();
    if (LC.allFinite()) starts.push_back(pack(detail::truncated_witness(LC, dk)));
  }
  // Then seeded random restarts.
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> gauss(0.0, 1.0);
  const Eigen::VectorXd x0 = starts.front();  // a copy: starts grows below
  const double spread = x0.size() ? std::max(x0.norm() / std::sqrt(static_cast<double>(x0.size())), 0.1) : 0.1;
  // Even restarts perturb the first start; odd ones are fresh random points of
  // its scale (another basin altogether).
  for (int r = 0; r < o.restarts; ++r) {
    Eigen::VectorXd x = r % 2 == 0 ? x0 : Eigen::VectorXd(Eigen::VectorXd::Zero(x0.size()));
    const double size = r % 2 == 0 ? 0.5 * spread : spread;
    for (Index t = 0; t < x.size(); ++t) x(t) += size * gauss(rng);
    starts.push_back(std::move(x));
  }
  // Runs are compared by their double max error; only the best is certified
  // (certification costs an MPFI softmax: more than a run at large n).
  Eigen::VectorXd best_x;
  double best_double = inf;
  for (const Eigen::VectorXd& x : starts) {
    if (budget <= 0) break;
    if (!x.allFinite()) continue;
    double run_error = inf;
    Eigen::VectorXd y = optimise(T, dk, x, o.max_iterations, budget, run_error);
    if (y.allFinite() && run_error < best_double) {
      best_double = run_error;
      best_x = std::move(y);
    }
  }
  if (best_x.size()) {
    Witness w = unpack(best_x, n, dk);
    w.error_bits = bits;
    w.max_abs_error = certified_witness_error(A, w.Q, w.K, bits);
    if (w.max_abs_error < out.witness.max_abs_error) out.witness = std::move(w);
  }
  out.error_upper = out.witness.max_abs_error;
  lower_bound(normalized, dk, std::min(out.error_upper, 1.0), o.bisection_steps, o.bisection_steps_above, sigma, out);
  if (out.error_lower > 0)
    out.lower_reason = "sigma_" + std::to_string(dk + 1) + " of the centered log on " + std::to_string(out.lower_rows) +
                       " x " + std::to_string(out.lower_cols) + " entries is certified >= " +
                       format_lower_bound(out.sigma_lower, 3) + ", above every error matrix a head within " +
                       format_lower_bound(out.error_lower, 3) + " could leave";
  else
    out.lower_reason = "no error is excluded: the certified singular value sigma_" + std::to_string(dk + 1) +
                       " is not above the bound for any eps tried";
  return out;
}

}  // namespace

namespace detail {

double eta_norm_upper(const Eigen::MatrixXd& below, const std::vector<Index>& rows, const std::vector<Index>& cols,
                      double eps) {
  BoundsMatrix eta;
  const Index r = static_cast<Index>(rows.size()), c = static_cast<Index>(cols.size());
  eta.hi.resize(r, c);
  eta.lo = Eigen::MatrixXd::Zero(r, c);
  // x = eps / a rounded up (a is already a lower bound of Â). For x <= 1/16,
  // -log(1 - x) = sum_k x^k / k <= sum_(k<=12) x^k / k + x^13 / (13 (1 - x)),
  // every term positive and rounded up (Horner), so the sum is an upper bound
  // within a few ulps; larger x (rare: entries within 16 eps) go to MPFR's log1p
  // rounded down, negated, outside the upward-rounding scope.
  std::vector<std::pair<Index, Index>> large;
  {
    UpwardRounding up;
    double inverse[14];
    for (int k = 1; k <= 13; ++k) {
      inverse[k] = 1.0 / k;  // >= 1 / k
      detail::rounding_barrier(inverse[k]);
    }
    for (Index i = 0; i < r; ++i)
      for (Index j = 0; j < c; ++j) {
        const double a = below(rows[static_cast<std::size_t>(i)], cols[static_cast<std::size_t>(j)]);
        double x = eps / a;
        detail::rounding_barrier(x);
        if (!(a > 0) || !(x < 1)) return inf;
        if (x <= 0.0625) {
          double one_minus = x - 1.0;  // >= x - 1, so -one_minus <= 1 - x
          detail::rounding_barrier(one_minus);
          double x13 = x * x;
          x13 = x13 * x13;                 // x^4
          x13 = x13 * x13 * x13 * x;       // x^13
          double sum = inverse[13] * x13 / -one_minus;  // the tail, >= x^13 / (13 (1 - x))
          double horner = inverse[12];
          for (int k = 11; k >= 1; --k) horner = inverse[k] + x * horner;
          sum += x * horner;
          detail::rounding_barrier(sum);
          eta.hi(i, j) = sum;
        } else {
          eta.hi(i, j) = x;  // replaced below
          large.emplace_back(i, j);
        }
      }
  }
  if (!large.empty()) {
    mpfr_t t;
    mpfr_init2(t, 53);
    for (const auto& [i, j] : large) {
      mpfr_set_d(t, -eta.hi(i, j), MPFR_RNDN);  // exact
      mpfr_log1p(t, t, MPFR_RNDD);              // <= log(1 - x)
      mpfr_neg(t, t, MPFR_RNDN);                // >= -log(1 - x), exact
      eta.hi(i, j) = mpfr_get_d(t, MPFR_RNDU);
    }
    mpfr_clear(t);
  }
  return norm2_upper(eta);
}

void rows_and_columns_above(const Eigen::MatrixXd& below, double eps, std::vector<Index>& rows,
                            std::vector<Index>& cols) {
  const Index n = below.rows(), m = below.cols();
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> bad(n, m);
  Eigen::VectorXi row_bad = Eigen::VectorXi::Zero(n), col_bad = Eigen::VectorXi::Zero(m);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < m; ++j) {
      bad(i, j) = !(below(i, j) > eps);  // kept entries have Â >= below > eps
      row_bad(i) += bad(i, j);
      col_bad(j) += bad(i, j);
    }
  std::vector<bool> row_in(static_cast<std::size_t>(n), true), col_in(static_cast<std::size_t>(m), true);
  while (true) {
    Index best_row = -1, best_col = -1;
    for (Index i = 0; i < n; ++i)
      if (row_in[static_cast<std::size_t>(i)] && (best_row < 0 || row_bad(i) > row_bad(best_row))) best_row = i;
    for (Index j = 0; j < m; ++j)
      if (col_in[static_cast<std::size_t>(j)] && (best_col < 0 || col_bad(j) > col_bad(best_col))) best_col = j;
    const int r = best_row < 0 ? 0 : row_bad(best_row), c = best_col < 0 ? 0 : col_bad(best_col);
    if (r == 0 && c == 0) break;
    if (c >= r) {  // drop the column: it removes at least as many bad entries
      col_in[static_cast<std::size_t>(best_col)] = false;
      for (Index i = 0; i < n; ++i)
        if (row_in[static_cast<std::size_t>(i)] && bad(i, best_col)) --row_bad(i);
      col_bad(best_col) = 0;
    } else {
      row_in[static_cast<std::size_t>(best_row)] = false;
      for (Index j = 0; j < m; ++j)
        if (col_in[static_cast<std::size_t>(j)] && bad(best_row, j)) --col_bad(j);
      row_bad(best_row) = 0;
    }
  }
  rows.clear();
  cols.clear();
  for (Index i = 0; i < n; ++i)
    if (row_in[static_cast<std::size_t>(i)]) rows.push_back(i);
  for (Index j = 0; j < m; ++j)
    if (col_in[static_cast<std::size_t>(j)]) cols.push_back(j);
}

}  // namespace detail

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Index dk, const ApproxOptions& o) {
  validate(A, dk);
  const Eigen::MatrixXd normalized = normalized_below(A);
  SigmaCache sigma(A, dk + 1);
  return bounds_with(A, normalized, dk, o, sigma);
}

EpsilonVerdict epsilon_verdict(const ApproxBounds& b, double epsilon) {
  if (b.error_upper <= epsilon) return EpsilonVerdict::within;
  if (b.error_lower > epsilon) return EpsilonVerdict::not_within;
  return EpsilonVerdict::undecided;
}

const char* to_string(EpsilonVerdict v) {
  switch (v) {
    case EpsilonVerdict::within: return "within";
    case EpsilonVerdict::not_within: return "not_within";
    case EpsilonVerdict::undecided: return "undecided";
  }
  return "undecided";
}

WidthResult approx_width(const Matrix<Rational>& A, double epsilon, Index max_dk, const ApproxOptions& o) {
  validate(A, 1);
  if (!(epsilon >= 0 && epsilon <= 1))
    throw input_error("epsilon = " + std::to_string(epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
  const Index n = A.rows();
  if (max_dk == 0) max_dk = n;
  if (max_dk < 1 || max_dk > n)
    throw input_error("max d_k = " + std::to_string(max_dk) + " is out of range: 1 <= max d_k <= n = " + std::to_string(n));
  const Eigen::MatrixXd normalized = normalized_below(A);
  SigmaCache sigma(A, max_dk + 1);  // one certified SVD serves every d_k on the same R x J
  WidthResult out;
  out.epsilon = epsilon;
  out.max_dk = max_dk;
  // Once a width is certified within epsilon, every larger one is too (below):
  // those widths carry its upper bound and compute only their lower bounds,
  // which share the certified SVD, instead of optimising a witness each.
  double carried_upper = inf;
  bool within = false;
  for (Index dk = 1; dk <= max_dk; ++dk) {
    if (within) {
      ApproxBounds b;
      lower_bound(normalized, dk, std::min(carried_upper, 1.0), o.bisection_steps, o.bisection_steps_above, sigma, b);
      out.profile.push_back({dk, b.error_lower, carried_upper});
      continue;
    }
    const ApproxBounds b = bounds_with(A, normalized, dk, o, sigma);
    out.profile.push_back({dk, b.error_lower, b.error_upper});
    carried_upper = std::min(carried_upper, b.error_upper);
    within = carried_upper <= epsilon;
  }
  // E* is non-increasing in d_k (a head of width d is one of width d + 1 with a
  // zero column, rescaled), so each bound carries over: lower bounds from the
  // right, upper bounds from the left.
  for (std::size_t i = out.profile.size(); i-- > 1;)
    out.profile[i - 1].error_lower = std::max(out.profile[i - 1].error_lower, out.profile[i].error_lower);
  for (std::size_t i = 1; i < out.profile.size(); ++i)
    out.profile[i].error_upper = std::min(out.profile[i].error_upper, out.profile[i - 1].error_upper);
  out.width_lower = max_dk + 1;
  for (const WidthProfileEntry& e : out.profile)
    if (!(e.error_lower > epsilon)) {
      out.width_lower = e.dk;
      break;
    }
  for (const WidthProfileEntry& e : out.profile)
    if (e.error_upper <= epsilon) {
      out.width_upper = e.dk;
      break;
    }
  return out;
}

}  // namespace attnrank
