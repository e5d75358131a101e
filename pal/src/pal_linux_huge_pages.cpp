// pal on Linux, its own paths (RESERVOIR_PAL_LINUX): whether the kernel honours the huge-page
// advice (the transparent huge pages mode, from sysfs) and whether the host takes free pages back
// (the virtio-balloon probe). pal_posix_generic.cpp has the other systems' answers.
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "pal_posix_internal.hpp"

namespace reservoir::pal {

namespace {
[[maybe_unused]] std::atomic<int> g_thp_honoured{-1};
std::atomic<int> g_host_reclaims{-1};
}  // namespace

bool transparent_huge_pages() noexcept {
  if (const int forced = detail::transparent_huge_pages_override(); forced >= 0) return forced;
#if defined(MADV_HUGEPAGE)
  // The file reads "always [madvise] never": the bracketed word is the mode in force. `always`
  // and `madvise` both honour MADV_HUGEPAGE; `never` (or no file: no THP) ignores it.
  return kept_answer(g_thp_honoured, [] {
    char buf[128];
    if (!read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf)) {
      return false;
    }
    return std::strstr(buf, "[always]") != nullptr || std::strstr(buf, "[madvise]") != nullptr;
  });
#else
  return false;
#endif
}

bool host_reclaims_free_pages() noexcept {
  if (detail::transparent_huge_pages_override() >= 0) return false;
  // A virtio balloon (virtio device id 5) that negotiated VIRTIO_BALLOON_F_REPORTING (feature
  // bit 5; the features file lists bits from 0 as '0'/'1') hands free guest pages to the host in
  // blocks of the page reporting order (2 MiB by default). Such blocks are exactly what a huge
  // page is made of, and the host must fault them in again when the guest reuses them.
  return kept_answer(g_host_reclaims, [] {
    char path[96];
    char buf[160];
    for (int i = 0; i < 64; ++i) {
      std::snprintf(path, sizeof path, "/sys/bus/virtio/devices/virtio%d/device", i);
      if (!read_small_file(path, buf, sizeof buf)) {
        if (i >= 8) break;  // numbering may have gaps after hot-unplug; stop well past them
        continue;
      }
      if (std::strtol(buf, nullptr, 0) != 5) continue;
      std::snprintf(path, sizeof path, "/sys/bus/virtio/devices/virtio%d/features", i);
      if (read_small_file(path, buf, sizeof buf) && std::strlen(buf) > 5 && buf[5] == '1') {
        return true;
      }
    }
    return false;
  });
}

}  // namespace reservoir::pal
