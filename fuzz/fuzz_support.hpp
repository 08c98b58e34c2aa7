#pragma once
// Shared by the fuzz targets: an oracle failure aborts with a message, which
// libFuzzer reports as a crash and saves as a reproducer.

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace attnrank::fuzz {

inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "attnrank fuzz oracle failed: %s\n", what);
  std::abort();
}

}  // namespace attnrank::fuzz
