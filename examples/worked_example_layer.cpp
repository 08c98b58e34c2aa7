// The tutorial's Section 2.2.2 with the library: build the layer from exact
// integers, run it on "I love LLMs", and print what each head attends to, with
// every digit certified by interval arithmetic.
#include <attnrank/attnrank.hpp>

#include <iostream>

int main() {
  using namespace attnrank;
  const MultiHeadAttention<Rational> layer = worked_example::layer();  // exact weights
  PrecisionScope precision(128);                                       // bits for the certified part
  // Projections and raw scores stay exact; sqrt, exp and the rest are intervals.
  const LayerTrace<Rational, Interval> trace = layer.forward<Interval>(worked_example::X());

  for (std::size_t h = 0; h < trace.heads.size(); ++h) {
    std::cout << "head " << h + 1 << ": raw scores (exact), then attention weights (certified)\n";
    const auto& head = trace.heads[h];
    for (Eigen::Index r = 0; r < head.A.rows(); ++r) {
      std::cout << "  " << worked_example::tokens[r] << ":";
      for (Eigen::Index c = 0; c < head.scores.cols(); ++c) std::cout << " " << head.scores(r, c);
      std::cout << "  ->";
      for (Eigen::Index c = 0; c < head.A.cols(); ++c)
        std::cout << " " << certified_fixed(head.A(r, c), 6).value_or("(uncertified)");
      std::cout << "\n";
    }
  }
  std::cout << "output row 1 (" << worked_example::tokens[0] << "):";
  for (Eigen::Index c = 0; c < trace.output.cols(); ++c)
    std::cout << " " << certified_fixed(trace.output(0, c), 30).value_or("(uncertified)");
  std::cout << "\n";
}
