// pal on macOS and FreeBSD: the resident set, through each one's own call (the marked #if
// blocks); no memory limit and no machine memory are read (no cgroups, and no step is refused for
// the machine's memory).
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "pal_posix_internal.hpp"

#if defined(__APPLE__)
#include <mach/mach.h>
#elif defined(__FreeBSD__)
#include <sys/sysctl.h>
#include <sys/user.h>
#endif

namespace reservoir::pal {

// ---- resident memory ---------------------------------------------------------------------------

std::size_t current_rss() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
#if defined(__APPLE__)
  mach_task_basic_info_data_t info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, reinterpret_cast<task_info_t>(&info),
                &count) != KERN_SUCCESS) {
    return 0;
  }
  return static_cast<std::size_t>(info.resident_size);
#elif defined(__FreeBSD__)
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, static_cast<int>(::getpid())};
  struct kinfo_proc kp{};
  std::size_t len = sizeof(kp);
  if (::sysctl(mib, 4, &kp, &len, nullptr, 0) != 0) return 0;
  return static_cast<std::size_t>(kp.ki_rssize) * os_page_size();
#else
  return 0;
#endif
}

// ---- limits ------------------------------------------------------------------------------------

bool memory_limit(MemoryLimit* out) noexcept {
  out->unreadable = false;
  if (std::error_code ec; injected_failure(Op::stats, &ec)) {
    out->unreadable = true;
    return false;
  }
  return false;  // no cgroups
}

bool machine_memory(MachineMemory* out) noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return false;
  if (detail::machine_memory_override(out)) return true;
  return false;  // the machine's memory is not read here: no step is refused for it
}

bool address_space_limit(AddressSpaceLimit* out) noexcept {
  struct rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return false;
  out->limit = static_cast<std::size_t>(lim.rlim_cur);
  out->in_use = 0;
  return true;
}

}  // namespace reservoir::pal
