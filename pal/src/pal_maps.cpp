// Kernel mappings: how many a process may hold (Linux vm.max_map_count) and guard markers, the
// guards that cost none (MADV_GUARD_INSTALL / MADV_GUARD_REMOVE, Linux 6.13+). Compiled on every
// platform: elsewhere there is no mapping count to read and no marker to install.
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <system_error>

#include <reservoir/pal.hpp>

#include "pal_internal.hpp"

#if defined(__linux__) && !defined(RESERVOIR_POSIX_GENERIC)
#define RESERVOIR_PAL_MAPS_LINUX 1
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#else
#define RESERVOIR_PAL_MAPS_LINUX 0
#endif

namespace reservoir::pal {
namespace {

std::atomic<std::size_t> g_fake_max_map_count{0};  // testing::set_max_map_count; 0: none

#if RESERVOIR_PAL_MAPS_LINUX
std::atomic<std::size_t> g_max_map_count{0};  // the last reading; 0: none yet
// 1: the kernel takes guard markers; 0: it does not; -1: not asked yet.
std::atomic<int> g_markers{-1};

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102  // Linux 6.13 uapi values; older headers lack them
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

// The number in a /proc/sys file, or 0 if it cannot be read.
std::size_t read_sysctl_number(const char* path) noexcept {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  (void)::close(fd);  // read-only: nothing to lose
  if (n <= 0) return 0;
  std::size_t v = 0;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i)
    v = v * 10 + static_cast<std::size_t>(buf[i] - '0');
  return v;
}

// Asks the kernel once, on a page of its own: a kernel before 6.13 answers EINVAL.
bool probe_markers() noexcept {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;  // asked again next time
  const bool ok = ::madvise(p, page, MADV_GUARD_INSTALL) == 0;
  (void)::munmap(p, page);  // a page of our own: its release cannot concern anyone else
  g_markers.store(ok ? 1 : 0, std::memory_order_relaxed);
  return ok;
}
#endif

}  // namespace

std::size_t max_map_count([[maybe_unused]] bool reread) noexcept {
  if (std::size_t fake = g_fake_max_map_count.load(std::memory_order_relaxed)) return fake;
#if RESERVOIR_PAL_MAPS_LINUX
  std::size_t known = g_max_map_count.load(std::memory_order_relaxed);
  if (known == 0 || reread) {
    known = read_sysctl_number("/proc/sys/vm/max_map_count");
    g_max_map_count.store(known, std::memory_order_relaxed);
  }
  return known;
#else
  return 0;
#endif
}

std::size_t max_map_count_known() noexcept {
  if (std::size_t fake = g_fake_max_map_count.load(std::memory_order_relaxed)) return fake;
#if RESERVOIR_PAL_MAPS_LINUX
  return g_max_map_count.load(std::memory_order_relaxed);
#else
  return 0;
#endif
}

bool guard_markers() noexcept {
  if (testing::guard_install_refused()) return false;
#if RESERVOIR_PAL_MAPS_LINUX
  const int known = g_markers.load(std::memory_order_relaxed);
  return known < 0 ? probe_markers() : known == 1;
#else
  return false;
#endif
}

std::error_code unguard([[maybe_unused]] void* addr, [[maybe_unused]] std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::guard, &ec)) return ec;
#if RESERVOIR_PAL_MAPS_LINUX
  if (::madvise(addr, size, MADV_GUARD_REMOVE) != 0) return os_error(errno);
  return {};
#else
  return std::make_error_code(std::errc::not_supported);
#endif
}

void testing::set_max_map_count(std::size_t count) noexcept {
  g_fake_max_map_count.store(count, std::memory_order_relaxed);
}

}  // namespace reservoir::pal
