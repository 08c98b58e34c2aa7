// Counts the threads a process starts (LD_PRELOAD), for tests/numbers/one_thread.py:
// every pthread_create goes through here first; at exit the count is appended to
// the file named by THREAD_COUNT_FILE.
#include <dlfcn.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>

namespace {
int started = 0;
using create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  static const auto real = reinterpret_cast<create_fn>(dlsym(RTLD_NEXT, "pthread_create"));
  __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
  return real(thread, attr, start, arg);
}

__attribute__((destructor)) static void report() {
  const char* path = std::getenv("THREAD_COUNT_FILE");
  if (!path) return;
  std::FILE* f = std::fopen(path, "a");
  if (!f) return;
  std::fprintf(f, "%d\n", __atomic_load_n(&started, __ATOMIC_SEQ_CST));
  std::fclose(f);
}
