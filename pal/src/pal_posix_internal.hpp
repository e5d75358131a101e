// Internal to the POSIX files of pal: what they share. CMakeLists.txt chooses the files (one per
// OS and per concern) and defines RESERVOIR_PAL_LINUX for them:
//
//   pal_posix.cpp          every POSIX system: the memory calls, sizes, errors, threads
//   pal_linux_limits.cpp   Linux (the posix-generic build too, as macOS's and FreeBSD's calls do
//                          not exist there): /proc and cgroup readers, resident set, limits
//   pal_posix_limits.cpp   macOS and FreeBSD: the resident set, no limits read
//   pal_linux_sync.cpp     Linux's own paths (RESERVOIR_PAL_LINUX): futex and membarrier
//   pal_linux_huge_pages.cpp  Linux's own paths: the THP mode and the virtio-balloon probe
//   pal_posix_generic.cpp  where Linux's own paths are not taken (macOS, FreeBSD, posix-generic)
//
// RESERVOIR_PAL_LINUX is 1 where Linux's own paths are taken (MAP_NORESERVE, MADV_POPULATE_WRITE,
// decommit by madvise + mprotect): on Linux, unless the posix-generic build
// (RESERVOIR_POSIX_GENERIC) turns them off so that the paths macOS and FreeBSD take run and are
// tested on Linux.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <system_error>

#include "pal_internal.hpp"

#if !defined(RESERVOIR_PAL_LINUX)
#error "RESERVOIR_PAL_LINUX is defined by CMakeLists.txt, which chooses pal's files"
#endif

namespace reservoir::pal::detail {

inline std::error_code last_error() noexcept {
  return os_error(errno);
}

// Turns thread cancellation off for its scope. open(), read() and close() are cancellation
// points, and the functions that call them here are noexcept: a cancellation acted on inside
// them would unwind through noexcept code, which ends the process (std::terminate). A
// cancellation requested meanwhile stays pending for the thread's next cancellation point.
class CancellationOff {
 public:
  CancellationOff() noexcept : ok_(::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_) == 0) {}
  ~CancellationOff() {
    if (ok_) (void)::pthread_setcancelstate(old_, &old_);  // restoring a valid state cannot fail
  }
  CancellationOff(const CancellationOff&) = delete;
  CancellationOff& operator=(const CancellationOff&) = delete;

 private:
  int old_ = PTHREAD_CANCEL_ENABLE;
  bool ok_;
};

// What the OS answers once is kept in constant-initialized atomics, never in function-local
// statics: a static's initialization guard stays "in progress" in a child forked while another
// thread was initializing it, and the child then waits for it forever. Two threads that ask
// first may both ask the OS; they get the same answer.

// A yes/no answer kept in `kept` (-1: not asked yet).
template <class Ask>
bool kept_answer(std::atomic<int>& kept, Ask ask) noexcept {
  int v = kept.load(std::memory_order_relaxed);
  if (v < 0) {
    v = ask() ? 1 : 0;
    kept.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}

// The kernel's page size, whatever a test forces page_size() to: the unit of the page counts the
// OS reports (RSS). In pal_posix.cpp.
std::size_t os_page_size() noexcept;

// Sleeps one poll of wait_while_equal, where it cannot sleep on the word itself. In pal_posix.cpp.
void sleep_word_poll() noexcept;

// ---- Linux's files (pal_linux_limits.cpp) ------------------------------------------------------

// Reads up to size-1 bytes of a small /proc or /sys file into buf, NUL-terminated; false if it
// cannot.
bool read_small_file(const char* path, char* buf, std::size_t size) noexcept;

// A "Key:   123 kB" line of a /proc file (/proc/self/status, /proc/meminfo).
struct KibField {
  const char* key;     // the line's first word, without its colon
  std::size_t* value;  // set to the number times 1024; left as it was where no line has the key
};
// The one reader of such lines: reads `path` once and fills fields[0, count); false if the file
// cannot be opened.
bool read_proc_kib_fields(const char* path, const KibField* fields, std::size_t count) noexcept;
// One such line of `path`: the number times 1024, or 0.
std::size_t read_proc_kib(const char* path, const char* key) noexcept;

}  // namespace reservoir::pal::detail

namespace reservoir::pal {
using detail::CancellationOff;
using detail::kept_answer;
using detail::KibField;
using detail::last_error;
using detail::os_page_size;
using detail::read_proc_kib;
using detail::read_proc_kib_fields;
using detail::read_small_file;
using detail::sleep_word_poll;
}  // namespace reservoir::pal
