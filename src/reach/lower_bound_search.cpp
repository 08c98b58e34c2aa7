// The search behind error_lower: reach/detail/lower_bound_search.hpp states what
// it proves and how the widths share it; docs/math.md section 9 has the proof.
#include <attnrank/reach/detail/lower_bound_search.hpp>

#include <attnrank/numbers/certified_log.hpp>
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/reach/free.hpp>
#include <attnrank/reach/target.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

namespace attnrank::detail {
namespace {

using Eigen::Index;

BoundsMatrix log_bounds_of(const Matrix<Rational>& A) {
  return zero_entries(A).empty() ? certified_log_bounds(A) : certified_log_bounds(zeros_replaced(A));
}

/// R x J at one eps, shared by every width tried there; ||eta|| on it, once.
struct Point {
  double eps = 0;
  std::vector<Index> rows, cols;
  bool eta_known = false;
  double eta = inf;
};

/// The check for one width at a point (Point::eta computed on first need).
ImpossibilityCheck verdict(LowerBoundCache& cache, Point& p, Index width) {
  ImpossibilityCheck c;
  if (p.rows.empty() || p.cols.size() < 2) return c;
  const CertifiedSingularValues* s = cache.values(p.rows, p.cols, width + 1);
  if (!s || width + 1 > static_cast<Index>(s->values.size())) return c;
  c.sigma_lower = s->values[static_cast<std::size_t>(width)].lower;
  if (!(c.sigma_lower > 0)) return c;
  if (!p.eta_known) {
    p.eta = cache.eta_norm(p.rows, p.cols, p.eps);
    p.eta_known = true;
  }
  c.eta_norm = p.eta;
  c.impossible = c.eta_norm < c.sigma_lower;
  if (c.impossible) {
    c.rows = p.rows;
    c.cols = p.cols;
  }
  return c;
}

/// Whether refine_rectangle takes R x J: three sweeps of an SVD per line within
/// local_refinement_flops.
bool refinable(const std::vector<Index>& rows, const std::vector<Index>& cols) {
  const double r = static_cast<double>(rows.size()), c = static_cast<double>(cols.size());
  return 3 * (r + c) * 4 * r * c * std::min(r, c) <= local_refinement_flops;
}

/// The least power of 2 strictly above x > 0.
double power_of_two_above(double x) {
  int exponent = 0;
  std::frexp(x, &exponent);
  return std::ldexp(1.0, exponent);
}

/// A width in a bisection, with the steps it has left there.
struct Member {
  LowerSearch* search;
  int budget;
};

/// Bisection for the largest impossible eps in [lo, hi), for every member at
/// once: one point splits the group into those proven there (who go up) and the
/// rest (who go down). A member is tried only below its ceiling.
void bisect(std::vector<Member> group, double lo, double hi, double theta, bool geometric, LowerBoundCache& cache) {
  std::erase_if(group, [&](const Member& m) { return m.budget <= 0 || !(m.search->ceiling > lo); });
  if (group.empty() || !(lo < hi)) return;
  const double mid = geometric && lo > 0 ? std::sqrt(lo * hi) : 0.5 * (lo + hi);
  if (!(mid > lo && mid < hi)) return;
  std::vector<Member> up, down;
  Point p;
  p.eps = mid;
  bool placed = false;
  for (Member m : group) {
    if (!(mid < m.search->ceiling)) {
      down.push_back(m);
      continue;
    }
    if (!placed) {
      cache.rows_and_columns(theta * mid, p.rows, p.cols);
      placed = true;
    }
    ImpossibilityCheck c = verdict(cache, p, m.search->width);
    --m.budget;
    if (c.impossible) {
      if (mid > m.search->best) {
        m.search->best = mid;
        m.search->proof = std::move(c);
      }
      up.push_back(m);
    } else {
      down.push_back(m);
    }
  }
  bisect(std::move(up), mid, hi, theta, geometric, cache);
  bisect(std::move(down), lo, mid, theta, geometric, cache);
}

}  // namespace

double approx_ratio(const LowerBoundCache& cache, const std::vector<Index>& rows, const std::vector<Index>& cols,
                    Index width, double eps) {
  const auto r = static_cast<Index>(rows.size()), c = static_cast<Index>(cols.size());
  if (r < width + 1 || c < width + 2) return 0;
  Eigen::MatrixXd L(r, c), eta(r, c);
  for (Index j = 0; j < c; ++j)
    for (Index i = 0; i < r; ++i) {
      const Index a = rows[static_cast<std::size_t>(i)], b = cols[static_cast<std::size_t>(j)];
      L(i, j) = 0.5 * (cache.log().lo(a, b) + cache.log().hi(a, b));
      eta(i, j) = -std::log1p(-eps / cache.below()(a, b));
    }
  L = L.colwise() - L.rowwise().mean();
  const Eigen::VectorXd sigma = Eigen::BDCSVD<Eigen::MatrixXd>(L).singularValues();
  const double norm = std::min(eta.norm(), std::sqrt(eta.colwise().sum().maxCoeff() * eta.rowwise().sum().maxCoeff()));
  return norm > 0 && std::isfinite(norm) ? sigma(width) / norm : 0;
}

bool refine_rectangle(const LowerBoundCache& cache, std::vector<Index>& rows, std::vector<Index>& cols, Index width,
                      double eps) {
  if (!refinable(rows, cols)) return false;
  double current = approx_ratio(cache, rows, cols, width, eps);
  if (!(current > 0)) return false;
  for (int sweep = 0; sweep < 3 && current <= 1; ++sweep) {
    bool improved = false;
    for (std::vector<Index>* lines : {&rows, &cols})
      for (std::size_t k = 0; k < lines->size() && current <= 1;) {
        std::vector<Index> fewer = *lines;
        fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(k));
        const double v = lines == &rows ? approx_ratio(cache, fewer, cols, width, eps)
                                        : approx_ratio(cache, rows, fewer, width, eps);
        if (v > current) {
          current = v;
          *lines = std::move(fewer);
          improved = true;
        } else {
          ++k;
        }
      }
    if (!improved) break;
  }
  return current > 1;
}

namespace {

/// The largest target (entries) whose refinement also starts from the greedy's R x J.
constexpr std::size_t max_greedy_refinement_entries = 512 * 512;

/// R x J less its entries at or below t: the greedy's own rule
/// (rows_and_columns_above) on the small rectangle, its indices mapped back.
void drop_entries_at_most(const Eigen::MatrixXd& below, double t, std::vector<Index>& rows, std::vector<Index>& cols) {
  if (rows.empty() || cols.empty()) return;
  std::vector<Index> kept_rows, kept_cols;
  rows_and_columns_above(entry_order(below(rows, cols)), t, kept_rows, kept_cols);
  for (Index& i : kept_rows) i = rows[static_cast<std::size_t>(i)];
  for (Index& j : kept_cols) j = cols[static_cast<std::size_t>(j)];
  rows = std::move(kept_rows);
  cols = std::move(kept_cols);
}

/// From each width's best proof, a few more geometric steps up to 8 times its eps
/// (within the ceiling), each point tried by prove_lower_bound_at (the greedy's
/// rectangles only on targets up to 512 x 512: each costs a pass over the target).
void refine_search(LowerSearch& s, int steps, LowerBoundCache& cache) {
  // The top is a power of 2 (as the bisection's): the points tried do not move
  // with the last digits of the witness's error.
  const bool greedy = cache.all_rows().size() * cache.all_cols().size() <= max_greedy_refinement_entries;
  double lo = s.best, hi = std::min(power_of_two_above(s.ceiling), refinement_reach * s.best);
  for (int step = 0; step < steps && lo > 0 && lo < hi; ++step) {
    const double mid = std::sqrt(lo * hi);
    if (!(mid > lo && mid < hi)) break;
    if (!(mid < s.ceiling)) {  // no eps at or above a certified error can be proven
      hi = mid;
      continue;
    }
    if (prove_lower_bound_at(s, mid, cache, greedy)) lo = mid;
    else hi = mid;
  }
}

}  // namespace

bool prove_lower_bound_at(LowerSearch& s, double eps, LowerBoundCache& cache, bool greedy) {
  if (!(eps > 0 && eps < s.ceiling)) return false;
  ImpossibilityCheck check;
  const auto try_rectangle = [&](std::vector<Index> rows, std::vector<Index> cols) {
    Point p;
    p.eps = eps;
    p.rows = std::move(rows);
    p.cols = std::move(cols);
    if (!refinable(p.rows, p.cols)) return false;  // what refine_rectangle would skip: the drops cost |R| |J| a line
    drop_entries_at_most(cache.below(), eps, p.rows, p.cols);
    if (refine_rectangle(cache, p.rows, p.cols, s.width, eps)) check = verdict(cache, p, s.width);
    return check.impossible;
  };
  bool proven = try_rectangle(s.proof.rows, s.proof.cols);
  for (const double theta : {1.0, 2.0, 4.0, 8.0}) {
    if (proven || !greedy) break;
    std::vector<Index> rows, cols;
    cache.rows_and_columns(theta * eps, rows, cols);
    proven = try_rectangle(std::move(rows), std::move(cols));
  }
  if (!proven) return false;
  if (eps > s.best) {
    s.best = eps;
    s.proof = std::move(check);
  }
  return true;
}

LowerBoundCache::LowerBoundCache(BoundsMatrix logs, const Eigen::MatrixXd& below, Index values)
    : log_(std::move(logs)), values_(values), smallest_(below.minCoeff()), smallest_positive_(0), below_(below) {
  for (Index j = 0; j < below.cols(); ++j)
    for (Index i = 0; i < below.rows(); ++i)
      if (below(i, j) > 0 && (smallest_positive_ == 0 || below(i, j) < smallest_positive_)) smallest_positive_ = below(i, j);
  for (Index i = 0; i < log_.lo.rows(); ++i) all_rows_.push_back(i);
  for (Index j = 0; j < log_.lo.cols(); ++j) all_cols_.push_back(j);
}

BoundsMatrix LowerBoundCache::logs_of(const Matrix<Rational>& A) { return log_bounds_of(A); }

void LowerBoundCache::sort_entries() {
  if (!adopted_ && order_.empty()) order_ = entry_order(below_);
}

void LowerBoundCache::rows_and_columns(double t, std::vector<Index>& rows, std::vector<Index>& cols) {
  if (t < smallest_) {
    rows = all_rows_;
    cols = all_cols_;
    return;
  }
  sort_entries();
  // Every width's bisection starts from the same power of 2 and the thresholds
  // theta eps repeat, so the same R x J comes back often: remembered by the
  // count of entries it excludes (which fixes it).
  const std::int64_t key = entries_at_most(order(), t);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = rectangles_.find(key);
    if (it != rectangles_.end()) {
      rows = it->second.first;
      cols = it->second.second;
      return;
    }
  }
  rows_and_columns_above(order(), t, rows, cols);
  const std::lock_guard<std::mutex> lock(mutex_);
  if (rectangles_.size() < max_remembered_rectangles) rectangles_.emplace(key, std::pair{rows, cols});
}

double LowerBoundCache::eta_norm(const std::vector<Index>& rows, const std::vector<Index>& cols, double eps) {
  const bool every_entry = rows.size() == all_rows_.size() && cols.size() == all_cols_.size();
  if (!every_entry) return eta_norm_upper(below_, rows, cols, eps);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = full_eta_.find(eps);
    if (it != full_eta_.end()) return it->second;
  }
  const double v = eta_norm_upper(below_, rows, cols, eps);
  const std::lock_guard<std::mutex> lock(mutex_);
  full_eta_.emplace(eps, v);
  return v;
}

const CertifiedSingularValues* LowerBoundCache::values(const std::vector<Index>& rows, const std::vector<Index>& cols,
                                                       Index index) {
  const Index p = std::min<Index>(static_cast<Index>(rows.size()), static_cast<Index>(cols.size()));
  if (index > p || cols.size() < 2) return nullptr;
  auto key = std::make_pair(rows, cols);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) return &it->second;
  }
  const BoundsMatrix sub{log_.lo(rows, cols), log_.hi(rows, cols)};
  const BallMatrix LC = certified_row_centered(sub);
  SvdOptions lower_only;
  lower_only.upper_bounds = false;
  CertifiedSingularValues s = certified_singular_values(LC, std::min(values_, p), lower_only);
  const std::lock_guard<std::mutex> lock(mutex_);
  return &cache_.emplace(std::move(key), std::move(s)).first->second;  // the first one in, if both computed it
}

void search_lower_bounds(std::vector<LowerSearch>& searches, int steps, int steps_above, LowerBoundCache& cache) {
  // A lower bound of the smallest positive entry of Â (of min Â when no entry is
  // 0): the edge below which R x J no longer changes.
  const double smallest = cache.smallest_positive();
  // The edge of min Â first, where R x J is every entry, or every entry but the
  // zeros (one certified SVD and,
  // for every width with the same edge, one eta norm): often the answer below it.
  std::vector<LowerSearch*> edge_failed;
  for (LowerSearch& s : searches) {
    const double full_top = std::min(s.ceiling, smallest);
    if (!(full_top > 0)) continue;
    Point edge;
    edge.eps = std::nextafter(full_top, 0.0);
    cache.rows_and_columns(edge.eps, edge.rows, edge.cols);
    ImpossibilityCheck c = verdict(cache, edge, s.width);
    if (!c.impossible) {
      edge_failed.push_back(&s);
    } else if (edge.eps > s.best) {
      s.best = edge.eps;
      s.proof = std::move(c);
    }
  }
  // Above min Â: R x J drops the entries <= theta eps. Geometric steps: the
  // provable eps is usually within a small factor of min Â, while the ceiling
  // can be orders of magnitude above it, where R x J shrinks to nothing.
  // The factors theta = 1, 2, 4, 8 are independent searches, each on its own
  // copy of the searches: a larger theta keeps fewer entries, each with a smaller
  // eta_ij (<= log(theta / (theta - 1))), and which wins depends on the target
  // (the greedy R x J jumps as eps moves). theta = 1 (the largest R x J, the
  // slowest) runs beside the others on a second thread when there is one; the
  // best proof is kept for each width.
  // A single width (reach's band, a bracket's question) on a target up to
  // 512 x 512 also bisects from tops 8 and 64 times higher: which eps can be
  // proven jumps with R x J, so a shifted grid of points finds other proofs. On
  // 12 planted heads of rank 4 and 8 at n = 256 (free and causal, d_k = r - 1) the
  // best of the three grids was 15% above the first alone on average, up to 1.4x;
  // the points above a width's ceiling cost nothing, so each grid costs what the
  // first does.
  const bool shifted_grids =
      searches.size() == 1 && cache.all_rows().size() * cache.all_cols().size() <= max_greedy_refinement_entries;
  const std::vector<double> shifts = shifted_grids ? std::vector<double>{1, 8, 64} : std::vector<double>{1};
  const auto search_above = [&](std::vector<LowerSearch>& own, double theta, double shift) {
    std::vector<Member> above;
    double ceiling = 0;
    for (LowerSearch& s : own)
      if (smallest < s.ceiling) {
        above.push_back({&s, steps_above});
        ceiling = std::max(ceiling, s.ceiling);
      }
    // The top is a power of 2 above the ceiling: the points tried, and
    // so the proof found (R x J jumps as eps moves), do not move with the last
    // digits of a witness's error; points at or above a width's ceiling cost
    // nothing there (the width goes down). (A geometric grid from the top down
    // before the bisection was tried: no better on 20 planted heads, 3 up, 5 down.)
    if (above.empty()) return;
    bisect(std::move(above), smallest, power_of_two_above(ceiling) * shift, theta, true, cache);
  };
  // Copies of the searches, one per grid and theta but the first grid's theta = 1,
  // which is `searches` itself.
  std::vector<std::vector<LowerSearch>> others(4 * shifts.size() - 1, searches);
  const auto copy = [&](std::size_t grid, int theta_index) -> std::vector<LowerSearch>& {  // theta_index 0..3: 1, 2, 4, 8
    return others[4 * grid + static_cast<std::size_t>(theta_index) - 1];
  };
  cache.sort_entries();
  run_side_by_side(
      [&] {
        for (std::size_t g = 0; g < shifts.size(); ++g) {
          search_above(copy(g, 1), 2.0, shifts[g]);
          search_above(copy(g, 2), 4.0, shifts[g]);
          search_above(copy(g, 3), 8.0, shifts[g]);
        }
      },
      [&] {
        search_above(searches, 1.0, shifts[0]);
        for (std::size_t g = 1; g < shifts.size(); ++g) search_above(copy(g, 0), 1.0, shifts[g]);
      });
  for (std::vector<LowerSearch>& other : others)
    for (std::size_t k = 0; k < searches.size(); ++k)
      if (other[k].best > searches[k].best) {
        searches[k].best = other[k].best;
        searches[k].proof = std::move(other[k].proof);
      }
  // Below the edge, by bisection, for the widths with nothing proven yet (an eps
  // proven above min Â beats every point below it). The top is min Â, or the
  // power of 2 above a lower ceiling (as above: the points tried do not
  // move with a witness's last digits).
  std::vector<Member> below;
  double top = 0;
  for (LowerSearch* s : edge_failed)
    if (s->best == 0) {
      below.push_back({s, steps});
      top = std::max(top, std::min(power_of_two_above(s->ceiling), smallest));
    }
  bisect(std::move(below), 0, std::nextafter(top, 0.0), 1, false, cache);
  // Last, a single width's best pushed up with locally refined rectangles. A
  // width profile's joint search skips it: each width's refinement costs as much
  // as one width's alone (a profile of 16 widths at n = 128 took 3.5 s with it,
  // 0.1 s without), and reach's band at d_k, which the scan joins to the
  // profile, has it.
  if (searches.size() == 1 && searches.front().best > 0 && searches.front().best < searches.front().ceiling)
    refine_search(searches.front(), steps_above, cache);
}

double eta_norm_upper(const Eigen::MatrixXd& below, const std::vector<Index>& rows, const std::vector<Index>& cols,
                      double eps) {
  const std::size_t r = rows.size(), c = cols.size();
  if (r == 0 || c == 0) return 0;
  // eta >= 0, so ||eta||_2 <= min(||eta||_F, sqrt(max row sum * max column sum)),
  // accumulated in one pass, column by column, rounding up.
  // x = eps / a rounded up (a is already a lower bound of Â). For x <= 1/16,
  // -log(1 - x) = sum_k x^k / k <= sum_(k<=12) x^k / k + x^13 / (13 (1 - x)),
  // every term positive and rounded up (Horner), so the sum is an upper bound
  // within a few ulps; larger x (entries within 16 eps: many, above min Â) go to
  // neg_log1m_upper (numbers/certified_log.hpp), outside the upward-rounding scope.
  std::vector<double> a(r), x(r), h(r), row_sums(r, 0.0), col_sums(c, 0.0);
  std::vector<double> large_x;
  std::vector<std::pair<std::size_t, std::size_t>> large_at;
  double squares = 0;
  {
    UpwardRounding up;
    double inverse[14];
    for (int k = 1; k <= 13; ++k) {
      inverse[k] = 1.0 / k;  // >= 1 / k
      detail::rounding_barrier(inverse[k]);
    }
    for (std::size_t jj = 0; jj < c; ++jj) {
      const double* column = &below(0, cols[jj]);
      for (std::size_t i = 0; i < r; ++i) a[i] = column[rows[i]];
      bool bad = false;
      for (std::size_t i = 0; i < r; ++i) {
        x[i] = eps / a[i];
        bad |= !(a[i] > 0) || !(x[i] < 1);
      }
      if (bad) return inf;
      for (std::size_t i = 0; i < r; ++i) {  // branch-free: the compiler vectorises it
        const double t = x[i];
        const double one_minus = t - 1.0;  // >= t - 1, so -one_minus <= 1 - t
        double t13 = t * t;
        t13 = t13 * t13;            // t^4
        t13 = t13 * t13 * t13 * t;  // t^13
        double horner = inverse[12];
        for (int k = 11; k >= 1; --k) horner = inverse[k] + t * horner;
        h[i] = inverse[13] * t13 / -one_minus + t * horner;  // the tail, >= t^13 / (13 (1 - t)), plus the rest
      }
      double col = 0;
      for (std::size_t i = 0; i < r; ++i) {
        if (x[i] > 0.0625) {
          large_x.push_back(x[i]);
          large_at.emplace_back(i, jj);
          continue;
        }
        col += h[i];
        squares += h[i] * h[i];
        row_sums[i] += h[i];
      }
      col_sums[jj] = col;
    }
    detail::rounding_barrier(squares);
  }
  if (!large_x.empty()) {
    std::vector<double> hi(large_x.size());
    neg_log1m_upper(large_x.data(), hi.data(), hi.size());
    UpwardRounding up;
    for (std::size_t t = 0; t < hi.size(); ++t) {
      squares += hi[t] * hi[t];
      row_sums[large_at[t].first] += hi[t];
      col_sums[large_at[t].second] += hi[t];
    }
    detail::rounding_barrier(squares);
  }
  UpwardRounding up;
  const double max_row = *std::max_element(row_sums.begin(), row_sums.end());
  const double max_col = *std::max_element(col_sums.begin(), col_sums.end());
  double frobenius = std::sqrt(squares);
  double product = max_row * max_col;
  detail::rounding_barrier(product);
  double mixed = std::sqrt(product);
  detail::rounding_barrier(frobenius);
  detail::rounding_barrier(mixed);
  const double best = std::min(frobenius, mixed);
  return std::isfinite(best) ? best : inf;
}

}  // namespace attnrank::detail
