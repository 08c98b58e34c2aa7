// The rank, determinant and singular-value analyses and their writers
// (analysis/rank_analysis.hpp, det_analysis.hpp, svd_analysis.hpp).
#include <attnrank/analysis/det_analysis.hpp>
#include <attnrank/analysis/rank_analysis.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/analysis/svd_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/io/double_tensor.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

namespace attnrank {
namespace {

using nlohmann::json;

std::vector<Eigen::Index> one_based(const std::vector<Eigen::Index>& v) {
  std::vector<Eigen::Index> out(v);
  for (auto& x : out) ++x;
  return out;
}

std::string dimensions_text(Eigen::Index rows, Eigen::Index cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

std::string short_double(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}

std::string exact_text(const Rational& q) {
  std::ostringstream s;
  s << q;  // "p/q" or an integer
  return s.str();
}

/// A proven bound printed so that the text is still that bound (lower ends
/// rounded down, upper ends up), to 17 significant digits: every double's worth.
std::string bound_text(double x, bool up) {
  if (std::isinf(x)) return "inf";
  return up ? format_upper_bound(x, 17) : format_lower_bound(x, 17);
}

json bound_json(double x, bool up) { return std::isinf(x) ? json(nullptr) : json(bound_text(x, up)); }

}  // namespace

RankMode parse_rank_mode(const std::string& name) {
  if (name == "exact") return RankMode::exact;
  if (name == "certified") return RankMode::certified;
  if (name == "numeric") return RankMode::numeric;
  throw input_error("mode '" + name + "' is not exact, certified or numeric");
}

bool det_mode_is_certified(const std::string& mode) {
  if (mode == "exact") return false;
  if (mode == "certified") return true;
  throw input_error("mode '" + mode + "' is not exact or certified");
}

const char* to_string(RankMode m) {
  return m == RankMode::exact ? "exact" : m == RankMode::certified ? "certified" : "numeric";
}

namespace {

void check_rank_options(const RankQuestion& q) {
  if (q.mode != RankMode::numeric && (q.top > 0 || q.tolerance))
    throw input_error("top and tol belong to the numeric mode");
  if (q.mode != RankMode::certified && q.bits != 53) throw input_error("bits belongs to the certified mode");
  if (q.tolerance && !(*q.tolerance >= 0 && std::isfinite(*q.tolerance)))
    throw input_error("tolerance " + std::to_string(*q.tolerance) + " is not a finite number >= 0");
}


}  // namespace

RankAnalysis analyze_rank(const Matrix<Rational>& A, const RankQuestion& q) {
  check_rank_options(q);
  RankAnalysis out;
  out.mode = q.mode;
  out.rows = A.rows();
  out.cols = A.cols();
  if (q.mode == RankMode::exact) {
    out.exact = exact_rank(A);
  } else if (q.mode == RankMode::certified) {
    out.certified = certified_rank(A, q.bits);
  } else {
    const DoubleConversion converted = approx_to_double(A, q.matrix_name);
    if (converted.underflows > 0)
      out.notes.push_back(std::to_string(converted.underflows) +
                          (converted.underflows == 1 ? " nonzero entry is" : " nonzero entries are") +
                          " below the normal double range and rounded to 0 or to a subnormal (first: " +
                          entry_text(q.matrix_name, static_cast<long>(converted.first_row), static_cast<long>(converted.first_col)) +
                          " = " + converted.first_value + "); numeric mode works in doubles, the exact and certified modes do not");
    if (q.top > 0) {
      const Eigen::Index d = std::min(A.rows(), A.cols());
      if (q.top + 1 >= d)
        throw input_error("top " + std::to_string(q.top) + " needs top + 1 < min(rows, cols) = " + std::to_string(d) +
                          " (leave top out for all singular values)");
      out.top = q.top;
      out.numeric_top = approx_rank_from_top(converted.values, q.top, q.tolerance);
    } else {
      out.numeric = approx_rank(converted.values, q.tolerance);
    }
  }
  guard_result(out);
  return out;
}

RankAnalysis analyze_rank(const Eigen::MatrixXd& A, const RankQuestion& q) {
  if (q.mode != RankMode::certified || q.bits > 53 || !A.allFinite()) return analyze_rank(exact_of_doubles(A, q.matrix_name), q);
  check_rank_options(q);
  RankAnalysis out;
  out.mode = q.mode;
  out.rows = A.rows();
  out.cols = A.cols();
  out.certified = certified_rank(A);
  guard_result(out);
  return out;
}

RankAnalysis analyze_rank_argument(const std::string& argument, const RankQuestion& q, const ParseLimits& limits,
                                   InputNotes* notes) {
  if (q.mode == RankMode::certified && q.bits <= 53) {
    if (const std::optional<Eigen::MatrixXd> d = read_binary_doubles(argument, limits)) return analyze_rank(*d, q);
    // Decimal text: its one-ulp balls prove full rank as the exact route's first
    // test would; when they do not, the exact route's double-double balls may.
    InputNotes seen;
    if (const std::optional<BallMatrix> b = read_plain_decimal_balls(argument, limits, &seen))
      if (std::optional<CertifiedRank> full = certified_full_rank_by_one_stage(*b)) {
        check_rank_options(q);
        if (notes) notes->insert(notes->end(), seen.begin(), seen.end());
        RankAnalysis out;
        out.mode = q.mode;
        out.rows = b->mid.rows();
        out.cols = b->mid.cols();
        out.certified = std::move(*full);
        return out;
      }
  }
  return analyze_rank(read_matrix_argument(argument, limits, notes), q);
}

json to_json(const RankAnalysis& r) {
  json j{{"mode", to_string(r.mode)}, {"rows", r.rows}, {"cols", r.cols}};
  if (r.exact) {
    j["rank_lower"] = j["rank_upper"] = r.exact->rank;
    j["method"] = r.exact->method;
    j["certificate"] = {{"pivot_rows", one_based(r.exact->pivot_rows)},
                        {"pivot_cols", one_based(r.exact->pivot_cols)},
                        {"kernel_dimension", r.exact->kernel.cols()}};
  } else if (r.certified) {
    j["rank_lower"] = r.certified->lower;
    j["rank_upper"] = r.certified->upper;
    j["bits"] = r.certified->bits;
    j["method"] = r.certified->method;
    j["certificate"] = {{"pivot_rows", one_based(r.certified->pivot_rows)},
                        {"pivot_cols", one_based(r.certified->pivot_cols)},
                        {"residual_bound", upper_bound_json(r.certified->residual_bound)}};
  } else {
    // Numeric: nothing here is proven, so none of it bears the proven bounds' names.
    j["certified"] = false;
    if (!r.notes.empty()) j["notes"] = r.notes;
    if (r.numeric_top) {
      const TopRankBounds& b = *r.numeric_top;
      j["approx_rank_lower"] = b.lower;
      j["approx_rank_upper"] = b.upper;
      j["tolerance"] = b.tolerance;
      j["top_singular_values"] = std::vector<double>(b.top.values.data(), b.top.values.data() + r.top);
      j["sigma_next"] = b.top.values(r.top);
      j["distance_to_rank_k"] = {{"k", r.top}, {"spectral", b.distance.spectral}, {"frobenius", b.distance.frobenius}};
    } else {
      const ApproxRank& a = *r.numeric;
      j["approx_rank_lower"] = j["approx_rank_upper"] = a.rank;
      j["tolerance"] = a.tolerance;
      j["gap"] = std::isfinite(a.gap) ? json(a.gap) : json(nullptr);
      j["singular_values"] = std::vector<double>(a.singular_values.data(), a.singular_values.data() + a.singular_values.size());
    }
  }
  return json_document(j, "rank");
}

std::string to_text(const RankAnalysis& r) {
  std::ostringstream s;
  const std::string shape = dimensions_text(r.rows, r.cols);
  if (r.exact) {
    const ExactRank& e = *r.exact;
    s << "rank = " << e.rank << " (exact, " << shape << ")\n";
    s << "  proof of rank >= " << e.rank << ": the minor on " << e.rank << " pivot rows and columns is nonsingular\n";
    if (e.kernel.cols() > 0)
      s << "  proof of rank <= " << e.rank << ": " << e.kernel.cols() << " independent kernel vectors, checked exactly\n";
    else
      s << "  rank <= " << e.rank << ": the matrix has " << e.rank << " columns\n";
    s << "  method: "
      << (e.method == "modular" ? "pivots mod a word-size prime, kernel by p-adic lifting" : "fraction-free (Bareiss) elimination")
      << "\n";
    return s.str();
  }
  if (r.certified) {
    const CertifiedRank& c = *r.certified;
    if (c.lower == c.upper) s << "rank = " << c.lower << " (certified, " << shape << ")\n";
    else s << c.lower << " <= rank <= " << c.upper << " (certified bounds, " << shape << ")\n";
    if (c.lower > 0 && c.method == "double-double")
      s << "  proof of rank >= " << c.lower << ": the whole matrix, preconditioned in two stages (the first product in"
        << " double-double), Y with ||I - Y||_inf <= " << format_upper_bound(c.residual_bound) << " < 1 (" << c.bits
        << " bits)\n";
    else if (c.lower > 0)
      s << "  proof of rank >= " << c.lower << ": a " << c.lower << " x " << c.lower
        << " minor M with ||I - R M||_inf <= " << format_upper_bound(c.residual_bound) << " < 1 (" << c.method << ", "
        << c.bits << " bits)\n";
    if (c.lower < c.upper)
      s << "  rank <= " << c.upper << " is only the shape: floating arithmetic cannot prove a deficiency.\n"
        << "  Raise the precision (bits) to push the lower bound up, or ask the exact mode for the exact rank.\n";
    return s.str();
  }
  for (const std::string& note : r.notes) s << "note: " << note << "\n";
  if (r.numeric_top) {
    const TopRankBounds& b = *r.numeric_top;
    s << "top " << r.top << " singular values (Lanczos, uncertified):\n";
    for (Eigen::Index i = 0; i < r.top; ++i) s << "  sigma_" << i + 1 << " = " << short_double(b.top.values(i)) << "\n";
    s << "sigma_" << r.top + 1 << " = " << short_double(b.top.values(r.top)) << "\n";
    s << "nearest matrix of rank <= " << r.top << " (Eckart-Young): distance " << short_double(b.distance.spectral)
      << " (spectral), " << short_double(b.distance.frobenius) << " (Frobenius)\n";
    return s.str();
  }
  const ApproxRank& a = *r.numeric;
  s << "numerical rank = " << a.rank << " (uncertified, " << shape << ", tolerance " << short_double(a.tolerance) << ")\n";
  s << "  gap sigma_r / sigma_(r+1) = " << (std::isfinite(a.gap) ? short_double(a.gap) : std::string("inf")) << "\n";
  s << "  singular values:";
  for (Eigen::Index i = 0; i < a.singular_values.size() && i < 20; ++i) s << " " << short_double(a.singular_values(i));
  if (a.singular_values.size() > 20) s << " ... (" << a.singular_values.size() << " in all; the JSON lists them)";
  s << "\n";
  return s.str();
}

DetAnalysis analyze_det(const Matrix<Rational>& A, const DetQuestion& q) {
  if (A.rows() != A.cols())
    throw input_error(q.matrix_name + ": the determinant needs a square matrix, this one is " + std::to_string(A.rows()) +
                      " x " + std::to_string(A.cols()));
  if (!q.certified && q.bits != 53) throw input_error("bits belongs to the certified mode");
  DetAnalysis out;
  out.n = A.rows();
  out.digits = q.digits;
  if (q.certified) out.certified = certified_determinant(A, q.bits);
  else out.exact = exact_determinant(A);
  guard_result(out);
  return out;
}

namespace {
struct EnclosureText {
  std::string lower, upper, width, relative_width;
};
EnclosureText enclosure_text(const CertifiedDeterminant& e, int digits) {
  const auto [lo, hi] = enclosure_scientific(e.det, digits);
  const Real width = upper_bound(e.det) - lower_bound(e.det);
  const Real mag = abs(upper_bound(e.det)) > abs(lower_bound(e.det)) ? abs(upper_bound(e.det)) : abs(lower_bound(e.det));
  return {lo, hi, format_scientific(width, 3, true), mag == 0 ? "0" : format_scientific(Real(width / mag), 3, true)};
}
}  // namespace

json to_json(const DetAnalysis& d) {
  if (d.exact)
    return json_document({{"mode", "exact"}, {"n", d.n}, {"det", exact_text(*d.exact)},
                          {"det_decimal", format_significant(*d.exact, d.digits)}},
                         "det");
  const CertifiedDeterminant& e = *d.certified;
  const EnclosureText t = enclosure_text(e, d.digits);
  return json_document({{"mode", "certified"}, {"n", d.n}, {"det_lower", t.lower}, {"det_upper", t.upper},
                        {"width", t.width}, {"relative_width", t.relative_width}, {"preconditioned", e.preconditioned},
                        {"method", e.method}, {"bits", e.bits}, {"eps", upper_bound_json(e.eps)}},
                       "det");
}

std::string to_text(const DetAnalysis& d) {
  std::ostringstream s;
  if (d.exact) {
    // Scientific notation with significant digits: fixed decimals would show a
    // tiny nonzero determinant (hilbert:8, 2.7e-33) as 0.000...
    s << "det = " << exact_text(*d.exact) << " (exact, " << d.n << " x " << d.n << ")\n";
    if (denominator(*d.exact) != 1)
      s << "    ~ " << format_significant(*d.exact, d.digits) << " (rounded to " << d.digits << " significant digits)\n";
    return s.str();
  }
  const CertifiedDeterminant& e = *d.certified;
  const EnclosureText t = enclosure_text(e, d.digits);
  s << "det in [" << t.lower << ", " << t.upper << "] (certified, " << d.n << " x " << d.n << ")\n";
  s << "  width " << t.width << ", relative width " << t.relative_width << "; " << e.method << ", " << e.bits << " bits\n";
  if (!e.preconditioned)
    s << "  This is only Hadamard's bound: the matrix is singular or too ill-conditioned at this precision.\n"
      << (e.bits == 106 ? "  Raise the precision (bits) to 128 or more (MPFI), or ask the exact mode (the data are exact rationals).\n"
                        : "  Raise the precision (bits), or ask the exact mode (the data are exact rationals).\n");
  return s.str();
}

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
    values.push_back({{"lower", bound_json(v.lower, false)}, {"upper", bound_json(v.upper, true)}});
  json j{{"rows", s.rows},
         {"cols", s.cols},
         {"top", s.top},
         {"singular_values", values},
         {"basis", s.values.full ? "full" : "truncated"},
         {"residual", bound_json(s.values.residual, true)},
         {"orthogonality", bound_json(s.values.orthogonality, true)}};
  if (s.gaps) {
    json g = json::array();
    for (double x : s.gap_lower) g.push_back(x > 0 ? bound_json(x, false) : json(nullptr));
    j["gaps"] = g;
  }
  return json_document(j, "svd");
}

std::string to_text(const SvdAnalysis& s) {
  std::ostringstream t;
  t << "top " << s.top << " singular values of " << s.matrix_name << " (" << s.rows << " x " << s.cols
    << "), certified: lower <= sigma_i <= upper\n";
  for (std::size_t i = 0; i < s.values.values.size(); ++i) {
    t << "  sigma_" << i + 1 << " in [" << bound_text(s.values.values[i].lower, false) << ", "
      << bound_text(s.values.values[i].upper, true) << "]";
    if (s.gaps && i < s.gap_lower.size())
      t << (s.gap_lower[i] > 0 ? "   gap to sigma_" + std::to_string(i + 2) + " >= " + bound_text(s.gap_lower[i], false)
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
