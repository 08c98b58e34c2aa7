// The attnrank command (cli/run.hpp).
#include "run.hpp"

#include <attnrank/freed_memory.hpp>
#include <attnrank/out_of_memory.hpp>

#include <cstddef>

#include <iostream>

int main(int argc, char** argv) {
  attnrank::report_gmp_out_of_memory("attnrank");  // a failed GMP allocation: a message and exit 1, not SIGABRT
  // Freed temporaries kept for reuse for the whole run, whatever the environment
  // chose (freed_memory.hpp): a short-lived process loses nothing by it, the peak
  // is unchanged, and a command started from a Dask worker (MALLOC_TRIM_THRESHOLD_
  // set to 64 KiB) would run a head at n = 1024 seven times slower.
  const attnrank::FreedMemoryKept keep(std::size_t{1} << 30);
  return attnrank::cli::run(argc, argv, std::cout, std::cerr);
}
