// The L-BFGS search for a witness (attnrank/reach/detail/witness_search.hpp).
#include <attnrank/reach/detail/witness_search.hpp>

#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/detail/vector_exp.hpp>

#include <LBFGS.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace attnrank::detail {
namespace {

using Eigen::Index;

/// Thrown by the surrogate when the evaluation budget is spent or the monitor's
/// deadline has passed: ends the run.
struct BudgetSpent {};

/// Every improvement of the best max error over all of one search's runs, by
/// evaluation: whether the search was still improving when its budget ran out.
struct SearchTrace {
  long initial_budget = 0;
  double best = inf;
  std::vector<std::pair<long, double>> improvements;  // (evaluations done, new best)

  void record(long remaining_budget, double worst) {
    if (!(worst < best)) return;
    best = worst;
    improvements.emplace_back(initial_budget - remaining_budget, worst);
  }
  /// The best fell by more than 1% over the budget's last tenth.
  bool improving_at_end() const {
    const double cutoff = 0.9 * static_cast<double>(initial_budget);
    double before = inf;
    for (const auto& [at, value] : improvements)
      if (static_cast<double>(at) <= cutoff) before = value;
    return std::isfinite(before) && best < 0.99 * before;
  }
};

/// The surrogate as LBFGSpp calls it (see surrogate_value), keeping the point
/// with the smallest max |D| it has seen: the optimiser is not trusted to end there.
class Surrogate {
 public:
  Surrogate(const Eigen::MatrixXd& T, Index dk, const Eigen::MatrixXd* X, const Mask* mask, double tau, long& budget,
            SearchMonitor* monitor, SearchTrace& trace)
      : T_(T), X_(X), mask_(mask), dk_(dk), tau_(tau), budget_(budget), monitor_(monitor), trace_(trace) {}

  double operator()(const Eigen::VectorXd& x, Eigen::VectorXd& grad) {
    if (budget_-- <= 0) throw BudgetSpent{};
    double worst = inf;
    const double f = surrogate_value(T_, dk_, X_, tau_, x, grad, worst, mask_);
    if (std::isfinite(worst) && worst < best_error_) {
      best_error_ = worst;
      best_ = x;
    }
    trace_.record(budget_, worst);
    // After the point is kept: a deadline never loses the evaluation that met it.
    if (monitor_ && monitor_->evaluation(worst)) {
      budget_ = 0;
      throw BudgetSpent{};
    }
    return f;
  }

  double best_error() const { return best_error_; }
  const Eigen::VectorXd& best() const { return best_; }

 private:
  const Eigen::MatrixXd& T_;
  const Eigen::MatrixXd* X_;
  const Mask* mask_;
  Index dk_;
  double tau_;
  long& budget_;
  SearchMonitor* monitor_;
  SearchTrace& trace_;
  double best_error_ = inf;
  Eigen::VectorXd best_;
};

/// Runs L-BFGS from x: the squared error first, then four smooth maxima, each 8
/// times colder than the last (the temperature follows the max error). Returns
/// the point with the smallest max error seen (x if none better).
Eigen::VectorXd optimise(const Eigen::MatrixXd& T, Index dk, const Eigen::MatrixXd* X, const Mask* mask,
                         const Eigen::VectorXd& x, int max_iterations, long& budget, double& best_error,
                         SearchMonitor* monitor, SearchTrace& trace) {
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
    Surrogate f(T, dk, X, mask, tau, budget, monitor, trace);
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

}  // namespace

double surrogate_value(const Eigen::MatrixXd& T, Index dk, const Eigen::MatrixXd* X, double tau,
                       const Eigen::VectorXd& x, Eigen::VectorXd& grad, double& max_error, const Mask* mask) {
  const Index n = T.rows(), m = X ? X->cols() : n;
  const Eigen::Map<const Eigen::MatrixXd> first(x.data(), m, dk), second(x.data() + m * dk, m, dk);
  const Eigen::MatrixXd Q = X ? Eigen::MatrixXd(*X * first) : Eigen::MatrixXd(first);
  const Eigen::MatrixXd K = X ? Eigen::MatrixXd(*X * second) : Eigen::MatrixXd(second);
  const double r = std::sqrt(static_cast<double>(dk));
  Eigen::MatrixXd P = Q * K.transpose() / r;
  if (mask)  // masked scores are -inf: exp gives exactly 0 there, and the row maximum is over allowed keys
    for (Index j = 0; j < n; ++j)
      for (Index i = 0; i < n; ++i)
        if (!mask->allows(i, j)) P(i, j) = -inf;
  P = P.colwise() - P.rowwise().maxCoeff();
  detail::exp_in_place(P.data(), static_cast<std::size_t>(P.size()));  // SIMD; glibc's exp was a fifth of the search
  P.array().colwise() /= P.rowwise().sum().array();
  const Eigen::MatrixXd D = P - T;
  max_error = D.cwiseAbs().maxCoeff();
  Eigen::MatrixXd G;  // d f / d P
  double f;
  if (tau == 0) {
    f = D.squaredNorm();
    G = 2 * D;
  } else {
    const Eigen::ArrayXXd z = D.array().square() / tau;
    const double top = z.maxCoeff();
    const Eigen::ArrayXXd w = (z - top).exp();
    const double total = w.sum();
    f = tau * (top + std::log(total));
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
  const Eigen::MatrixXd dQ = dS * K, dK = dS.transpose() * Q;
  Eigen::Map<Eigen::MatrixXd>(grad.data(), m, dk) = X ? Eigen::MatrixXd(X->transpose() * dQ) : dQ;
  Eigen::Map<Eigen::MatrixXd>(grad.data() + m * dk, m, dk) = X ? Eigen::MatrixXd(X->transpose() * dK) : dK;
  return f;
}

long search_budget(const ApproxOptions& o, double evaluation_flops) {
  if (o.max_evaluations > 0) return o.max_evaluations;
  constexpr double most = 20000;
  double least = static_cast<double>(o.min_evaluations);
  if (o.min_evaluation_flops > 0) least = std::min(least, o.min_evaluation_flops / evaluation_flops);
  least = std::clamp(least, 0.0, most);
  return static_cast<long>(std::clamp(o.search_flops / evaluation_flops, least, most));
}

Eigen::VectorXd search_witness(const Eigen::MatrixXd& T, Index dk, const Eigen::MatrixXd* X,
                               const std::vector<Eigen::VectorXd>& given, const ApproxOptions& o, const Mask* mask) {
  const double n = static_cast<double>(T.rows()), m = X ? static_cast<double>(X->cols()) : 0.0;
  // An evaluation costs about 6 n^2 d_k flops (and 8 n d_model d_k with X).
  const double flops = 6.0 * n * n * double(dk) + 8.0 * n * m * double(dk);
  long budget = search_budget(o, flops);
  if (budget < o.skip_below) return {};
  std::vector<Eigen::VectorXd> starts = given;
  if (!starts.empty()) {
    std::mt19937_64 rng(o.seed);
    std::normal_distribution<double> gauss(0.0, 1.0);
    const Eigen::VectorXd x0 = starts.front();  // a copy: starts grows below
    const double spread = x0.size() ? std::max(x0.norm() / std::sqrt(static_cast<double>(x0.size())), 0.1) : 0.1;
    for (int r = 0; r < o.restarts; ++r) {
      Eigen::VectorXd x = r % 2 == 0 ? x0 : Eigen::VectorXd(Eigen::VectorXd::Zero(x0.size()));
      const double size = r % 2 == 0 ? 0.5 * spread : spread;
      for (Index t = 0; t < x.size(); ++t) x(t) += size * gauss(rng);
      starts.push_back(std::move(x));
    }
  }
  Eigen::VectorXd best_x;
  double best_error = inf;
  SearchTrace trace;
  trace.initial_budget = budget;
  for (const Eigen::VectorXd& x : starts) {
    if (budget <= 0 || (o.monitor && o.monitor->past_deadline())) break;
    if (!x.allFinite()) continue;
    double run_error = inf;
    Eigen::VectorXd y = optimise(T, dk, X, mask, x, o.max_iterations, budget, run_error, o.monitor, trace);
    if (y.allFinite() && run_error < best_error) {
      best_error = run_error;
      best_x = std::move(y);
    }
  }
  // Spent on its budget (not stopped by the clock) while still improving, and the
  // full search's budget is larger here (not the same cap of evaluations): more
  // work would likely lower the bound, and the report may say so.
  if (o.monitor && budget <= 0 && !o.monitor->deadline_reached() && trace.improving_at_end()) {
    ApproxOptions full = o;
    full.search_flops = ApproxOptions{}.search_flops;
    if (search_budget(full, flops) > trace.initial_budget) o.monitor->budget_spent_improving();
  }
  return best_x;
}

}  // namespace attnrank::detail
