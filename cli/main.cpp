// The attnrank command (cli/run.hpp).
#include "run.hpp"

#include <attnrank/freed_memory.hpp>
#include <attnrank/out_of_memory.hpp>

#include <cstddef>

#include <iostream>

int main(int argc, char** argv) {
  attnrank::report_gmp_out_of_memory("attnrank");  // a failed GMP allocation: a message and exit 1, not SIGABRT
  // Freed temporaries kept for reuse (freed_memory.hpp): a short-lived process
  // loses nothing by it, and the peak is unchanged.
  attnrank::keep_freed_memory(std::size_t{1} << 30);
  return attnrank::cli::run(argc, argv, std::cout, std::cerr);
}
