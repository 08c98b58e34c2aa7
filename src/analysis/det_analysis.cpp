// The determinant analysis and its writers (analysis/det_analysis.hpp).
#include <attnrank/analysis/det_analysis.hpp>

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

bool det_mode_is_certified(const std::string& mode) {
  if (mode == "exact") return false;
  if (mode == "certified") return true;
  throw input_error("mode '" + mode + "' is not exact or certified");
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
    return json_document({{"mode", "exact"}, {"n", d.n}, {"det", detail::exact_text(*d.exact)},
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
    s << "det = " << detail::exact_text(*d.exact) << " (exact, " << d.n << " x " << d.n << ")\n";
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


}  // namespace attnrank
