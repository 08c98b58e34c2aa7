// The approximate question of attnrank/reach/approximate.hpp: certified bounds
// error_lower <= E*(A, d_k) <= error_upper.
#include <attnrank/reach/approximate.hpp>

#include <attnrank/linalg/detail/balanced_factors.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/detail/witness_search.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/target.hpp>

#include <Eigen/QR>

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <tuple>
#include <utility>

namespace attnrank {
namespace {

using Eigen::Index;
constexpr double inf = std::numeric_limits<double>::infinity();

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

/// What the lower bounds of every width share: the certified singular values of
/// log(Â)_RJ C_J, once per R x J, and below min Â (R x J = every entry, the same
/// for every width and step) the bound on ||eta(eps)||_2 for each eps tried, since
/// bisections over the same interval meet the same points.
class LowerBoundCache {
 public:
  /// A: the target (unnormalised is fine: the centering removes row scaling).
  /// The logs are enclosed once; each R x J slices and centers them. `below`:
  /// lower bounds of Â.
  LowerBoundCache(const Matrix<Rational>& A, const Eigen::MatrixXd& below, Index values)
      : log_(certified_log_bounds(detail::zeros_replaced(A))), values_(values), smallest_(below.minCoeff()), below_(below) {
    for (Index i = 0; i < A.rows(); ++i) all_rows_.push_back(i);
    for (Index j = 0; j < A.cols(); ++j) all_cols_.push_back(j);
  }

  /// A lower bound of min Â: below it, R x J is every entry.
  double smallest() const { return smallest_; }
  /// Â's lower bounds in increasing order (for R x J above min Â), sorted once.
  const detail::EntryOrder& order() {
    if (order_.value.empty()) order_ = detail::entry_order(below_);
    return order_;
  }
  const std::vector<Index>& all_rows() const { return all_rows_; }
  const std::vector<Index>& all_cols() const { return all_cols_; }

  /// detail::eta_norm_upper on every entry (eps below smallest()), remembered.
  double full_eta_norm(const Eigen::MatrixXd& below, double eps) {
    const auto it = full_eta_.find(eps);
    if (it != full_eta_.end()) return it->second;
    const double v = detail::eta_norm_upper(below, all_rows_, all_cols_, eps);
    full_eta_.emplace(eps, v);
    return v;
  }

  /// A certified lower bound on sigma_(index)(log(Â)_RJ C_J), 1-based; 0 when
  /// the submatrix has fewer singular values than that.
  double lower(const std::vector<Index>& rows, const std::vector<Index>& cols, Index index) {
    const CertifiedSingularValues* s = values(rows, cols, index);
    return s && index <= static_cast<Index>(s->values.size()) ? s->values[static_cast<std::size_t>(index - 1)].lower : 0;
  }

  /// The certified singular values of log(Â)_RJ C_J behind lower(); null when
  /// it has fewer than `index`.
  const CertifiedSingularValues* values(const std::vector<Index>& rows, const std::vector<Index>& cols, Index index) {
    const Index p = std::min<Index>(static_cast<Index>(rows.size()), static_cast<Index>(cols.size()));
    if (index > p || cols.size() < 2) return nullptr;
    auto key = std::make_pair(rows, cols);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      const BoundsMatrix sub{log_.lo(rows, cols), log_.hi(rows, cols)};
      const BallMatrix LC = certified_row_centered(sub);
      SvdOptions lower_only;
      lower_only.upper_bounds = false;
      it = cache_.emplace(std::move(key), certified_singular_values(LC, std::min(values_, p), lower_only)).first;
    }
    return &it->second;
  }

 private:
  BoundsMatrix log_;  ///< log A entrywise (zeros replaced: those entries are never in R x J)
  Index values_;
  double smallest_;
  const Eigen::MatrixXd& below_;
  detail::EntryOrder order_;
  std::vector<Index> all_rows_, all_cols_;
  std::map<double, double> full_eta_;
  std::map<std::pair<std::vector<Index>, std::vector<Index>>, CertifiedSingularValues> cache_;
};

detail::ImpossibilityCheck check_impossible(const Eigen::MatrixXd& normalized, Index dk, double eps, LowerBoundCache& sigma,
                                            double theta = 1) {
  detail::ImpossibilityCheck c;
  const bool every_entry = theta * eps < sigma.smallest();
  if (every_entry) {
    c.rows = sigma.all_rows();
    c.cols = sigma.all_cols();
  } else {
    detail::rows_and_columns_above(sigma.order(), theta * eps, c.rows, c.cols);
  }
  if (c.rows.empty() || c.cols.size() < 2) return c;
  c.sigma_lower = sigma.lower(c.rows, c.cols, dk + 1);
  if (!(c.sigma_lower > 0)) return c;
  c.eta_norm = every_entry ? sigma.full_eta_norm(normalized, eps) : detail::eta_norm_upper(normalized, c.rows, c.cols, eps);
  c.impossible = c.eta_norm < c.sigma_lower;
  return c;
}

/// Bisection for the largest impossible eps in [lo, hi): each accepted step is
/// its own proof, so the answer is sound even where the check is not monotone
/// in eps (R x J changes as eps passes entries of Â).
void bisect(const Eigen::MatrixXd& normalized, Index dk, double lo, double hi, int steps, LowerBoundCache& sigma,
            detail::ImpossibilityCheck& proof, double& best, double theta = 1, bool geometric = false) {
  for (int s = 0; s < steps && lo < hi; ++s) {
    const double mid = geometric && lo > 0 ? std::sqrt(lo * hi) : 0.5 * (lo + hi);
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
                 LowerBoundCache& sigma, ApproxBounds& out) {
  if (!(hi > 0)) return;
  double best = 0;
  detail::ImpossibilityCheck proof;
  const double smallest = sigma.smallest();  // a lower bound of min Â
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
  // Geometric steps: the provable eps is usually within a small factor of min Â,
  // while hi (the witness's error) can be orders of magnitude above it, where R x J
  // shrinks to nothing and every step costs a pass over the entries.
  if (full_top < hi)
    for (const double theta : {1.0, 2.0})
      bisect(normalized, dk, full_top, hi, steps_above, sigma, proof, best, theta, true);
  out.error_lower = best;
  if (best > 0) {
    out.lower_proof.sigma_lower = proof.sigma_lower;
    out.lower_proof.vectors = sigma.values(proof.rows, proof.cols, dk + 1)->right_vectors.leftCols(dk + 1);
    out.lower_proof.rows = std::move(proof.rows);
    out.lower_proof.cols = std::move(proof.cols);
  }
}

void validate(const Matrix<Rational>& A, Index dk) {
  validate_target(A, "target");
  if (dk < 1 || dk > A.rows())
    throw input_error("d_k = " + std::to_string(dk) + " is out of range: a head on n = " + std::to_string(A.rows()) +
                      " tokens has 1 <= d_k <= n");
}

/// Fixed embeddings for the upper bound's search: X exactly and in doubles, the
/// pseudo-inverse that maps a free start's Q, K to weights, and rank X.
struct Embeddings {
  const Matrix<Rational>& exact;
  Eigen::MatrixXd X, pinv;
  Index rank = 0;
};

/// The SVDs behind the starts, truncated to the widest width asked (each width's
/// start is a truncation: the log-domain optimum at that width): the centered log
/// of the target, and the same for the target with its entries floored at
/// 0.01 / n and 0.1 / n. Tiny entries dominate log A (a weight of 1e-9 is a score
/// 20 below its row), while the max error cares little about them, so the
/// floored starts are often far better for saturated patterns.
std::vector<TruncatedSvd> start_svds(const Matrix<Rational>& A, const Eigen::MatrixXd& T, Index widest) {
  const Index n = A.rows();
  std::vector<TruncatedSvd> out{approx_truncated_svd(approx_centered_log(detail::zeros_replaced(A)), widest)};
  for (const double floor : {0.01, 0.1}) {
    const Eigen::MatrixXd floored = T.cwiseMax(floor / static_cast<double>(n));
    const Eigen::MatrixXd L = floored.array().log().matrix();
    const Eigen::MatrixXd LC = L.colwise() - L.rowwise().mean();
    if (LC.allFinite()) out.push_back(approx_truncated_svd(LC, widest));
  }
  return out;
}

/// The start of width dk (<= n) from one of those SVDs.
Witness start_at(const TruncatedSvd& svd, Index dk) {
  Witness w;
  std::tie(w.Q, w.K) = detail::balanced_factors(svd.U, svd.s, svd.V, dk, std::sqrt(static_cast<double>(dk)));
  return w;
}

/// What every width shares: Â (bounds and doubles), the certified singular
/// values of the centered log, the SVDs behind the starts, and the embeddings.
struct Context {
  Context(const Matrix<Rational>& target, Index widest, Index values, const Embeddings* embeddings = nullptr)
      : A(target),
        bounds(normalized_target_bounds(target)),
        T(approx_normalized_target(target)),
        sigma(target, bounds.lo, values),
        svds(start_svds(target, T, std::min(widest, target.rows()))),
        emb(embeddings) {}
  const Matrix<Rational>& A;
  BoundsMatrix bounds;
  Eigen::MatrixXd T;
  LowerBoundCache sigma;
  std::vector<TruncatedSvd> svds;
  const Embeddings* emb;
};

/// A free start of width w <= dk as weights of width dk on X: W = X^+ Q padded
/// with zero columns, scaled by (dk / w)^(1/4) so the scores stay Q K^T / sqrt(w).
Eigen::VectorXd weights_start(const Witness& w, const Embeddings& e, Index dk) {
  const Index m = e.X.cols(), width = w.Q.cols();
  const double scale = std::pow(static_cast<double>(dk) / static_cast<double>(width), 0.25);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(2 * m * dk);
  Eigen::Map<Eigen::MatrixXd>(x.data(), m, dk).leftCols(width) = scale * e.pinv * w.Q;
  Eigen::Map<Eigen::MatrixXd>(x.data() + m * dk, m, dk).leftCols(width) = scale * e.pinv * w.K;
  return x;
}

/// How the upper bound's witnesses are certified: in MPFI at the options' bits
/// (what certificates and their checker use), or in doubles with directed
/// rounding (attention/certified_softmax.hpp: as certified, far faster; width).
enum class Certification { mpfi, doubles };

/// error_upper at width dk: the starts, certified as they are, then (with
/// o.optimise) the search from them, its result certified too; the best is kept.
void upper_bound(Context& c, Index dk, const ApproxOptions& o, Certification how, ApproxBounds& out) {
  const Matrix<Rational>& A = c.A;
  const Index n = A.rows();
  const unsigned bits = std::max(o.bits, 64u);
  const Embeddings* emb = c.emb;
  std::vector<Witness> free_starts;
  for (const TruncatedSvd& svd : c.svds) free_starts.push_back(start_at(svd, std::min(dk, n)));
  const auto certify_free = [&](Witness& w) {
    if (how == Certification::mpfi) {
      w.error_bits = bits;
      w.max_abs_error = certified_witness_error(A, w.Q, w.K, bits);
    } else {
      w.error_bits = 53;  // doubles and directed rounding
      w.max_abs_error = fast_certified_witness_error(c.bounds, w.Q, w.K);
    }
  };
  std::vector<Eigen::VectorXd> starts;
  if (!emb) {
    for (const Witness& w : free_starts) starts.push_back(pack(w));
    Witness start = free_starts.front();
    certify_free(start);
    out.start_error = start.max_abs_error;
    out.witness = start;
    const Eigen::VectorXd best = o.optimise ? detail::search_witness(c.T, dk, nullptr, starts, o) : Eigen::VectorXd();
    if (best.size()) {
      Witness w = unpack(best, n, dk);
      certify_free(w);
      if (w.max_abs_error < out.witness.max_abs_error) out.witness = std::move(w);
    }
    out.error_upper = out.witness.max_abs_error;
  } else {
    out.witness.max_abs_error = inf;  // no free witness: the weights are the witness
    out.weights_error_bits = bits;
    const Index m = emb->X.cols();
    const auto certify = [&](const Eigen::VectorXd& x) {
      const Eigen::MatrixXd WQ = Eigen::Map<const Eigen::MatrixXd>(x.data(), m, dk);
      const Eigen::MatrixXd WK = Eigen::Map<const Eigen::MatrixXd>(x.data() + m * dk, m, dk);
      const double error = detail::certified_embedding_error(A, emb->exact, WQ, WK, bits);
      if (error < out.error_upper) {
        out.error_upper = error;
        out.WQ = WQ;
        out.WK = WK;
      }
      return error;
    };
    if (emb->X.allFinite() && emb->pinv.allFinite()) {
      for (const Witness& w : free_starts) starts.push_back(weights_start(w, *emb, dk));
      out.start_error = certify(starts.front());
      const Eigen::VectorXd best = o.optimise ? detail::search_witness(c.T, dk, &emb->X, starts, o) : Eigen::VectorXd();
      if (best.size()) certify(best);
    }
  }
}

/// error_lower at width dk (min(dk, rank X) with embeddings), searched up to
/// out.error_upper, and the words that explain it.
void lower_bound_and_reason(Context& c, Index dk, const ApproxOptions& o, ApproxBounds& out) {
  const Embeddings* emb = c.emb;
  // With embeddings, X M X^T has rank <= min(d_k, rank X): the free bound at
  // that width holds.
  const Index width = emb ? std::min(dk, emb->rank) : dk;
  lower_bound(c.bounds.lo, width, std::min(out.error_upper, 1.0), o.bisection_steps, o.bisection_steps_above, c.sigma, out);
  const std::string sigma_name = "sigma_" + std::to_string(width + 1);
  if (out.error_lower > 0)
    out.lower_reason = sigma_name + " of the centered log on " + std::to_string(out.lower_proof.rows.size()) + " x " +
                       std::to_string(out.lower_proof.cols.size()) + " entries is certified >= " +
                       format_lower_bound(out.lower_proof.sigma_lower, 3) + ", above every error matrix a head within " +
                       format_lower_bound(out.error_lower, 3) + " could leave" +
                       (emb && width < dk ? " (rank X = " + std::to_string(width) + " bounds the head's rank)" : "");
  else
    out.lower_reason = "no error is excluded: the certified singular value " + sigma_name +
                       " is not above the bound for any eps tried";
}

ApproxBounds bounds_at(Context& c, Index dk, const ApproxOptions& o, Certification how) {
  ApproxBounds out;
  out.n = c.A.rows();
  out.dk = dk;
  upper_bound(c, dk, o, how, out);
  lower_bound_and_reason(c, dk, o, out);
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

namespace {
/// The indices whose flag is set.
std::vector<Index> kept(const std::vector<bool>& in) {
  std::vector<Index> out;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i]) out.push_back(static_cast<Index>(i));
  return out;
}
}  // namespace

EntryOrder entry_order(const Eigen::MatrixXd& below) {
  EntryOrder o;
  o.rows = below.rows();
  o.cols = below.cols();
  std::vector<Index> index(static_cast<std::size_t>(below.size()));
  for (Index t = 0; t < below.size(); ++t) index[static_cast<std::size_t>(t)] = t;
  std::stable_sort(index.begin(), index.end(), [&](Index a, Index b) { return below(a) < below(b); });
  for (const Index t : index) {
    o.value.push_back(below(t));
    o.row.push_back(t % o.rows);  // column-major
    o.col.push_back(t / o.rows);
  }
  return o;
}

void rows_and_columns_above(const EntryOrder& order, double eps, std::vector<Index>& rows, std::vector<Index>& cols) {
  const Index n = order.rows, m = order.cols;
  // The bad entries (below <= eps, as !(below > eps) above: values are never NaN),
  // as lists per row and per column (counting sort: no allocation per line).
  const Index bad = std::upper_bound(order.value.begin(), order.value.end(), eps) - order.value.begin();
  std::vector<Index> row_start(static_cast<std::size_t>(n + 1), 0), col_start(static_cast<std::size_t>(m + 1), 0);
  for (Index t = 0; t < bad; ++t) {
    ++row_start[static_cast<std::size_t>(order.row[static_cast<std::size_t>(t)] + 1)];
    ++col_start[static_cast<std::size_t>(order.col[static_cast<std::size_t>(t)] + 1)];
  }
  for (Index i = 0; i < n; ++i) row_start[static_cast<std::size_t>(i + 1)] += row_start[static_cast<std::size_t>(i)];
  for (Index j = 0; j < m; ++j) col_start[static_cast<std::size_t>(j + 1)] += col_start[static_cast<std::size_t>(j)];
  std::vector<Index> row_entries(static_cast<std::size_t>(bad)), col_entries(static_cast<std::size_t>(bad));
  {
    std::vector<Index> r_fill(row_start.begin(), row_start.end() - 1), c_fill(col_start.begin(), col_start.end() - 1);
    for (Index t = 0; t < bad; ++t) {
      const Index i = order.row[static_cast<std::size_t>(t)], j = order.col[static_cast<std::size_t>(t)];
      row_entries[static_cast<std::size_t>(r_fill[static_cast<std::size_t>(i)]++)] = j;
      col_entries[static_cast<std::size_t>(c_fill[static_cast<std::size_t>(j)]++)] = i;
    }
  }
  std::vector<int> row_bad(static_cast<std::size_t>(n)), col_bad(static_cast<std::size_t>(m));
  for (Index i = 0; i < n; ++i) row_bad[static_cast<std::size_t>(i)] = static_cast<int>(row_start[static_cast<std::size_t>(i + 1)] - row_start[static_cast<std::size_t>(i)]);
  for (Index j = 0; j < m; ++j) col_bad[static_cast<std::size_t>(j)] = static_cast<int>(col_start[static_cast<std::size_t>(j + 1)] - col_start[static_cast<std::size_t>(j)]);
  // The dense version's rule: the row (column) with the most bad entries, the
  // first such; the column when it has at least as many. Max-heaps of
  // (count, -index) give the same choice; stale entries are skipped on top.
  using Item = std::pair<int, Index>;
  std::priority_queue<Item> row_heap, col_heap;
  for (Index i = 0; i < n; ++i) row_heap.emplace(row_bad[static_cast<std::size_t>(i)], -i);
  for (Index j = 0; j < m; ++j) col_heap.emplace(col_bad[static_cast<std::size_t>(j)], -j);
  std::vector<bool> row_in(static_cast<std::size_t>(n), true), col_in(static_cast<std::size_t>(m), true);
  const auto top = [](std::priority_queue<Item>& heap, const std::vector<int>& count, const std::vector<bool>& in) {
    while (!heap.empty()) {
      const auto [c, minus_i] = heap.top();
      const std::size_t i = static_cast<std::size_t>(-minus_i);
      if (in[i] && count[i] == c) return static_cast<Index>(i);
      heap.pop();
    }
    return Index{-1};
  };
  while (true) {
    const Index best_row = top(row_heap, row_bad, row_in), best_col = top(col_heap, col_bad, col_in);
    const int r = best_row < 0 ? 0 : row_bad[static_cast<std::size_t>(best_row)];
    const int c = best_col < 0 ? 0 : col_bad[static_cast<std::size_t>(best_col)];
    if (r == 0 && c == 0) break;
    if (c >= r) {
      col_in[static_cast<std::size_t>(best_col)] = false;
      for (Index t = col_start[static_cast<std::size_t>(best_col)]; t < col_start[static_cast<std::size_t>(best_col + 1)]; ++t) {
        const Index i = col_entries[static_cast<std::size_t>(t)];
        if (row_in[static_cast<std::size_t>(i)]) row_heap.emplace(--row_bad[static_cast<std::size_t>(i)], -i);
      }
      col_bad[static_cast<std::size_t>(best_col)] = 0;
    } else {
      row_in[static_cast<std::size_t>(best_row)] = false;
      for (Index t = row_start[static_cast<std::size_t>(best_row)]; t < row_start[static_cast<std::size_t>(best_row + 1)]; ++t) {
        const Index j = row_entries[static_cast<std::size_t>(t)];
        if (col_in[static_cast<std::size_t>(j)]) col_heap.emplace(--col_bad[static_cast<std::size_t>(j)], -j);
      }
      row_bad[static_cast<std::size_t>(best_row)] = 0;
    }
  }
  rows = kept(row_in);
  cols = kept(col_in);
}

}  // namespace detail

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Index dk, const ApproxOptions& o) {
  validate(A, dk);
  Context c(A, dk, dk + 1);
  return bounds_at(c, dk, o, Certification::mpfi);
}

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, const Matrix<Rational>& X, Index dk,
                                 const ApproxOptions& o) {
  detail::validate_embeddings_question(A, X, dk);
  Embeddings e{X, X.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); }), {}, 0};
  if (e.X.allFinite()) e.pinv = e.X.completeOrthogonalDecomposition().pseudoInverse();
  e.rank = A.rows() - exact_kernel_basis(Matrix<Rational>(X.transpose())).cols();  // exact: N^T X = 0 spans the rest
  Context c(A, dk, std::min(dk, e.rank) + 1, &e);
  return bounds_at(c, dk, o, Certification::mpfi);
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

namespace {
/// Carries each bound to the neighbouring widths and reads off the widths. E* is
/// non-increasing in d_k (a head of width d is one of width d + 1 with a zero
/// column, rescaled): lower bounds carry from the right, upper bounds from the left.
void settle(WidthResult& out) {
  for (std::size_t i = out.profile.size(); i-- > 1;)
    out.profile[i - 1].error_lower = std::max(out.profile[i - 1].error_lower, out.profile[i].error_lower);
  for (std::size_t i = 1; i < out.profile.size(); ++i)
    out.profile[i].error_upper = std::min(out.profile[i].error_upper, out.profile[i - 1].error_upper);
  out.width_lower = out.max_dk + 1;
  for (const WidthProfileEntry& e : out.profile)
    if (!(e.error_lower > out.epsilon)) {
      out.width_lower = e.dk;
      break;
    }
  out.width_upper = 0;
  for (const WidthProfileEntry& e : out.profile)
    if (e.error_upper <= out.epsilon) {
      out.width_upper = e.dk;
      break;
    }
}
}  // namespace

WidthResult approx_width(const Matrix<Rational>& A, double epsilon, Index max_dk, const ApproxOptions& o) {
  validate(A, 1);
  if (!(epsilon >= 0 && epsilon <= 1))
    throw input_error("epsilon = " + std::to_string(epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
  const Index n = A.rows();
  if (max_dk == 0) max_dk = n;
  if (max_dk < 1 || max_dk > n)
    throw input_error("max d_k = " + std::to_string(max_dk) + " is out of range: 1 <= max d_k <= n = " + std::to_string(n));
  // One certified SVD (lower bounds) and one SVD per start (upper bounds) serve every width.
  Context c(A, max_dk, max_dk + 1);
  WidthResult out;
  out.epsilon = epsilon;
  out.max_dk = max_dk;
  // First every width from its starts alone, certified in doubles: the bracket.
  ApproxOptions starts_only = o;
  starts_only.optimise = false;
  for (Index dk = 1; dk <= max_dk; ++dk) {
    const ApproxBounds b = bounds_at(c, dk, starts_only, Certification::doubles);
    out.profile.push_back({dk, b.error_lower, b.error_upper});
  }
  settle(out);
  // Then the search, only where it can lower width_upper: by bisection over the
  // open widths [width_lower, width_upper) (a witness within epsilon at d settles
  // every width above d), each result certified in doubles.
  if (o.optimise) {
    Index lo = out.width_lower, hi = out.width_upper ? out.width_upper - 1 : max_dk;
    while (lo <= hi) {
      const Index mid = lo + (hi - lo) / 2;
      ApproxBounds b;
      upper_bound(c, mid, o, Certification::doubles, b);
      WidthProfileEntry& e = out.profile[static_cast<std::size_t>(mid - 1)];
      e.error_upper = std::min(e.error_upper, b.error_upper);
      if (b.error_upper <= epsilon) hi = mid - 1;
      else lo = mid + 1;
    }
    settle(out);
  }
  return out;
}

}  // namespace attnrank
