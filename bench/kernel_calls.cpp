// The counted wrappers behind kernel_calls.hpp. With RESERVOIR_BENCH_WRAPS_MEMORY_CALLS, the
// program is linked with -Wl,--wrap=mmap,--wrap=munmap,--wrap=mprotect,--wrap=madvise: every call
// of those symbols in the program's own objects and static libraries (the library's included)
// lands here, and __real_* is the C library's function.
#include "kernel_calls.hpp"

#include <atomic>

#if defined(RESERVOIR_BENCH_WRAPS_MEMORY_CALLS)
#include <sys/mman.h>
#include <sys/types.h>

namespace {
std::atomic<std::int64_t> g_calls{0};

void count() noexcept {
  g_calls.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* __real_mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset);
int __real_munmap(void* addr, std::size_t length);
int __real_mprotect(void* addr, std::size_t length, int prot);
int __real_madvise(void* addr, std::size_t length, int advice);

void* __wrap_mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) {
  count();
  return __real_mmap(addr, length, prot, flags, fd, offset);
}
int __wrap_munmap(void* addr, std::size_t length) {
  count();
  return __real_munmap(addr, length);
}
int __wrap_mprotect(void* addr, std::size_t length, int prot) {
  count();
  return __real_mprotect(addr, length, prot);
}
int __wrap_madvise(void* addr, std::size_t length, int advice) {
  count();
  return __real_madvise(addr, length, advice);
}
}

std::int64_t reservoir::bench::kernel_calls() noexcept {
  return g_calls.load(std::memory_order_relaxed);
}

#else

std::int64_t reservoir::bench::kernel_calls() noexcept {
  return -1;
}

#endif
