// Is my attention pattern reachable? Reads a target from a CSV file (rows of
// positive weights; default: examples/data/previous-token.csv), decides it for
// every head width d_k = 1..n, and writes the certificate of the first width
// that reaches it (argument 2, default reach-certificate.json).
#include <attnrank/io/parse.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/certificate.hpp>

#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  using namespace attnrank;
  const std::string path = argc > 1 ? argv[1] : ATTNRANK_EXAMPLE_DATA "/previous-token.csv";
  const std::string certificate_path = argc > 2 ? argv[2] : "reach-certificate.json";
  try {
    const Matrix<Rational> A = read_matrix(path);  // exact: "0.7" is 7/10
    validate_target(A, path);                     // square, no negative entry, no zero row
    std::cout << path << ": n = " << A.rows() << "\n";
    for (Eigen::Index dk = 1; dk <= A.rows(); ++dk) {
      const ReachResult r = reach(A, dk);
      std::cout << "  d_k = " << dk << ": " << to_string(r.verdict) << " (floor " << r.floor.lower;
      if (r.floor.upper != r.floor.lower) std::cout << ".." << r.floor.upper;
      std::cout << ")";
      if (r.witness) std::cout << ", best head within " << format_upper_bound(r.witness->max_abs_error);
      std::cout << "\n";
      if (r.verdict == Verdict::reachable) {
        std::ofstream(certificate_path) << make_reach_certificate(A, r).dump(1) << "\n";
        std::cout << "certificate for d_k = " << dk << " written to " << certificate_path << "\n";
        return 0;
      }
    }
    std::cout << "no width decided it at this precision\n";
  } catch (const input_error& e) {
    std::cerr << "reach_from_csv: " << e.what() << "\n";
    return 2;
  }
}
