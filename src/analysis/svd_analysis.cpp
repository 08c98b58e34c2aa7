// The singular-value analysis and its writers (analysis/svd_analysis.hpp).
#include <attnrank/analysis/svd_analysis.hpp>

#include <attnrank/analysis/detail/matrix_text.hpp>
#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/io/double_tensor.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

namespace attnrank {

using nlohmann::json;

namespace {

/// analyze_svd on a rows x cols matrix that `certify(top)` certifies (a ball of
/// doubles, or the double matrix itself without a copy).
template <class Certify>
SvdAnalysis analyze_svd_with(Eigen::Index rows, Eigen::Index cols, const SvdQuestion& q, const Certify& certify) {
  const Eigen::Index p = std::min(rows, cols);
  const Eigen::Index top = q.top.value_or(p);
  if (top < 1 || top > p)
    throw input_error("top " + std::to_string(top) + " is out of range: " + q.matrix_name + " is " +
                      std::to_string(rows) + " x " + std::to_string(cols) + ", so 1 <= K <= " + std::to_string(p));
  SvdAnalysis out;
  out.rows = rows;
  out.cols = cols;
  out.top = top;
  out.gaps = q.gaps;
  out.matrix_name = q.matrix_name;
  try {
    out.values = certify(top);
  } catch (const input_error& e) {
    if (e.row() == 0) throw;
    throw input_error(entry_text(q.matrix_name, e.row() - 1, e.column() - 1) +
                          " is beyond the double range (certified singular values work on balls of doubles)",
                      q.matrix_name, e.row(), e.column());
  }
  out.gap_lower = certified_gaps(out.values);
  guard_result(out);
  return out;
}

}  // namespace

namespace {

// Singular values are scale-free: sigma(2^k A) = 2^k sigma(A). A matrix far from 1 in size
// (entries near 1e-200 or 1e200) is certified as 2^k A with its largest entry near 1, where
// the bounds' absolute terms (underflow, gamma_n's) are as small relative to sigma_1 as for
// any well-scaled matrix, and the bounds are scaled back, rounded outward.
constexpr int rescale_beyond = 64;  // |log2 of the largest entry| above which the matrix is rescaled

/// 2^k x rounded up (`up`) or down: two exact-factor products in directed rounding (each
/// factor 2^(k/2) is a normal double for |k| <= 2044; the scales here stay within 1100),
/// so the result is a bound even where it leaves the normal range.
double times_power_of_two(double x, int k, bool up) {
  const double a = std::ldexp(1.0, k / 2), b = std::ldexp(1.0, k - k / 2);
  double r;
  if (up) {
    UpwardRounding rounding;
    r = x * a;
    detail::rounding_barrier(r);
    r = r * b;
    detail::rounding_barrier(r);
  } else {
    DownwardRounding rounding;
    r = x * a;
    detail::rounding_barrier(r);
    r = r * b;
    detail::rounding_barrier(r);
  }
  return r;
}

/// The bounds of 2^k A's singular values as bounds of A's (k the scale applied).
CertifiedSingularValues unscaled(CertifiedSingularValues v, int k) {
  if (k == 0) return v;
  for (SingularValueBounds& b : v.values) {
    b.lower = times_power_of_two(b.lower, -k, false);
    b.upper = times_power_of_two(b.upper, -k, true);
  }
  v.residual = times_power_of_two(v.residual, -k, true);
  return v;
}

/// The k that brings A's largest |entry| near 1 (2^k max |a| in [1/2, 1)), or 0 when A is
/// within 2^+-64 of 1 or zero.
int unit_scale(const Eigen::MatrixXd& A) {
  const double largest = A.cwiseAbs().maxCoeff();
  if (largest == 0 || !std::isfinite(largest)) return 0;
  const int e = std::ilogb(largest);
  return std::abs(e) <= rescale_beyond ? 0 : -e - 1;
}

/// The same for rationals (always exact): log2 of the largest |entry|, within one.
int rational_unit_scale(const Matrix<Rational>& A) {
  long e = LONG_MIN;
  for (Eigen::Index j = 0; j < A.cols(); ++j)
    for (Eigen::Index i = 0; i < A.rows(); ++i) {
      mpq_srcptr x = A(i, j).backend().data();
      if (mpq_sgn(x) == 0) continue;
      e = std::max(e, static_cast<long>(mpz_sizeinbase(mpq_numref(x), 2)) -
                          static_cast<long>(mpz_sizeinbase(mpq_denref(x), 2)));
    }
  if (e == LONG_MIN || std::labs(e) <= rescale_beyond) return 0;
  return static_cast<int>(std::clamp(-e, -1000L, 1000L));  // times_power_of_two's factors stay doubles
}

}  // namespace

SvdAnalysis analyze_svd(const Matrix<Rational>& A, const SvdQuestion& q) {
  const int k = rational_unit_scale(A);
  Matrix<Rational> scaled;
  if (k != 0) {
    scaled = A;
    for (Eigen::Index j = 0; j < A.cols(); ++j)
      for (Eigen::Index i = 0; i < A.rows(); ++i) {
        mpq_ptr x = scaled(i, j).backend().data();
        if (k > 0) mpq_mul_2exp(x, x, static_cast<mp_bitcnt_t>(k));
        else mpq_div_2exp(x, x, static_cast<mp_bitcnt_t>(-k));
      }
  }
  const BallMatrix balls = to_ball(k != 0 ? scaled : A);
  return analyze_svd_with(A.rows(), A.cols(), q,
                          [&](Eigen::Index top) { return unscaled(certified_singular_values(balls, top), k); });
}

SvdAnalysis analyze_svd(const Eigen::MatrixXd& A, const SvdQuestion& q) {
  if (!A.allFinite()) return analyze_svd(exact_of_doubles(A, q.matrix_name), q);  // exact_of_doubles names the entry
  if (const int k = unit_scale(A); k != 0) {
    // 2^k A is exact unless scaling down pushes an entry below the normal range; such an
    // entry's rounding (at most 2^-1075) goes into a ball's radius, so the bounds hold for 2^k A.
    BallMatrix scaled{A.unaryExpr([k](double x) { return std::ldexp(x, k); }), Eigen::MatrixXd()};
    const Eigen::MatrixXd back = scaled.mid.unaryExpr([k](double x) { return std::ldexp(x, -k); });
    if (back == A)
      return analyze_svd_with(A.rows(), A.cols(), q,
                              [&](Eigen::Index top) { return unscaled(certified_singular_values(scaled.mid, top), k); });
    scaled.rad = (back.array() == A.array()).select(0.0, Eigen::MatrixXd::Constant(A.rows(), A.cols(), 0x1p-1074));
    return analyze_svd_with(A.rows(), A.cols(), q,
                            [&](Eigen::Index top) { return unscaled(certified_singular_values(scaled, top), k); });
  }
  return analyze_svd_with(A.rows(), A.cols(), q, [&](Eigen::Index top) { return certified_singular_values(A, top); });
}

SvdAnalysis analyze_svd_argument(const std::string& argument, const SvdQuestion& q, const ParseLimits& limits,
                                 InputNotes* notes) {
  if (const std::optional<Eigen::MatrixXd> d = read_binary_doubles(argument, limits)) return analyze_svd(*d, q);
  return analyze_svd(read_matrix_argument(argument, limits, notes), q);
}

json to_json(const SvdAnalysis& s) {
  json values = json::array();
  for (const SingularValueBounds& v : s.values.values)
    values.push_back({{"lower", detail::bound_json(v.lower, false)}, {"upper", detail::bound_json(v.upper, true)}});
  json j{{"rows", s.rows},
         {"cols", s.cols},
         {"top", s.top},
         {"singular_values", values},
         {"basis", s.values.full ? "full" : "truncated"},
         {"residual", detail::bound_json(s.values.residual, true)},
         {"orthogonality", detail::bound_json(s.values.orthogonality, true)}};
  if (s.gaps) {
    json g = json::array();
    for (double x : s.gap_lower) g.push_back(x > 0 ? detail::bound_json(x, false) : json(nullptr));
    j["gaps"] = g;
  }
  return json_document(j, "svd");
}

std::string to_text(const SvdAnalysis& s) {
  std::ostringstream t;
  t << "top " << s.top << " singular values of " << s.matrix_name << " (" << s.rows << " x " << s.cols
    << "), certified: lower <= sigma_i <= upper\n";
  for (std::size_t i = 0; i < s.values.values.size(); ++i) {
    t << "  sigma_" << i + 1 << " in [" << detail::bound_text(s.values.values[i].lower, false) << ", "
      << detail::bound_text(s.values.values[i].upper, true) << "]";
    if (s.gaps && i < s.gap_lower.size())
      t << (s.gap_lower[i] > 0 ? "   gap to sigma_" + std::to_string(i + 2) + " >= " + detail::bound_text(s.gap_lower[i], false)
                               : "   not separated from sigma_" + std::to_string(i + 2));
    t << "\n";
  }
  t << "  proof: U^T A V - diag(s) has 2-norm <= " << format_upper_bound(s.values.residual)
    << " and the bases are within " << format_upper_bound(s.values.orthogonality) << " of orthonormal (directed rounding, "
    << (s.values.full ? "full" : "truncated") << " SVD basis)";
  if (!s.values.full) t << "; upper bounds are norms of the remainders (sound, loose above n = 1024)";
  t << "\n";
  return t.str();
}


}  // namespace attnrank
