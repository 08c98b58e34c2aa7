#pragma once
// Freed memory kept for reuse: glibc's malloc told to keep large freed blocks in
// the heap instead of handing each back to the kernel. Never changes a result.
//
// The certified linear algebra allocates dozens of n x n temporaries per
// analysis (8 MB each at n = 1024). With glibc's defaults those blocks are
// mapped fresh and unmapped when freed, or trimmed off the heap's top, so the
// next one page-faults anew: a causal head at n = 1024 took 8.2 s in a Python
// process with the defaults, 33 s with the trim threshold a Dask worker gets
// (64 KiB), and 4.3 s with freed blocks kept.
//
// Process-wide. `keep_freed_memory` is for a module's import: it leaves alone a
// process whose environment chose glibc's thresholds (MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_, or GLIBC_TUNABLES naming glibc.malloc.mmap_threshold or
// trim_threshold). `FreedMemoryKept` keeps them for a span whatever the
// environment chose, then restores its choice and returns the freed memory: an
// analysis in a Python process (a Dask worker's), or a whole command's run.

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace attnrank {

/// glibc's mmap threshold (larger blocks are mapped on their own) and trim
/// threshold (more free memory than this at the heap's top goes back).
struct MallocThresholds {
  std::size_t mmap;
  std::size_t trim;
};

/// glibc's value of a threshold the environment leaves unset once the other is set.
inline constexpr std::size_t glibc_default_threshold = std::size_t{128} << 10;

namespace detail {
// "0x..." and decimal, as glibc reads a size; nullopt for text that is not one.
inline std::optional<std::size_t> parse_size(const char* text, const char* end) {
  if (text == end) return std::nullopt;
  char* stop = nullptr;
  const unsigned long long v = std::strtoull(text, &stop, 0);
  if (stop != end) return std::nullopt;
  return static_cast<std::size_t>(v);
}
inline std::optional<std::size_t> tunable(const char* tunables, const char* name) {
  const std::size_t length = std::strlen(name);
  for (const char* p = tunables; p && *p;) {
    const char* end = std::strchr(p, ':');
    if (!end) end = p + std::strlen(p);
    if (std::strncmp(p, name, length) == 0 && p[length] == '=') return parse_size(p + length + 1, end);
    p = *end ? end + 1 : end;
  }
  return std::nullopt;
}
inline std::optional<std::size_t> environment_size(const char* name) {
  const char* text = std::getenv(name);
  return text ? parse_size(text, text + std::strlen(text)) : std::nullopt;
}
}  // namespace detail

/// The thresholds the environment chooses (GLIBC_TUNABLES over the MALLOC_
/// variables; one left unset at glibc_default_threshold), or nullopt when it
/// chooses neither.
inline std::optional<MallocThresholds> environment_malloc_thresholds() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::optional<std::size_t> mmap = detail::tunable(tunables, "glibc.malloc.mmap_threshold");
  std::optional<std::size_t> trim = detail::tunable(tunables, "glibc.malloc.trim_threshold");
  if (!mmap) mmap = detail::environment_size("MALLOC_MMAP_THRESHOLD_");
  if (!trim) trim = detail::environment_size("MALLOC_TRIM_THRESHOLD_");
  if (!mmap && !trim) return std::nullopt;
  return MallocThresholds{mmap.value_or(glibc_default_threshold), trim.value_or(glibc_default_threshold)};
}

/// True when the environment chooses glibc's mmap or trim threshold.
inline bool malloc_thresholds_set_by_environment() { return environment_malloc_thresholds().has_value(); }

/// Sets both thresholds; false without glibc or when glibc refuses a value.
inline bool set_malloc_thresholds(const MallocThresholds& t) {
#if defined(__GLIBC__)
  const auto as_int = [](std::size_t v) { return static_cast<int>(v < INT_MAX ? v : INT_MAX); };  // mallopt's int
  return mallopt(M_MMAP_THRESHOLD, as_int(t.mmap)) == 1 && mallopt(M_TRIM_THRESHOLD, as_int(t.trim)) == 1;
#else
  (void)t;
  return false;
#endif
}

/// The thresholds that keep freed blocks of up to `block_bytes`: allocations that
/// size come from the heap, and up to twice that stays at its top (glibc's own
/// dynamic thresholds stop at 32 MiB and 64 MiB).
inline MallocThresholds kept_thresholds(std::size_t block_bytes) {
  const std::size_t block = block_bytes < INT_MAX ? block_bytes : INT_MAX;
  return {block, block < INT_MAX / 2 ? 2 * block : INT_MAX};
}

/// Keeps freed blocks of up to `block_bytes` for reuse, for the rest of the
/// process. Returns true when set; false without glibc, when the environment
/// chose the thresholds, or when glibc refuses the value. The process may then
/// hold up to 2 * block_bytes of freed memory that it would have returned.
inline bool keep_freed_memory(std::size_t block_bytes) {
  if (malloc_thresholds_set_by_environment()) return false;
  return set_malloc_thresholds(kept_thresholds(block_bytes));
}

/// While one is alive (in any thread), freed blocks of up to the first one's
/// `block_bytes` are kept, whatever the environment chose. When the last ends, a
/// process whose environment chose the thresholds returns its freed memory to the
/// kernel (malloc_trim) and has the environment's thresholds again; any other
/// process keeps the setting, as keep_freed_memory leaves it.
class FreedMemoryKept {
 public:
  explicit FreedMemoryKept(std::size_t block_bytes) {
    const std::lock_guard<std::mutex> lock(state().mutex);
    if (state().holders++ == 0) {
      state().restore = environment_malloc_thresholds();
      set_malloc_thresholds(kept_thresholds(block_bytes));
    }
  }
  ~FreedMemoryKept() {
    const std::lock_guard<std::mutex> lock(state().mutex);
    if (--state().holders == 0 && state().restore) {
#if defined(__GLIBC__)
      malloc_trim(0);
#endif
      set_malloc_thresholds(*state().restore);
    }
  }
  FreedMemoryKept(const FreedMemoryKept&) = delete;
  FreedMemoryKept& operator=(const FreedMemoryKept&) = delete;

 private:
  struct State {
    std::mutex mutex;
    int holders = 0;
    std::optional<MallocThresholds> restore;
  };
  static State& state() {
    static State s;
    return s;
  }
};

}  // namespace attnrank
