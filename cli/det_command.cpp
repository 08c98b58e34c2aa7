// attnrank det: exact or certified determinant of a square matrix.
#include "commands.hpp"
#include "run.hpp"

#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/io/matrix_spec.hpp>

#include <nlohmann/json.hpp>

#include <sstream>

namespace attnrank::cli {
namespace {

using nlohmann::json;

std::string exact_text(const Rational& q) {
  std::ostringstream s;
  s << q;  // "p/q" or an integer
  return s.str();
}

std::string run_exact(const Matrix<Rational>& A, int digits, bool as_json) {
  const Rational d = exact_determinant(A);
  // Scientific notation with significant digits: fixed decimals would show a
  // tiny nonzero determinant (hilbert:8, 2.7e-33) as 0.000...
  const std::string decimal = format_significant(d, digits);
  if (as_json)
    return json_document({{"mode", "exact"}, {"n", A.rows()}, {"det", exact_text(d)}, {"det_decimal", decimal}}, "det");
  std::ostringstream s;
  s << "det = " << exact_text(d) << " (exact, " << A.rows() << " x " << A.cols() << ")\n";
  if (denominator(d) != 1) s << "    ~ " << decimal << " (rounded to " << digits << " significant digits)\n";
  return s.str();
}

std::string run_certified(const Matrix<Rational>& A, unsigned bits, int digits, bool as_json) {
  const CertifiedDeterminant e = certified_determinant(A, bits);
  const auto [lo, hi] = enclosure_scientific(e.det, digits);
  const Real width = upper_bound(e.det) - lower_bound(e.det);
  const Real mag = abs(upper_bound(e.det)) > abs(lower_bound(e.det)) ? abs(upper_bound(e.det)) : abs(lower_bound(e.det));
  const std::string width_text = format_scientific(width, 3, true);
  const std::string rel_text = mag == 0 ? "0" : format_scientific(Real(width / mag), 3, true);
  if (as_json)
    return json_document({{"mode", "certified"}, {"n", A.rows()}, {"det_lower", lo}, {"det_upper", hi},
                          {"width", width_text}, {"relative_width", rel_text}, {"preconditioned", e.preconditioned},
                          {"method", e.method}, {"bits", e.bits}, {"eps", upper_bound_json(e.eps)}},
                         "det");
  std::ostringstream s;
  s << "det in [" << lo << ", " << hi << "] (certified, " << A.rows() << " x " << A.cols() << ")\n";
  s << "  width " << width_text << ", relative width " << rel_text << "; " << e.method << ", " << e.bits << " bits\n";
  if (!e.preconditioned)
    s << "  This is only Hadamard's bound: the matrix is singular or too ill-conditioned at this precision.\n"
      << (e.bits == 106 ? "  Raise --bits to 128 or more (MPFI), or use --mode exact (the data are exact rationals).\n"
                        : "  Raise --bits, or use --mode exact (the data are exact rationals).\n");
  return s.str();
}

}  // namespace

void add_det_command(CLI::App& app, std::string& out) {
  auto* cmd = app.add_subcommand("det", "Determinant of a square matrix: exact, or a certified enclosure");
  struct Options {
    std::string matrix, mode = "exact";
    unsigned bits = 53;
    int digits = 17;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, "Matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or a spec: diag:N:P, hilbert:N")->required();
  cmd->add_option("--mode", opt->mode, "exact (default) or certified")->check(CLI::IsMember({"exact", "certified"}));
  cmd->add_option("--bits", opt->bits, "Certified mode: working precision in bits (default 53: doubles)")
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--digits", opt->digits,
                  "Significant digits to print, of the exact value and of the enclosure (default 17)")
      ->check(CLI::Range(1, max_digits));
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &out] {
    const Matrix<Rational> A = read_input(opt->matrix);
    if (A.rows() != A.cols())
      throw input_error(opt->matrix + ": the determinant needs a square matrix, this one is " + std::to_string(A.rows()) +
                        " x " + std::to_string(A.cols()));
    if (opt->mode != "certified" && opt->bits != 53) throw input_error("--bits belongs to --mode certified");
    out = opt->mode == "exact" ? run_exact(A, opt->digits, opt->json)
                               : run_certified(A, opt->bits, opt->digits, opt->json);
  });
}

}  // namespace attnrank::cli
