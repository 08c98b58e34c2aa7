// The rank analysis and its writers (analysis/rank_analysis.hpp).
#include <attnrank/analysis/rank_analysis.hpp>

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

RankMode parse_rank_mode(const std::string& name) {
  if (name == "exact") return RankMode::exact;
  if (name == "certified") return RankMode::certified;
  if (name == "numeric") return RankMode::numeric;
  throw input_error("mode '" + name + "' is not exact, certified or numeric");
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
    j["certificate"] = {{"pivot_rows", detail::one_based(r.exact->pivot_rows)},
                        {"pivot_cols", detail::one_based(r.exact->pivot_cols)},
                        {"kernel_dimension", r.exact->kernel.cols()}};
  } else if (r.certified) {
    j["rank_lower"] = r.certified->lower;
    j["rank_upper"] = r.certified->upper;
    j["bits"] = r.certified->bits;
    j["method"] = r.certified->method;
    j["certificate"] = {{"pivot_rows", detail::one_based(r.certified->pivot_rows)},
                        {"pivot_cols", detail::one_based(r.certified->pivot_cols)},
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
  const std::string shape = detail::dimensions_text(r.rows, r.cols);
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
    for (Eigen::Index i = 0; i < r.top; ++i) s << "  sigma_" << i + 1 << " = " << detail::short_double(b.top.values(i)) << "\n";
    s << "sigma_" << r.top + 1 << " = " << detail::short_double(b.top.values(r.top)) << "\n";
    s << "nearest matrix of rank <= " << r.top << " (Eckart-Young): distance " << detail::short_double(b.distance.spectral)
      << " (spectral), " << detail::short_double(b.distance.frobenius) << " (Frobenius)\n";
    return s.str();
  }
  const ApproxRank& a = *r.numeric;
  s << "numerical rank = " << a.rank << " (uncertified, " << shape << ", tolerance " << detail::short_double(a.tolerance) << ")\n";
  s << "  gap sigma_r / sigma_(r+1) = " << (std::isfinite(a.gap) ? detail::short_double(a.gap) : std::string("inf")) << "\n";
  s << "  singular values:";
  for (Eigen::Index i = 0; i < a.singular_values.size() && i < 20; ++i) s << " " << detail::short_double(a.singular_values(i));
  if (a.singular_values.size() > 20) s << " ... (" << a.singular_values.size() << " in all; the JSON lists them)";
  s << "\n";
  return s.str();
}


}  // namespace attnrank
