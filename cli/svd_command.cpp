// attnrank svd: certified bounds on the k largest singular values of a matrix.
#include "commands.hpp"
#include "run.hpp"

#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/linalg/certified_svd.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <sstream>

namespace attnrank::cli {
namespace {

using nlohmann::json;

/// A proven bound printed so that the text is still that bound (lower ends
/// rounded down, upper ends up), to 17 significant digits: every double's worth.
std::string bound_text(double x, bool up) {
  if (std::isinf(x)) return "inf";
  return up ? format_upper_bound(x, 17) : format_lower_bound(x, 17);
}

json bound_json(double x, bool up) { return std::isinf(x) ? json(nullptr) : json(bound_text(x, up)); }

}  // namespace

void add_svd_command(CLI::App& app, std::string& out) {
  auto* cmd = app.add_subcommand("svd", "Certified bounds on the k largest singular values of a matrix");
  struct Options {
    std::string matrix;
    long top = 0;
    bool gaps = false, json = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("MATRIX", opt->matrix, "Matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or a spec: diag:N:P, hilbert:N")->required();
  cmd->add_option("--top", opt->top, "How many singular values, largest first (1 <= K <= min(rows, cols))")->required();
  cmd->add_flag("--gaps", opt->gaps, "Also report certified separations sigma_i - sigma_(i+1) >= gap");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, &out] {
    const Matrix<Rational> A = read_input(opt->matrix);
    const Eigen::Index p = std::min(A.rows(), A.cols());
    if (opt->top < 1 || opt->top > p)
      throw input_error("--top " + std::to_string(opt->top) + " is out of range: " + opt->matrix + " is " +
                        std::to_string(A.rows()) + " x " + std::to_string(A.cols()) + ", so 1 <= K <= " +
                        std::to_string(p));
    CertifiedSingularValues s;
    try {
      s = certified_singular_values(A, opt->top);
    } catch (const input_error& e) {
      if (e.row() == 0) throw;
      throw input_error(opt->matrix + ": row " + std::to_string(e.row()) + ", column " + std::to_string(e.column()) +
                            ": the entry is beyond the double range (certified singular values work on balls of doubles)",
                        opt->matrix, e.row(), e.column());
    }
    const std::vector<double> gaps = certified_gaps(s);
    if (opt->json) {
      json values = json::array();
      for (const SingularValueBounds& v : s.values) values.push_back({{"lower", bound_json(v.lower, false)}, {"upper", bound_json(v.upper, true)}});
      json j{{"rows", A.rows()},
             {"cols", A.cols()},
             {"top", opt->top},
             {"singular_values", values},
             {"basis", s.full ? "full" : "truncated"},
             {"residual", bound_text(s.residual, true)},
             {"orthogonality", bound_text(s.orthogonality, true)}};
      if (opt->gaps) {
        json g = json::array();
        for (double x : gaps) g.push_back(x > 0 ? json(bound_text(x, false)) : json(nullptr));
        j["gaps"] = g;
      }
      out = json_document(j, "svd");
      return;
    }
    std::ostringstream t;
    t << "top " << opt->top << " singular values of " << opt->matrix << " (" << A.rows() << " x " << A.cols()
      << "), certified: lower <= sigma_i <= upper\n";
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      t << "  sigma_" << i + 1 << " in [" << bound_text(s.values[i].lower, false) << ", "
        << bound_text(s.values[i].upper, true) << "]";
      if (opt->gaps && i < gaps.size())
        t << (gaps[i] > 0 ? "   gap to sigma_" + std::to_string(i + 2) + " >= " + bound_text(gaps[i], false)
                          : "   not separated from sigma_" + std::to_string(i + 2));
      t << "\n";
    }
    t << "  proof: U^T A V - diag(s) has 2-norm <= " << format_upper_bound(s.residual) << " and the bases are within "
      << format_upper_bound(s.orthogonality) << " of orthonormal (directed rounding, " << (s.full ? "full" : "truncated")
      << " SVD basis)";
    if (!s.full) t << "; upper bounds are norms of the remainders (sound, loose above n = 1024)";
    t << "\n";
    out = t.str();
  });
}

}  // namespace attnrank::cli
