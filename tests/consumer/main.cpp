// Prints the certified output(1, 1) of the worked example: 1.01.
#include <attnrank/attnrank.hpp>

#include <iostream>

int main() {
  attnrank::PrecisionScope scope(64);
  const auto t = attnrank::worked_example::layer().forward<attnrank::Interval>(attnrank::worked_example::X());
  const auto digits = attnrank::certified_fixed(t.output(0, 0), 2);
  std::cout << (digits ? *digits : "uncertified") << "\n";
  return digits == std::string("1.01") ? 0 : 1;
}
