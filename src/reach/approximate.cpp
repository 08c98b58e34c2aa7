// The approximate question of attnrank/reach/approximate.hpp: certified bounds
// error_lower <= E*(A, d_k) <= error_upper.
#include <attnrank/reach/approximate.hpp>

#include <attnrank/reach/approx_memo.hpp>

#include <attnrank/attention/softmax.hpp>
#include <attnrank/linalg/detail/balanced_factors.hpp>
#include <attnrank/linalg/detail/dense_decompositions.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/reach/detail/lower_bound_search.hpp>
#include <attnrank/reach/detail/order_bound.hpp>
#include <attnrank/reach/detail/witness_search.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/target.hpp>

#include <mpfr.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <tuple>
#include <utility>

namespace attnrank {
namespace {

using Eigen::Index;
using detail::inf;

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

void validate(const Matrix<Rational>& A, Index dk) {
  validate_target(A, "target");
  require_head_width(dk, A.rows());
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
/// floored starts are often far better for saturated patterns. This one: the
/// centered log (the midpoints of its certified bounds).
TruncatedSvd log_start_svd(detail::LowerBoundCache& cache, Index widest) {
  // The lower bounds' certified SVD of the same matrix (every entry) has its
  // right vectors already: U s = M V gives the rest. Otherwise (fewer vectors
  // than widest, a zero singular value) a truncated SVD of its own.
  Eigen::MatrixXd M = 0.5 * (cache.log().lo + cache.log().hi);
  M.colwise() -= M.rowwise().mean();
  const CertifiedSingularValues* certified = cache.values(cache.all_rows(), cache.all_cols(), 1);
  if (certified && certified->right_vectors.cols() >= widest && M.allFinite()) {
    TruncatedSvd svd;
    svd.V = certified->right_vectors.leftCols(widest);
    svd.U = M * svd.V;
    svd.s = svd.U.colwise().norm().transpose();
    svd.method = "the certified SVD's right vectors";
    if ((svd.s.array() > 0).all() && svd.s.allFinite()) {
      svd.U.array().rowwise() /= svd.s.transpose().array();
      return svd;
    }
  }
  return approx_truncated_svd(M, widest);
}

/// The floored ones, appended to out (T: Â in doubles).
void add_floored_start_svds(const Eigen::MatrixXd& T, Index widest, std::vector<TruncatedSvd>& out) {
  const Index n = T.rows();
  for (const double floor : {0.01, 0.1}) {
    const Eigen::MatrixXd floored = T.cwiseMax(floor / static_cast<double>(n));
    Eigen::MatrixXd L = floored.array().log().matrix();
    L.colwise() -= L.rowwise().mean();
    if (L.allFinite()) out.push_back(approx_truncated_svd(L, widest));
  }
}

/// The start of width dk (<= n) from one of those SVDs.
Witness start_at(const TruncatedSvd& svd, Index dk) {
  Witness w;
  std::tie(w.Q, w.K) = detail::balanced_factors(svd.U, svd.s, svd.V, dk, std::sqrt(static_cast<double>(dk)));
  return w;
}

/// Â's certified bounds and the certified logs of A: independent and about
/// equally long (an enclosure of each rational entry, then a pass of doubles), so
/// the first runs on a second thread when there is a second core.
/// With a memo, its entries (computed there on first need, so shared with every
/// other question on the target).
std::pair<BoundsMatrix, BoundsMatrix> normalized_bounds_and_logs(const Matrix<Rational>& A, ApproxMemo* memo) {
  std::pair<BoundsMatrix, BoundsMatrix> out;
  if (memo) memo->require_target(A);
  const auto bounds = [&] { out.first = memo ? memo->bounds() : normalized_target_bounds(A); };
  const auto logs = [&] { out.second = memo ? memo->logs() : detail::LowerBoundCache::logs_of(A); };
  if (A.size() < 4096) {  // a thread costs more than it saves
    bounds();
    logs();
  } else {
    detail::run_side_by_side(bounds, logs);
  }
  return out;
}

/// What every width shares: Â (bounds and doubles), the certified singular
/// values of the centered log, the SVDs behind the starts, and the embeddings.
struct Context {
  Context(const Matrix<Rational>& target, Index widest, Index values, ApproxMemo* memo,
          const Embeddings* embeddings = nullptr)
      : Context(target, widest, values, embeddings, normalized_bounds_and_logs(target, memo)) {
    if (memo) sigma.adopt_order(memo->entry_order());  // bounds.lo is the memo's bounds().lo
  }
  Context(const Matrix<Rational>& target, Index widest, Index values, const Embeddings* embeddings,
          std::pair<BoundsMatrix, BoundsMatrix>&& bounds_and_logs)
      : A(target),
        bounds(std::move(bounds_and_logs.first)),
        T(0.5 * (bounds.lo + bounds.hi)),
        sigma(std::move(bounds_and_logs.second), bounds.lo, values),
        widest_start(std::min(widest, target.rows())),
        emb(embeddings) {}
  const Matrix<Rational>& A;
  const Mask* mask = nullptr;  ///< the masked question's mask, for the order bound's keys
  BoundsMatrix bounds;
  Eigen::MatrixXd T;
  detail::LowerBoundCache sigma;
  Index widest_start;
  const Embeddings* emb;

  /// The start SVDs: the log start alone, or (for the search) the floored ones
  /// too; each computed once, on first need.
  const std::vector<TruncatedSvd>& start_svds(bool floored_too) {
    if (svds_.empty()) svds_.push_back(log_start_svd(sigma, widest_start));
    if (floored_too && !floored_added_) {
      add_floored_start_svds(T, widest_start, svds_);
      floored_added_ = true;
    }
    return svds_;
  }

 private:
  std::vector<TruncatedSvd> svds_;
  bool floored_added_ = false;
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

/// How the upper bound's witnesses are certified: as producers state them
/// (stated_witness_error: doubles with directed rounding, MPFI at the options'
/// bits where that bound is mostly rounding slack or overflows), or in doubles
/// only (width's many witnesses).
enum class Certification { stated, doubles };

/// max |softmax(Q K^T / sqrt(d_k)) - T| in doubles: uncertified, a few ulps from the truth.
double approx_witness_error(const Eigen::MatrixXd& T, const Witness& w) {
  const Eigen::MatrixXd S = (w.Q * w.K.transpose()) / std::sqrt(static_cast<double>(w.Q.cols()));
  return (softmax_rows<double>(S) - T).cwiseAbs().maxCoeff();
}

/// error_upper at width dk: the starts, certified as they are, then (with
/// o.optimise) the search from them, its result certified too; the best is kept.
void upper_bound(Context& c, Index dk, const ApproxOptions& o, Certification how, ApproxBounds& out) {
  const Matrix<Rational>& A = c.A;
  const Index n = A.rows();
  const unsigned bits = std::max(o.bits, 64u);
  const Embeddings* emb = c.emb;
  std::vector<Witness> free_starts;
  for (const TruncatedSvd& svd : c.start_svds(o.optimise && o.floored_starts)) free_starts.push_back(start_at(svd, std::min(dk, n)));
  const auto certify_free = [&](Witness& w) {
    if (how == Certification::stated) {  // the stated route: doubles, MPFI where they are mostly slack
      w.max_abs_error = stated_witness_error(A, w.Q, w.K, bits, w.error_bits, &c.bounds);
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

/// The lower search for width dk: min(dk, rank X) with embeddings (X M X^T has
/// rank <= min(d_k, rank X): the free bound at that width holds), up to the
/// certified witness's error.
detail::LowerSearch lower_search(const Context& c, Index dk, const ApproxBounds& out) {
  detail::LowerSearch s;
  s.width = c.emb ? std::min(dk, c.emb->rank) : dk;
  s.ceiling = std::min(out.error_upper, 1.0);
  return s;
}

/// A finished search's bound, its proof and the words that explain it, into out.
void take_lower_bound(Context& c, Index dk, detail::LowerSearch& s, ApproxBounds& out) {
  const Index width = s.width;
  out.error_lower = s.best;
  if (s.best > 0) {
    out.lower_proof.sigma_lower = s.proof.sigma_lower;
    out.lower_proof.vectors = c.sigma.values(s.proof.rows, s.proof.cols, width + 1)->right_vectors.leftCols(width + 1);
    out.lower_proof.rows = std::move(s.proof.rows);
    out.lower_proof.cols = std::move(s.proof.cols);
  }
  const std::string sigma_name = "sigma_" + std::to_string(width + 1);
  if (width == 1) {  // two rows whose orders no width-1 head keeps may prove more
    const detail::OrderProof order = detail::order_lower_bound(c.bounds, c.mask);
    if (order.eps > out.error_lower) {
      out.error_lower = order.eps;
      out.lower_proof = LowerBoundProof{};
      out.lower_proof.orders = true;
      out.lower_proof.rows.assign(order.rows.begin(), order.rows.end());
      out.lower_proof.cols.assign(order.cols.begin(), order.cols.end());
      out.lower_reason = "rows " + std::to_string(order.rows[0] + 1) + " and " + std::to_string(order.rows[1] + 1) +
                         " order keys " + std::to_string(order.cols[0] + 1) + ", " + std::to_string(order.cols[1] + 1) +
                         " and " + std::to_string(order.cols[2] + 1) + ", " + std::to_string(order.cols[3] + 1) +
                         " in ways no head of width 1 can (one alike, one oppositely), with every gap above 2 x " +
                         format_lower_bound(out.error_lower, 3) +
                         (c.emb && width < dk ? " (rank X = 1 bounds the head's rank)" : "");
      return;
    }
  }
  if (out.error_lower > 0)
    out.lower_reason = sigma_name + " of the centered log on " + std::to_string(out.lower_proof.rows.size()) + " x " +
                       std::to_string(out.lower_proof.cols.size()) + " entries is certified >= " +
                       format_lower_bound(out.lower_proof.sigma_lower, 3) + ", above every error matrix a head within " +
                       format_lower_bound(out.error_lower, 3) + " could leave" +
                       (c.emb && width < dk ? " (rank X = " + std::to_string(width) + " bounds the head's rank)" : "");
  else
    out.lower_reason = "no error is excluded: the certified singular value " + sigma_name +
                       " is not above the bound for any eps tried";
}

/// A lower bound on E*(dk) aimed at eps, for a width whose bound b (from a joint
/// search) is within detail::refinement_reach of eps: width dk's own search (as
/// reach's band at dk runs it, its refinement included, b.error_upper the
/// ceiling), then, if that stops below eps, a refined rectangle at eps itself
/// (detail::prove_lower_bound_at) from its best proof. b keeps the better bound,
/// with its proof and reason, and b.error_lower is returned (>= eps: proven).
double lower_bound_above(Context& c, Index dk, double eps, const ApproxOptions& o, ApproxBounds& b) {
  if (b.error_lower >= eps || !(eps < detail::refinement_reach * b.error_lower)) return b.error_lower;
  std::vector<detail::LowerSearch> own{lower_search(c, dk, b)};
  detail::search_lower_bounds(own, o.bisection_steps, o.bisection_steps_above, c.sigma);
  detail::LowerSearch& s = own.front();
  if (!(s.best > b.error_lower)) {  // start from b's proof instead
    s.best = b.error_lower;
    s.proof = detail::ImpossibilityCheck{};
    if (!b.lower_proof.orders) {
      s.proof.rows = b.lower_proof.rows;
      s.proof.cols = b.lower_proof.cols;
    }
  }
  if (s.best < eps) detail::prove_lower_bound_at(s, eps, c.sigma);  // on success s.best = eps
  if (s.best > b.error_lower) take_lower_bound(c, dk, s, b);
  return b.error_lower;
}

ApproxBounds bounds_at(Context& c, Index dk, const ApproxOptions& o, Certification how) {
  ApproxBounds out;
  out.n = c.A.rows();
  out.dk = dk;
  upper_bound(c, dk, o, how, out);
  std::vector<detail::LowerSearch> search{lower_search(c, dk, out)};
  detail::search_lower_bounds(search, o.bisection_steps, o.bisection_steps_above, c.sigma);
  take_lower_bound(c, dk, search.front(), out);
  return out;
}

}  // namespace

namespace detail {
std::vector<ApproxBounds> free_lower_bounds(const Matrix<Rational>& A, Index first, Index last,
                                            const std::vector<double>& ceilings, const ApproxOptions& o,
                                            const Mask* mask) {
  validate(A, last);
  Context c(A, last, last + 1, o.memo);
  c.mask = mask;
  std::vector<ApproxBounds> out(static_cast<std::size_t>(last - first + 1));
  std::vector<detail::LowerSearch> searches;
  for (Index dk = first; dk <= last; ++dk) {
    ApproxBounds& b = out[static_cast<std::size_t>(dk - first)];
    b.n = A.rows();
    b.dk = dk;
    b.error_upper = ceilings[static_cast<std::size_t>(dk - first)];
    searches.push_back(lower_search(c, dk, b));
  }
  detail::search_lower_bounds(searches, o.bisection_steps, o.bisection_steps_above, c.sigma);
  for (Index dk = first; dk <= last; ++dk)
    take_lower_bound(c, dk, searches[static_cast<std::size_t>(dk - first)], out[static_cast<std::size_t>(dk - first)]);
  return out;
}

double free_lower_bound_above(const Matrix<Rational>& A, Index dk, double eps, const ApproxOptions& o, const Mask* mask,
                              ApproxBounds& b) {
  validate(A, dk);
  Context c(A, dk, dk + 1, o.memo);
  c.mask = mask;
  return lower_bound_above(c, dk, eps, o, b);
}
}  // namespace detail

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, Index dk, const ApproxOptions& o) {
  validate(A, dk);
  Context c(A, dk, dk + 1, o.memo);
  return bounds_at(c, dk, o, Certification::stated);
}

ApproxBounds approx_error_bounds(const Matrix<Rational>& A, const Matrix<Rational>& X, Index dk,
                                 const ApproxOptions& o) {
  detail::validate_embeddings_question(A, X, dk);
  Embeddings e{X, X.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); }), {}, 0};
  if (e.X.allFinite()) e.pinv = e.X.completeOrthogonalDecomposition().pseudoInverse();
  e.rank = A.rows() - exact_kernel_basis(Matrix<Rational>(X.transpose())).cols();  // exact: N^T X = 0 spans the rest
  Context c(A, dk, std::min(dk, e.rank) + 1, o.memo, &e);
  return bounds_at(c, dk, o, Certification::stated);
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

namespace detail {
void settle_width(WidthResult& out) {
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

bool bracket_open(const WidthResult& w) { return w.width_upper == 0 || w.width_upper > w.width_lower; }

bool search_within_reach(const WidthResult& w, double reach) {
  const Index widest = w.width_upper ? w.width_upper - 1 : w.max_dk;
  if (widest < 1 || widest > static_cast<Index>(w.profile.size())) return false;
  return w.profile[static_cast<std::size_t>(widest - 1)].error_upper <= reach * w.epsilon;
}

void close_bracket_from_below(WidthResult& w, Index& tried, const std::function<double(Index, double)>& lower_toward) {
  if (w.width_upper == 0 || w.width_upper <= w.width_lower || w.width_upper - 1 == tried) return;
  const Index dk = w.width_upper - 1;
  tried = dk;
  WidthProfileEntry& e = w.profile[static_cast<std::size_t>(dk - 1)];
  const double above = std::nextafter(w.epsilon, inf);  // E* >= above > epsilon: d_k misses
  if (!(above < e.error_upper)) return;
  e.error_lower = std::max(e.error_lower, lower_toward(dk, above));  // proven either way
  settle_width(w);
}

void search_open_widths(WidthResult& out, const std::function<double(Index)>& searched_upper) {
  Index lo = out.width_lower, hi = out.width_upper ? out.width_upper - 1 : out.max_dk;
  while (lo <= hi) {
    const Index mid = lo + (hi - lo) / 2;
    const double upper = searched_upper(mid);
    WidthProfileEntry& e = out.profile[static_cast<std::size_t>(mid - 1)];
    e.error_upper = std::min(e.error_upper, upper);
    if (upper <= out.epsilon) hi = mid - 1;
    else lo = mid + 1;
  }
  settle_width(out);
}

void require_width_question(double epsilon, Index max_dk, Index n) {
  if (!(epsilon >= 0 && epsilon <= 1))
    throw input_error("epsilon = " + std::to_string(epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
  if (max_dk < 1 || max_dk > n)
    throw input_error("max d_k = " + std::to_string(max_dk) + " is out of range: 1 <= max d_k <= n = " + std::to_string(n));
}
}  // namespace detail

WidthResult approx_width(const Matrix<Rational>& A, double epsilon, Index max_dk, const ApproxOptions& o) {
  validate(A, 1);
  const Index n = A.rows();
  if (max_dk == 0) max_dk = n;
  detail::require_width_question(epsilon, max_dk, n);
  // One certified SVD of the centered log serves every width: the lower bounds
  // below min Â, and through its vectors every width's start.
  Context c(A, max_dk, max_dk + 1, o.memo);
  WidthResult out;
  out.epsilon = epsilon;
  out.max_dk = max_dk;
  // First every width from its start alone, certified in doubles: the bracket.
  // The starts' errors are estimated in doubles on the cores (widths are
  // independent); only a start whose estimate improves on every narrower one is
  // certified (the others could not lower the profile: E* is non-increasing in
  // d_k, so a narrower width's bound holds). The lower bounds search together:
  // most of their points serve every width.
  const TruncatedSvd svd = c.start_svds(false).front();  // a copy: the search adds starts later
  std::vector<Witness> starts(static_cast<std::size_t>(max_dk));
  std::vector<double> estimate(static_cast<std::size_t>(max_dk));
  constexpr double worth_threads = 1e9;  // each width is ~1 ms of double work: always deal them out
  detail::for_row_blocks(static_cast<long>(max_dk), worth_threads, [&](long begin, long end) {
    for (long k = begin; k < end; ++k) {
      starts[static_cast<std::size_t>(k)] = start_at(svd, std::min<Index>(k + 1, n));
      estimate[static_cast<std::size_t>(k)] = approx_witness_error(c.T, starts[static_cast<std::size_t>(k)]);
    }
  });
  std::vector<long> improving;
  double best_estimate = inf;
  for (long k = 0; k < static_cast<long>(max_dk); ++k)
    if (estimate[static_cast<std::size_t>(k)] < best_estimate) {
      improving.push_back(k);
      best_estimate = estimate[static_cast<std::size_t>(k)];
    }
  std::vector<ApproxBounds> bounds(static_cast<std::size_t>(max_dk));
  detail::for_row_blocks(static_cast<long>(improving.size()), worth_threads, [&](long begin, long end) {
    for (long t = begin; t < end; ++t) {
      const std::size_t k = static_cast<std::size_t>(improving[static_cast<std::size_t>(t)]);
      Witness& w = starts[k];
      w.error_bits = 53;  // doubles and directed rounding
      w.max_abs_error = fast_certified_witness_error(c.bounds, w.Q, w.K);
      bounds[k].start_error = bounds[k].error_upper = w.max_abs_error;
      bounds[k].witness = std::move(w);
    }
  });
  std::vector<detail::LowerSearch> searches;
  double carried = inf;  // the best certified error at any width so far: holds at dk too
  for (Index dk = 1; dk <= max_dk; ++dk) {
    ApproxBounds& b = bounds[static_cast<std::size_t>(dk - 1)];
    b.n = n;
    b.dk = dk;
    carried = std::min(carried, b.error_upper);
    searches.push_back(lower_search(c, dk, b));
    searches.back().ceiling = std::min(carried, 1.0);
  }
  detail::search_lower_bounds(searches, o.bisection_steps, o.bisection_steps_above, c.sigma);
  for (Index dk = 1; dk <= max_dk; ++dk) {
    ApproxBounds& b = bounds[static_cast<std::size_t>(dk - 1)];
    take_lower_bound(c, dk, searches[static_cast<std::size_t>(dk - 1)], b);
    out.profile.push_back({dk, b.error_lower, b.error_upper});
  }
  detail::settle_width(out);
  out.start_width_upper = out.width_upper;
  // Where a witness is within epsilon at width_upper, the width below it is asked
  // directly whether it misses (a refined rectangle at epsilon itself): when it
  // does, the bracket closes with no search.
  Index tried = 0;
  const auto close = [&] {
    detail::close_bracket_from_below(out, tried, [&](Index dk, double eps) {
      ApproxBounds& b = bounds[static_cast<std::size_t>(dk - 1)];
      b.error_upper = out.profile[static_cast<std::size_t>(dk - 1)].error_upper;
      return lower_bound_above(c, dk, eps, o, b);
    });
  };
  close();
  // Then the search, where it can lower width_upper; each result certified in doubles.
  const auto search = [&](const ApproxOptions& options) {
    detail::search_open_widths(out, [&](Index dk) {
      ApproxBounds b;
      upper_bound(c, dk, options, Certification::doubles, b);
      return b.error_upper;
    });
    close();
  };
  if (o.optimise && detail::bracket_open(out)) search(o);
  out.first_search_width_upper = out.width_upper;
  if (o.then_search && detail::bracket_open(out) &&
      (o.then_search_reach <= 0 || detail::search_within_reach(out, o.then_search_reach)))
    search(*o.then_search);
  return out;
}

void add_band(WidthResult& w, Index dk, double error_lower, double error_upper) {
  if (dk < 1 || w.profile.empty()) return;
  if (dk > w.max_dk) {  // beyond the profile: its lower bound holds for every listed width
    w.profile.back().error_lower = std::max(w.profile.back().error_lower, error_lower);
  } else {
    WidthProfileEntry& e = w.profile[static_cast<std::size_t>(dk - 1)];
    e.error_lower = std::max(e.error_lower, error_lower);
    e.error_upper = std::min(e.error_upper, error_upper);
  }
  detail::settle_width(w);
}

}  // namespace attnrank
