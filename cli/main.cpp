// The attnrank command (cli/run.hpp).
#include "run.hpp"

#include <attnrank/out_of_memory.hpp>

#include <malloc.h>

#include <iostream>

int main(int argc, char** argv) {
  attnrank::report_gmp_out_of_memory("attnrank");
  // Keep freed memory for reuse instead of returning it to the kernel: the
  // certified linear algebra allocates dozens of n x n temporaries, and glibc's
  // default (fresh mmap for each, trimmed on free) made every one page-fault
  // anew: 14% of a certified determinant at n = 1024. A short-lived process
  // loses nothing by it; the peak is unchanged.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // a failed GMP allocation: a message and exit 1, not SIGABRT
  return attnrank::cli::run(argc, argv, std::cout, std::cerr);
}
