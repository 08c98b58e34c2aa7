#pragma once
// Running out of memory, reported instead of aborted.
//
// GMP (and MPFR and MPFI, which allocate through GMP) abort the process when an
// allocation fails, and GMP's documentation says a replacement allocator must
// not return on failure either: neither an exception nor a longjmp may unwind
// through GMP. So the best a program can do is to say what happened and exit.
// `report_gmp_out_of_memory` installs allocation functions that do exactly that:
// on failure they write one line, "PROGRAM: out of memory at a GMP allocation of
// N bytes (CONTEXT); ...", to standard error without allocating, and exit with
// status 1. Nothing is printed on standard output. Memory that C++ allocates
// (Eigen, std::vector) fails with std::bad_alloc instead, which a program
// catches and reports the same way (out_of_memory_message).
//
// Process-wide: call it once, early in main, before any GMP number exists.
//
// Work whose size alone proves it cannot fit is refused up front instead
// (require_memory): an input_error saying what it needs, not an exit 1.

#include <gmp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <attnrank/error.hpp>

namespace attnrank {

namespace detail {
struct OutOfMemoryReport {
  char program[64] = "attnrank";
  char context[256] = "";
};
inline OutOfMemoryReport& out_of_memory_report() {
  static OutOfMemoryReport r;
  return r;
}

[[noreturn]] inline void exit_out_of_memory(std::size_t bytes) {
  char line[512];
  const OutOfMemoryReport& r = out_of_memory_report();
  const int len = std::snprintf(line, sizeof line,
                                "%s: out of memory at a GMP allocation of %zu bytes%s%s%s; give the process more "
                                "memory or a smaller input\n",
                                r.program, bytes, r.context[0] ? " (" : "", r.context, r.context[0] ? ")" : "");
  if (len > 0) {
    const ssize_t ignored = ::write(2, line, static_cast<std::size_t>(std::min<int>(len, sizeof line - 1)));
    (void)ignored;
  }
  std::_Exit(1);
}

inline void* gmp_allocate(std::size_t bytes) {
  void* p = std::malloc(bytes);
  if (p == nullptr && bytes != 0) exit_out_of_memory(bytes);
  return p;
}
inline void* gmp_reallocate(void* old, std::size_t, std::size_t bytes) {
  void* p = std::realloc(old, bytes);
  if (p == nullptr && bytes != 0) exit_out_of_memory(bytes);
  return p;
}
inline void gmp_free(void* p, std::size_t) { std::free(p); }
}  // namespace detail

/// Installs the reporting GMP allocators (see the top of this header). `program`
/// starts the message.
inline void report_gmp_out_of_memory(const char* program) {
  std::snprintf(detail::out_of_memory_report().program, sizeof detail::out_of_memory_report().program, "%s", program);
  mp_set_memory_functions(&detail::gmp_allocate, &detail::gmp_reallocate, &detail::gmp_free);
}

/// What the process is doing, for the message ("rank --mode exact of big.csv").
/// Copied into a fixed buffer now, so that reporting needs no allocation.
inline void set_out_of_memory_context(const std::string& context) {
  std::snprintf(detail::out_of_memory_report().context, sizeof detail::out_of_memory_report().context, "%s",
                context.c_str());
}

/// The memory this machine has, physical and swap, in bytes (0 when unknown).
inline double machine_memory_bytes() {
  struct sysinfo info {};
  if (::sysinfo(&info) != 0) return 0;
  return (static_cast<double>(info.totalram) + static_cast<double>(info.totalswap)) * info.mem_unit;
}

/// Work that would certainly run out of memory, refused before it starts: throws
/// input_error when `bytes`, a lower bound on what `what` needs, is more than the
/// machine's memory (machine_memory_bytes), saying both. A bound, not a promise:
/// work under it may still run out.
inline void require_memory(double bytes, const std::string& what) {
  const double have = machine_memory_bytes();
  if (have <= 0 || bytes <= have) return;
  char text[160];
  std::snprintf(text, sizeof text, ": needs at least %.1f GB of memory, and this machine has %.1f GB (memory and swap)",
                bytes / 1e9, have / 1e9);
  throw input_error(what + text);
}

/// The line for a std::bad_alloc caught while doing the current context's work.
inline std::string out_of_memory_message() {
  const detail::OutOfMemoryReport& r = detail::out_of_memory_report();
  return std::string(r.program) + ": out of memory" + (r.context[0] ? std::string(" (") + r.context + ")" : "") +
         "; give the process more memory or a smaller input";
}

}  // namespace attnrank
