// Appendix A of the tutorial, step by step with the library: why no head of width
// d_k = 1 produces the diagonal target, and why d_k = 2 does. Every number printed
// is certified (intervals) or exact; the verdicts carry checked certificates.
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/tutorial/single_key_head.hpp>

#include <iostream>

int main() {
  using namespace attnrank;
  const PrecisionScope precision(128);

  // Section 2.5.4: with d_k = 1 and keys (2, 0, 1), only argmax k or argmin k wins.
  const std::vector<Rational> keys = {Rational(2), Rational(0), Rational(1)};
  std::cout << "d_k = 1, keys (2, 0, 1): tokens that can ever win:";
  for (Eigen::Index j : possible_winners(keys)) std::cout << " " << j + 1;
  std::cout << " (token 3 never wins)\n";

  // Question 3: softmax(S) = A forces S = log A + c 1^T (Equation 2-7).
  const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
  // from_rational rounds q outward at the current precision (Interval(q) would take
  // Boost's generic conversion path: correct, but thousands of times slower).
  const Matrix<Interval> log_A =
      A.unaryExpr([](const Rational& q) { return Interval(log(scalar_traits<Interval>::from_rational(q))); });
  const Interval a = log_A(0, 0) - log_A(0, 1), b = log_A(0, 1);
  std::cout << "log A = a I + b J, a = " << certified_fixed(a, 30).value_or("?") << ", b = "
            << certified_fixed(b, 30).value_or("?") << "\n";

  // rank(log A) = 3 (certified) and the tutorial's floor rank(S) >= 3 - 1.
  const CertifiedRank r = certified_rank(log_A);
  std::cout << "rank(log A) = " << r.lower << (r.lower == r.upper ? " (certified)" : " at least") << "\n";
  std::cout << "seed floor: rank(S) >= " << r.lower - 1 << "\n";

  // The engine: the exact floor rank(log(A) C) against the ceiling d_k.
  for (Eigen::Index dk : {1, 2}) {
    const ReachResult result = reach(A, dk);
    const nlohmann::json certificate = make_reach_certificate(A, result);
    const CertificateCheck check = check_reach_certificate(A, certificate);
    std::cout << "d_k = " << dk << ": floor " << result.floor.lower << ", " << to_string(result.verdict)
              << ", certificate " << (check.valid ? "verified" : "REJECTED");
    if (result.witness) std::cout << ", witness error <= " << format_upper_bound(result.witness->max_abs_error);
    std::cout << "\n";
  }
}
