// keep_freed_memory (attnrank/freed_memory.hpp): large blocks come from the heap
// and stay there when freed, unless the environment chose glibc's thresholds.
// Its own program: the setting is process-wide.
#include <attnrank/freed_memory.hpp>

#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

TEST_CASE("attnrank::environment_malloc_thresholds") {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) unsetenv(name);
  CHECK_FALSE(attnrank::environment_malloc_thresholds().has_value());
  REQUIRE(setenv("MALLOC_TRIM_THRESHOLD_", "65536", 1) == 0);
  auto t = attnrank::environment_malloc_thresholds();
  REQUIRE(t.has_value());
  CHECK(t->trim == 65536);
  CHECK(t->mmap == attnrank::glibc_default_threshold);  // the one left unset
  // GLIBC_TUNABLES over the variable, hexadecimal as glibc reads it; other tunables skipped
  REQUIRE(setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=0x40000", 1) == 0);
  t = attnrank::environment_malloc_thresholds();
  REQUIRE(t.has_value());
  CHECK(t->trim == 0x40000);
  unsetenv("MALLOC_TRIM_THRESHOLD_");
  REQUIRE(setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=12x:glibc.malloc.arena_max=2", 1) == 0);
  CHECK_FALSE(attnrank::environment_malloc_thresholds().has_value());  // not a size: not a choice
  REQUIRE(setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold_x=1", 1) == 0);
  CHECK_FALSE(attnrank::environment_malloc_thresholds().has_value());  // another name
  unsetenv("GLIBC_TUNABLES");
  CHECK(attnrank::kept_thresholds(std::size_t{64} << 20).trim == std::size_t{128} << 20);
  CHECK(attnrank::kept_thresholds(SIZE_MAX).mmap == INT_MAX);  // what mallopt's int holds
  CHECK(attnrank::kept_thresholds(SIZE_MAX).trim == INT_MAX);
}

// The allocator's behaviour: glibc's own malloc (a sanitizer brings its own).
#if defined(__GLIBC__) && !defined(ATTNRANK_SANITIZED)
namespace {

void* volatile sink;  // keeps the compiler from pairing away malloc and free

// Above the 32 MiB where glibc's dynamic mmap threshold stops: mapped by default.
constexpr std::size_t block = std::size_t{48} << 20;

struct HeapUse {
  std::size_t mapped;  // bytes in blocks mapped on their own
  std::size_t free;    // freed bytes the heaps keep
};
HeapUse heap_use() {
  const struct mallinfo2 m = mallinfo2();
  return {m.hblkhd, m.fordblks};
}

// The heap's use while a block is held, and after it is freed.
std::pair<HeapUse, HeapUse> hold_and_free() {
  void* p = std::malloc(block);
  REQUIRE(p != nullptr);
  std::memset(p, 1, block);
  sink = p;
  const HeapUse held = heap_use();
  std::free(sink);
  return {held, heap_use()};
}

}  // namespace

TEST_CASE("attnrank::keep_freed_memory") {
  const HeapUse before = heap_use();
  // The defaults first (nothing has set the thresholds yet): the block is mapped.
  SECTION("the environment's own thresholds are kept, and glibc's defaults map the block") {
    for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"}) {
      REQUIRE(setenv(name, "131072", 1) == 0);
      CHECK(attnrank::malloc_thresholds_set_by_environment());
      CHECK_FALSE(attnrank::keep_freed_memory(block));
      unsetenv(name);
    }
    REQUIRE(setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=131072", 1) == 0);
    CHECK_FALSE(attnrank::keep_freed_memory(block));
    REQUIRE(setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2", 1) == 0);
    CHECK_FALSE(attnrank::malloc_thresholds_set_by_environment());
    unsetenv("GLIBC_TUNABLES");

    const auto [held, freed] = hold_and_free();
    CHECK(held.mapped >= before.mapped + block);
    CHECK(freed.mapped < before.mapped + block);
  }
  SECTION("kept: the block comes from the heap and stays there for the next") {
    REQUIRE_FALSE(attnrank::malloc_thresholds_set_by_environment());
    REQUIRE(attnrank::keep_freed_memory(std::size_t{64} << 20));
    const auto [held, freed] = hold_and_free();
    CHECK(held.mapped < before.mapped + block);
    CHECK(freed.free >= block);
    const auto [again, _] = hold_and_free();
    CHECK(again.mapped < before.mapped + block);
  }
  SECTION("a scope keeps them whatever the environment chose, then returns the memory and restores the choice") {
    REQUIRE(setenv("MALLOC_TRIM_THRESHOLD_", "65536", 1) == 0);  // a Dask worker's
    REQUIRE(setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=0x20000", 1) == 0);
    const auto chosen = attnrank::environment_malloc_thresholds();
    REQUIRE(chosen.has_value());
    CHECK(chosen->mmap == 0x20000);
    CHECK(chosen->trim == 65536);
    CHECK_FALSE(attnrank::keep_freed_memory(std::size_t{64} << 20));
    {
      const attnrank::FreedMemoryKept outer(std::size_t{64} << 20);
      {
        const attnrank::FreedMemoryKept inner(std::size_t{64} << 20);  // a second analysis, side by side
      }
      const auto [held, freed] = hold_and_free();
      CHECK(held.mapped < before.mapped + block);  // still kept: one holder is left
      CHECK(freed.free >= block);
    }
    CHECK(heap_use().free < block);  // returned when the last ended
    const auto [held, freed] = hold_and_free();
    CHECK(held.mapped >= before.mapped + block);  // the environment's 128 KiB threshold again
    unsetenv("MALLOC_TRIM_THRESHOLD_");
    unsetenv("GLIBC_TUNABLES");
    CHECK_FALSE(attnrank::environment_malloc_thresholds().has_value());
  }
  SECTION("any size is taken, clamped to what glibc accepts") {
    CHECK(attnrank::keep_freed_memory(SIZE_MAX));
    CHECK(attnrank::keep_freed_memory(std::size_t{1} << 30));
  }
}
#endif
