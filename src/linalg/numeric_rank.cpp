// The numeric (uncertified) singular values and ranks of attnrank/linalg/numeric_rank.hpp.
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/linalg/detail/dense_decompositions.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/numbers/directed_rounding.hpp>

#include <Eigen/QR>
#include <Spectra/SymEigsSolver.h>

#include <optional>
#include <random>

#include <algorithm>
#include <barrier>
#include <exception>
#include <vector>
#include <cmath>
#include <limits>
#include <string>

namespace attnrank {
namespace detail {

void require_finite(const Eigen::MatrixXd& A, const char* what) {
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j)
      if (!std::isfinite(A(i, j)))
        throw input_error(std::string(what) + ": " + entry_text("the matrix", static_cast<long>(i), static_cast<long>(j)) +
                          " is not a finite number");
}

/// y = A^T (A x) for a tall A (or A (A^T x) for a wide one): the Gram matrix as a
/// Spectra operator, without forming it (forming it costs a GEMM that Lanczos
/// rarely earns back). A large A is split into two blocks of columns (contiguous
/// in Eigen's storage), one per thread: Eigen's GEMV uses one core, and the two
/// GEMVs are bound by memory bandwidth, which a second core adds to (2048 x 2048:
/// 1.7 -> 0.9 ms an application, measured).
class GramOperator {
 public:
  using Scalar = double;
  explicit GramOperator(const Eigen::MatrixXd& A)
      : A_(A),
        tall_(A.rows() >= A.cols()),
        // Only with two threads at hand: the tall split meets at a barrier, which one
        // thread running both halves in turn would never pass.
        split_(!serial_directed_products && row_threads() >= 2 && A.cols() >= 2 &&
               static_cast<double>(A.rows()) * static_cast<double>(A.cols()) >= 1 << 20) {}
  Eigen::Index rows() const { return tall_ ? A_.cols() : A_.rows(); }
  Eigen::Index cols() const { return rows(); }
  void perform_op(const double* x_in, double* y_out) const {
    const Eigen::Index d = rows(), m = A_.rows(), n = A_.cols();
    Eigen::Map<const Eigen::VectorXd> x(x_in, d);
    Eigen::Map<Eigen::VectorXd> y(y_out, d);
    if (!split_) {
      if (tall_) y.noalias() = A_.transpose() * (A_ * x).eval();
      else y.noalias() = A_ * (A_.transpose() * x).eval();
      return;
    }
    const Eigen::Index half = n / 2;
    const auto first = [&](int part) { return part == 0 ? Eigen::Index{0} : half; };
    const auto count = [&](int part) { return part == 0 ? half : n - half; };
    if (tall_) {
      // A x = A_0 x_0 + A_1 x_1; then each half of y is A_j^T (A x). Both threads
      // meet at the barrier even when one fails, so neither waits forever.
      Eigen::VectorXd t[2] = {Eigen::VectorXd(m), Eigen::VectorXd(m)}, sum[2] = {Eigen::VectorXd(m), Eigen::VectorXd(m)};
      std::barrier meet(2);
      const auto half_of_y = [&](int part) {
        const auto block = A_.middleCols(first(part), count(part));
        std::exception_ptr failure;
        try {
          t[part].noalias() = block * x.segment(first(part), count(part));
        } catch (...) {
          failure = std::current_exception();
        }
        meet.arrive_and_wait();
        if (failure) std::rethrow_exception(failure);
        sum[part].noalias() = t[0] + t[1];
        y.segment(first(part), count(part)).noalias() = block.transpose() * sum[part];
      };
      run_side_by_side([&] { half_of_y(1); }, [&] { half_of_y(0); });
      return;
    }
    // A^T x in two independent halves; then y = A_0 (A_0^T x) + A_1 (A_1^T x).
    Eigen::VectorXd partial[2];
    const auto half_of_sum = [&](int part) {
      const auto block = A_.middleCols(first(part), count(part));
      const Eigen::VectorXd t = block.transpose() * x;
      partial[part].noalias() = block * t;
    };
    run_side_by_side([&] { half_of_sum(1); }, [&] { half_of_sum(0); });
    y = partial[0] + partial[1];
  }

 private:
  const Eigen::MatrixXd& A_;
  bool tall_;
  bool split_;
};

/// out = A B, or A^T B when `transpose_a`, with B's columns split over two
/// threads when the product is large (Eigen's GEMM alone uses one core here).
/// Numeric only: no rounding mode is set, the caller's is inherited.
void two_thread_product(Eigen::MatrixXd& out, const Eigen::MatrixXd& A, const Eigen::MatrixXd& B, bool transpose_a) {
  out.resize(transpose_a ? A.cols() : A.rows(), B.cols());
  const auto part = [&](Eigen::Index first, Eigen::Index count) {
    if (transpose_a) out.middleCols(first, count).noalias() = A.transpose() * B.middleCols(first, count);
    else out.middleCols(first, count).noalias() = A * B.middleCols(first, count);
  };
  const double work = static_cast<double>(A.rows()) * static_cast<double>(A.cols()) * static_cast<double>(B.cols());
  if (serial_directed_products || B.cols() < 2 || work < 4e6) {
    part(0, B.cols());
    return;
  }
  const Eigen::Index half = B.cols() / 2;
  run_side_by_side([&] { part(half, B.cols() - half); }, [&] { part(0, half); });
}

}  // namespace detail

DoubleConversion approx_to_double(const Matrix<Rational>& A, const std::string& source) {
  DoubleConversion out;
  out.values.resize(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      const double d = scalar_traits<double>::from_rational(A(i, j));
      if (!std::isfinite(d))
        throw input_error(entry_text(source, static_cast<long>(i), static_cast<long>(j)) + " = " +
                          format_significant(A(i, j), 3) +
                          " is beyond the double range; numeric mode needs doubles (the exact and certified modes do not)");
      if (A(i, j) != 0 && !std::isnormal(d) && out.underflows++ == 0) {
        out.first_row = i;
        out.first_col = j;
        out.first_value = format_significant(A(i, j), 3);
      }
      out.values(i, j) = d;
    }
  return out;
}

ApproxRank approx_rank(const Eigen::MatrixXd& A, std::optional<double> tolerance) {
  detail::require_finite(A, "numeric rank");
  if (tolerance && !(*tolerance >= 0)) throw input_error("numeric rank: the tolerance must be >= 0");
  ApproxRank out;
  if (A.size() == 0) {
    out.gap = std::numeric_limits<double>::infinity();
    return out;
  }
  out.singular_values = Eigen::BDCSVD<Eigen::MatrixXd>(A).singularValues();
  // Eigen 3.4's BDCSVD can return NaN on degenerate input (dense_truncated_svd);
  // JacobiSVD is slower and robust.
  if (!out.singular_values.allFinite()) out.singular_values = Eigen::JacobiSVD<Eigen::MatrixXd>(A).singularValues();
  const Eigen::VectorXd& s = out.singular_values;
  out.tolerance = tolerance ? *tolerance : default_rank_tolerance(s(0), A.rows(), A.cols());
  while (out.rank < s.size() && s(out.rank) > out.tolerance) ++out.rank;
  if (out.rank == s.size() || s(out.rank) == 0)
    out.gap = out.rank == 0 ? 0 : std::numeric_limits<double>::infinity();
  else
    out.gap = out.rank == 0 ? 0 : s(out.rank - 1) / s(out.rank);
  return out;
}

namespace detail {

/// The k leading eigenpairs of the Gram operator by Lanczos, or nothing when
/// Spectra fails (it throws on some breakdowns, e.g. "TridiagEigen: eigen
/// decomposition failed" for n - 1 equal singular values), does not converge,
/// or returns vectors that are not orthonormal eigenvectors to 1e-8.
std::optional<TruncatedSvd> lanczos_truncated_svd(const Eigen::MatrixXd& A, Eigen::Index k, Eigen::Index ncv) {
  const bool tall = A.rows() >= A.cols();
  GramOperator op(A);
  try {
    Spectra::SymEigsSolver<GramOperator> eigs(op, k, ncv);
    eigs.init();
    const Eigen::Index converged = eigs.compute(Spectra::SortRule::LargestAlge, 1000, 1e-10);
    if (eigs.info() != Spectra::CompInfo::Successful || converged < k) return std::nullopt;
    const Eigen::VectorXd lambda = eigs.eigenvalues();
    const Eigen::MatrixXd W = eigs.eigenvectors();
    if (!lambda.allFinite() || !W.allFinite()) return std::nullopt;
    const double top = std::max(lambda.cwiseAbs().maxCoeff(), std::numeric_limits<double>::min());
    if ((W.transpose() * W - Eigen::MatrixXd::Identity(k, k)).cwiseAbs().maxCoeff() > 1e-8) return std::nullopt;
    // The eigen-residuals and the other side's vectors from two GEMMs (A W, then
    // A^T (A W)) rather than 2k matrix-vector products: each reads A once.
    Eigen::MatrixXd AW, gram_W;
    two_thread_product(AW, A, W, !tall);
    two_thread_product(gram_W, A, AW, tall);
    for (Eigen::Index t = 0; t < k; ++t)
      if ((gram_W.col(t) - lambda(t) * W.col(t)).norm() > 1e-8 * top) return std::nullopt;
    // Rayleigh-Ritz on span(W): with W = Q R (Householder), A Q = (A W) R^-1, and
    // its thin SVD P S T^T gives the triplets (P, S, Q T). Both bases are then
    // orthonormal, and P^T A (Q T) = S, to rounding, where Lanczos's own vectors
    // keep about its tolerance (1e-10) in both: what bounds certified on these
    // triplets lose (sigma_1 of a 2048 x 2048 score matrix: 3e-11 relative).
    const Eigen::HouseholderQR<Eigen::MatrixXd> qr(W);
    const Eigen::MatrixXd Q = qr.householderQ() * Eigen::MatrixXd::Identity(W.rows(), k);
    const Eigen::MatrixXd R = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
    const Eigen::MatrixXd AQ = R.triangularView<Eigen::Upper>().solve<Eigen::OnTheRight>(AW);
    Eigen::BDCSVD<Eigen::MatrixXd> small(AQ, Eigen::ComputeThinU | Eigen::ComputeThinV);
    if (!small.singularValues().allFinite() || !small.matrixU().allFinite() || !small.matrixV().allFinite()) return std::nullopt;
    TruncatedSvd out;
    out.method = "lanczos";
    out.s = small.singularValues();
    (tall ? out.U : out.V) = small.matrixU();
    (tall ? out.V : out.U) = Q * small.matrixV();
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool all_finite(const TruncatedSvd& t) { return t.U.allFinite() && t.V.allFinite() && t.s.allFinite(); }

/// Leading triplets from a full decomposition. Eigen 3.4's BDCSVD returns NaN
/// for some degenerate inputs (the 512 x 512 "attention sink" log matrix, rank 1
/// with equal rows), so its output is checked; the fallbacks are JacobiSVD
/// (small matrices) and the symmetric eigensolver on the Gram matrix (squares
/// the condition number, fine for the leading triplets).
TruncatedSvd dense_truncated_svd(const Eigen::MatrixXd& A, Eigen::Index k, std::string method) {
  TruncatedSvd out;
  {
    const Eigen::BDCSVD<Eigen::MatrixXd> svd(A, Eigen::ComputeThinU | Eigen::ComputeThinV);
    out = {svd.matrixU().leftCols(k), svd.matrixV().leftCols(k), svd.singularValues().head(k), method};
  }
  if (all_finite(out)) return out;
  if (std::min(A.rows(), A.cols()) <= 400) {
    const Eigen::JacobiSVD<Eigen::MatrixXd> svd(A, Eigen::ComputeThinU | Eigen::ComputeThinV);
    return {svd.matrixU().leftCols(k), svd.matrixV().leftCols(k), svd.singularValues().head(k), method + " (Jacobi)"};
  }
  const bool tall = A.rows() >= A.cols();
  const Eigen::MatrixXd G = tall ? Eigen::MatrixXd(A.transpose() * A) : Eigen::MatrixXd(A * A.transpose());
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(G);
  out.method = method + " (Gram eigensolver)";
  out.s = eig.eigenvalues().reverse().head(k).cwiseMax(0.0).cwiseSqrt();
  const Eigen::MatrixXd W = eig.eigenvectors().rightCols(k).rowwise().reverse();
  (tall ? out.V : out.U) = W;
  Eigen::MatrixXd& other = tall ? out.U : out.V;
  other = (tall ? Eigen::MatrixXd(A * W) : Eigen::MatrixXd(A.transpose() * W));
  for (Eigen::Index t = 0; t < k; ++t) {
    if (out.s(t) > 0) other.col(t) /= out.s(t);
    else other.col(t).setZero();
  }
  return out;
}

/// Orthonormal basis of the columns of Y (thin Householder QR).
Eigen::MatrixXd orthonormal_basis(const Eigen::MatrixXd& Y) {
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(Y);
  return qr.householderQ() * Eigen::MatrixXd::Identity(Y.rows(), Y.cols());
}

/// Randomised subspace iteration (Halko, Martinsson & Tropp 2011): a range
/// basis from A times a fixed pseudo-random block (seeded: the same answer every
/// run), two power steps, then the SVD of the small projected matrix. Exact
/// up to rounding when rank A <= k, and robust where Lanczos breaks down (equal
/// or clustered singular values, rank 1).
TruncatedSvd randomized_truncated_svd(const Eigen::MatrixXd& A, Eigen::Index k) {
  const Eigen::Index d = std::min(A.rows(), A.cols());
  const Eigen::Index l = std::min(d, k + 10);
  std::mt19937_64 rng(20261201);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd omega(A.cols(), l);
  for (Eigen::Index j = 0; j < l; ++j)
    for (Eigen::Index i = 0; i < A.cols(); ++i) omega(i, j) = normal(rng);
  Eigen::MatrixXd Q = orthonormal_basis(A * omega);
  for (int step = 0; step < 2; ++step) Q = orthonormal_basis(A * orthonormal_basis(A.transpose() * Q));
  const Eigen::MatrixXd B = Q.transpose() * A;  // l x n
  TruncatedSvd small = dense_truncated_svd(B, k, "randomized");
  small.U = Q * small.U;
  return small;
}

}  // namespace detail

TruncatedSvd approx_truncated_svd(const Eigen::MatrixXd& A, Eigen::Index k) {
  detail::require_finite(A, "truncated SVD");
  const Eigen::Index d = std::min(A.rows(), A.cols());
  if (k < 0 || k > d)
    throw input_error("truncated SVD: k = " + std::to_string(k) + " must be in [0, " + std::to_string(d) + "]");
  // Lanczos pays off when k is small against the size; Spectra needs k < ncv <= d.
  if (d > 300 && 2 * k < d && k >= 1) {
    for (const Eigen::Index ncv : {std::max<Eigen::Index>(2 * k + 1, 20), std::max<Eigen::Index>(4 * k + 40, 80)}) {
      if (const auto lanczos = detail::lanczos_truncated_svd(A, k, std::min(d, ncv))) return *lanczos;
    }
    TruncatedSvd r = detail::randomized_truncated_svd(A, k);
    if (detail::all_finite(r)) return r;
    return detail::dense_truncated_svd(A, k, "dense after lanczos and randomized failed");
  }
  return detail::dense_truncated_svd(A, k, "dense");
}

TopSingularValues approx_top_singular_values(const Eigen::MatrixXd& A, Eigen::Index k) {
  detail::require_finite(A, "top singular values");
  const Eigen::Index d = std::min(A.rows(), A.cols());
  if (k < 1 || k >= d)
    throw input_error("top singular values: k = " + std::to_string(k) + " must be in [1, " + std::to_string(d - 1) +
                      "] for a " + std::to_string(A.rows()) + " x " + std::to_string(A.cols()) +
                      " matrix (use approx_rank for all of them)");
  // Spectra needs k < ncv <= d; about 2k + 1 is its usual advice.
  for (const Eigen::Index ncv : {std::max<Eigen::Index>(2 * k + 1, 20), std::max<Eigen::Index>(4 * k + 40, 80)}) {
    if (const auto lanczos = detail::lanczos_truncated_svd(A, k, std::min(d, ncv))) {
      TopSingularValues out;
      out.values = lanczos->s;
      out.converged = k;
      return out;
    }
  }
  TopSingularValues out;
  out.values = detail::dense_truncated_svd(A, k, "dense").s;
  out.converged = k;
  return out;
}

namespace {
/// Eckart-Young from ||A||_F^2 and sigma_1 .. sigma_(k+1) (descending).
LowRankDistance low_rank_distance_from(double frobenius2, const Eigen::VectorXd& s, Eigen::Index k) {
  LowRankDistance out;
  out.spectral = s(k);
  // ||A - A_k||_F^2 = ||A||_F^2 - sum_(i<=k) sigma_i^2; clamp the rounding below 0.
  out.frobenius = std::sqrt(std::max(0.0, frobenius2 - s.head(k).squaredNorm()));
  return out;
}
}  // namespace

LowRankDistance approx_low_rank_distance(const Eigen::MatrixXd& A, Eigen::Index k) {
  const Eigen::Index d = std::min(A.rows(), A.cols());
  if (k < 0 || k >= d)
    throw input_error("low-rank distance: k = " + std::to_string(k) + " must be in [0, " + std::to_string(d - 1) + "]");
  detail::require_finite(A, "low-rank distance");
  const double frobenius2 = A.squaredNorm();
  Eigen::VectorXd s;
  if (k + 1 < d) {
    s = approx_top_singular_values(A, k + 1).values;
  } else {
    s = Eigen::BDCSVD<Eigen::MatrixXd>(A).singularValues();
  }
  return low_rank_distance_from(frobenius2, s, k);
}

double default_rank_tolerance(double sigma_max, Eigen::Index rows, Eigen::Index cols) {
  return sigma_max * static_cast<double>(std::max(rows, cols)) * std::numeric_limits<double>::epsilon();
}

TopRankBounds approx_rank_from_top(const Eigen::MatrixXd& A, Eigen::Index k, std::optional<double> tolerance) {
  const Eigen::Index d = std::min(A.rows(), A.cols());
  if (k < 1 || k + 1 >= d)
    throw input_error("numeric rank from the top singular values: k = " + std::to_string(k) +
                      " needs 1 <= k and k + 1 < min(rows, cols) = " + std::to_string(d));
  if (tolerance && !(*tolerance >= 0)) throw input_error("numeric rank: the tolerance must be >= 0");
  TopRankBounds out;
  out.top = approx_top_singular_values(A, k + 1);
  out.distance = low_rank_distance_from(A.squaredNorm(), out.top.values, k);  // one Lanczos run for both
  out.tolerance = tolerance ? *tolerance : default_rank_tolerance(out.top.values(0), A.rows(), A.cols());
  Eigen::Index above = 0;
  while (above < out.top.values.size() && out.top.values(above) > out.tolerance) ++above;
  out.lower = std::min<Eigen::Index>(above, k + 1);
  out.upper = above <= k ? above : d;
  return out;
}

}  // namespace attnrank
