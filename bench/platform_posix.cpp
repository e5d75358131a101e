// The bench's platform layer for POSIX systems: Linux, macOS and FreeBSD. Their differences are
// the marked #if blocks.
#include "platform.hpp"

#include <sys/types.h>
#include <sys/utsname.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <mach/mach.h>
#elif defined(__FreeBSD__)
#include <sys/sysctl.h>
#endif

namespace reservoir::bench {
namespace {

#if defined(__APPLE__) || defined(__FreeBSD__)
std::size_t os_page_size() noexcept {
  const long v = ::sysconf(_SC_PAGESIZE);
  return v > 0 ? static_cast<std::size_t>(v) : static_cast<std::size_t>(::getpagesize());
}
#endif

}  // namespace

std::size_t anon_huge_pages() noexcept {
  return reservoir::process::proc_kib_line("/proc/self/smaps_rollup", "AnonHugePages");
}

std::size_t available_memory() noexcept {
#if defined(__linux__)
  return reservoir::process::proc_kib_line("/proc/meminfo", "MemAvailable");
#elif defined(__APPLE__)
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  // mach_host_self() hands out a send right each call: give it back, or every call leaks one.
  const mach_port_t host = mach_host_self();
  const kern_return_t kr =
      host_statistics64(host, HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count);
  (void)mach_port_deallocate(mach_task_self(), host);
  if (kr != KERN_SUCCESS) return 0;
  return (static_cast<std::size_t>(vm.free_count) + vm.inactive_count) * os_page_size();
#elif defined(__FreeBSD__)
  unsigned free_pages = 0, inactive_pages = 0;
  std::size_t len = sizeof(free_pages);
  if (::sysctlbyname("vm.stats.vm.v_free_count", &free_pages, &len, nullptr, 0) != 0) return 0;
  len = sizeof(inactive_pages);
  if (::sysctlbyname("vm.stats.vm.v_inactive_count", &inactive_pages, &len, nullptr, 0) != 0) {
    inactive_pages = 0;
  }
  return (static_cast<std::size_t>(free_pages) + inactive_pages) * os_page_size();
#else
  return 0;
#endif
}

std::string os_description() {
  struct utsname u{};
  if (::uname(&u) != 0) return "unknown POSIX";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

bool stderr_is_terminal() noexcept {
  return ::isatty(STDERR_FILENO) == 1;
}

}  // namespace reservoir::bench
