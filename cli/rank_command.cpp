// attnrank rank: exact, certified or numeric rank of a matrix (a matrix file or a spec).
#include "commands.hpp"
#include "run.hpp"

#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/linalg/numeric_rank.hpp>

#include <nlohmann/json.hpp>

#include <sstream>

namespace attnrank::cli {
namespace {

using nlohmann::json;

std::vector<Eigen::Index> one_based(const std::vector<Eigen::Index>& v) {
  std::vector<Eigen::Index> out(v);
  for (auto& x : out) ++x;
  return out;
}

std::string shape(const Matrix<Rational>& A) {
  return std::to_string(A.rows()) + " x " + std::to_string(A.cols());
}

std::string short_double(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}

std::string run_exact(const Matrix<Rational>& A, bool as_json) {
  const ExactRank r = exact_rank(A);
  if (as_json) {
    json j{{"mode", "exact"}, {"rows", A.rows()}, {"cols", A.cols()}, {"rank_lower", r.rank}, {"rank_upper", r.rank},
           {"method", r.method},
           {"certificate",
            {{"pivot_rows", one_based(r.pivot_rows)},
             {"pivot_cols", one_based(r.pivot_cols)},
             {"kernel_dimension", r.kernel.cols()}}}};
    return json_document(j, "rank");
  }
  std::ostringstream s;
  s << "rank = " << r.rank << " (exact, " << shape(A) << ")\n";
  s << "  proof of rank >= " << r.rank << ": the minor on " << r.rank << " pivot rows and columns is nonsingular\n";
  if (r.kernel.cols() > 0)
    s << "  proof of rank <= " << r.rank << ": " << r.kernel.cols() << " independent kernel vectors, checked exactly\n";
  else
    s << "  rank <= " << r.rank << ": the matrix has " << r.rank << " columns\n";
  s << "  method: " << (r.method == "modular" ? "pivots mod a word-size prime, kernel by p-adic lifting" : "fraction-free (Bareiss) elimination") << "\n";
  return s.str();
}

std::string run_certified(const Matrix<Rational>& A, unsigned bits, bool as_json) {
  const CertifiedRank r = certified_rank(A, bits);
  if (as_json) {
    json j{{"mode", "certified"}, {"rows", A.rows()}, {"cols", A.cols()}, {"rank_lower", r.lower},
           {"rank_upper", r.upper}, {"bits", r.bits}, {"method", r.method},
           {"certificate",
            {{"pivot_rows", one_based(r.pivot_rows)},
             {"pivot_cols", one_based(r.pivot_cols)},
             {"residual_bound", upper_bound_json(r.residual_bound)}}}};
    return json_document(j, "rank");
  }
  std::ostringstream s;
  if (r.lower == r.upper)
    s << "rank = " << r.lower << " (certified, " << shape(A) << ")\n";
  else
    s << r.lower << " <= rank <= " << r.upper << " (certified bounds, " << shape(A) << ")\n";
  if (r.lower > 0 && r.method == "double-double")
    s << "  proof of rank >= " << r.lower << ": the whole matrix, preconditioned in two stages (the first product in"
      << " double-double), Y with ||I - Y||_inf <= " << format_upper_bound(r.residual_bound) << " < 1 (" << r.bits
      << " bits)\n";
  else if (r.lower > 0)
    s << "  proof of rank >= " << r.lower << ": a " << r.lower << " x " << r.lower
      << " minor M with ||I - R M||_inf <= " << format_upper_bound(r.residual_bound) << " < 1 (" << r.method << ", "
      << r.bits << " bits)\n";
  if (r.lower < r.upper)
    s << "  rank <= " << r.upper << " is only the shape: floating arithmetic cannot prove a deficiency.\n"
      << "  Raise --bits to push the lower bound up, or use --mode exact for the exact rank.\n";
  return s.str();
}

std::string run_numeric(const Matrix<Rational>& A, const std::string& source, std::optional<double> tol, long top,
                        bool as_json) {
  const DoubleConversion converted = approx_to_double(A, source);
  const Eigen::MatrixXd& D = converted.values;
  json j{{"mode", "numeric"}, {"rows", A.rows()}, {"cols", A.cols()}, {"certified", false}};
  std::ostringstream s;
  if (converted.underflows > 0) {
    const std::string note = std::to_string(converted.underflows) +
                             (converted.underflows == 1 ? " nonzero entry is" : " nonzero entries are") +
                             " below the normal double range and rounded to 0 or to a subnormal (first: row " + std::to_string(converted.first_row + 1) + ", column " +
                             std::to_string(converted.first_col + 1) + ", " + converted.first_value +
                             "); numeric mode works in doubles, --mode exact or certified does not";
    j["notes"] = json::array({note});
    s << "note: " << note << "\n";
  }
  if (top > 0) {
    const Eigen::Index d = std::min(A.rows(), A.cols());
    if (top + 1 >= d)
      throw input_error("--top " + std::to_string(top) + " needs top + 1 < min(rows, cols) = " + std::to_string(d) +
                        " (drop --top for all singular values)");
    const TopRankBounds b = approx_rank_from_top(D, top, tol);
    const TopSingularValues& t = b.top;
    const LowRankDistance& dist = b.distance;
    const double tolerance = b.tolerance;
    const Eigen::Index lower = b.lower, upper = b.upper;
    j["rank_lower"] = lower;
    j["rank_upper"] = upper;
    j["tolerance"] = tolerance;
    j["top_singular_values"] = std::vector<double>(t.values.data(), t.values.data() + top);
    j["sigma_next"] = t.values(top);
    j["distance_to_rank_k"] = {{"k", top}, {"spectral", dist.spectral}, {"frobenius", dist.frobenius}};
    if (as_json) return json_document(j, "rank");
    s << "top " << top << " singular values (Lanczos, uncertified):\n";
    for (Eigen::Index i = 0; i < top; ++i) s << "  sigma_" << i + 1 << " = " << short_double(t.values(i)) << "\n";
    s << "sigma_" << top + 1 << " = " << short_double(t.values(top)) << "\n";
    s << "nearest matrix of rank <= " << top << " (Eckart-Young): distance " << short_double(dist.spectral)
      << " (spectral), " << short_double(dist.frobenius) << " (Frobenius)\n";
    return s.str();
  }
  const ApproxRank r = approx_rank(D, tol);
  j["rank_lower"] = r.rank;
  j["rank_upper"] = r.rank;
  j["tolerance"] = r.tolerance;
  j["gap"] = std::isfinite(r.gap) ? json(r.gap) : json(nullptr);
  j["singular_values"] = std::vector<double>(r.singular_values.data(), r.singular_values.data() + r.singular_values.size());
  if (as_json) return json_document(j, "rank");
  s << "numerical rank = " << r.rank << " (uncertified, " << shape(A) << ", tolerance " << short_double(r.tolerance)
    << ")\n";
  s << "  gap sigma_r / sigma_(r+1) = " << (std::isfinite(r.gap) ? short_double(r.gap) : std::string("inf")) << "\n";
  s << "  singular values:";
  for (Eigen::Index i = 0; i < r.singular_values.size() && i < 20; ++i) s << " " << short_double(r.singular_values(i));
  if (r.singular_values.size() > 20) s << " ... (" << r.singular_values.size() << " in all; --json lists them)";
  s << "\n";
  return s.str();
}

}  // namespace

void add_rank_command(CLI::App& app, std::string& out) {
  auto* cmd = app.add_subcommand("rank", "Rank of a matrix: exact, certified bounds, or numeric (SVD)");
  struct Options {
    std::string matrix, mode = "exact";
    unsigned bits = 53;
    double tol = -1;
    long top = 0;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, "Matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or a spec: diag:N:P, hilbert:N")->required();
  cmd->add_option("--mode", opt->mode, "exact (default), certified or numeric")
      ->check(CLI::IsMember({"exact", "certified", "numeric"}));
  cmd->add_option("--bits", opt->bits, "Certified mode: working precision in bits (default 53: doubles)")
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--tol", opt->tol, "Numeric mode: singular values above it count (default sigma_max max(m,n) eps)")
      ->check(CLI::Range(0.0, 1e308));
  cmd->add_option("--top", opt->top, "Numeric mode: only the K largest singular values (Lanczos), and the distance to rank K")
      ->check(CLI::Range(1L, max_spec_size));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &out] {
    const Matrix<Rational> A = read_input(opt->matrix);
    if (opt->mode != "numeric" && (opt->top > 0 || opt->tol >= 0))
      throw input_error("--top and --tol belong to --mode numeric");
    if (opt->mode != "certified" && opt->bits != 53) throw input_error("--bits belongs to --mode certified");
    const std::optional<double> tol = opt->tol >= 0 ? std::optional<double>(opt->tol) : std::nullopt;
    if (opt->mode == "exact") out = run_exact(A, opt->json);
    else if (opt->mode == "certified") out = run_certified(A, opt->bits, opt->json);
    else out = run_numeric(A, opt->matrix, tol, opt->top, opt->json);
  });
}

}  // namespace attnrank::cli
