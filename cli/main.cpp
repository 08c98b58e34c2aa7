// The attnrank command (cli/run.hpp).
#include "run.hpp"

#include <attnrank/out_of_memory.hpp>

#include <iostream>

int main(int argc, char** argv) {
  attnrank::report_gmp_out_of_memory("attnrank");  // a failed GMP allocation: a message and exit 1, not SIGABRT
  return attnrank::cli::run(argc, argv, std::cout, std::cerr);
}
