// What explains the bench's numbers on this machine: the transparent-huge-page and overcommit
// modes, whether a hypervisor is present, and what one first-touch page fault costs in each kind
// of mapping the contenders use.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <reservoir/pal.hpp>

#include "baselines.hpp"

#if !defined(_WIN32)
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>  // getloadavg
#endif

namespace reservoir::bench {

// The first line of a /proc or /sys file, "n/a" where there is none (not Linux).
inline std::string first_line_of(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return "n/a";
  return line;
}

// Linux: "always [madvise] never" -> "madvise" (the bracketed choice).
inline std::string thp_mode() {
  const std::string line = first_line_of("/sys/kernel/mm/transparent_hugepage/enabled");
  const auto a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? line.substr(a + 1, b - a - 1)
                                                                   : line;
}

// Linux vm.overcommit_memory: 0 heuristic, 1 always, 2 strict.
inline std::string overcommit_mode() {
  const std::string v = first_line_of("/proc/sys/vm/overcommit_memory");
  if (v == "0") return "0 (heuristic)";
  if (v == "1") return "1 (always)";
  if (v == "2") return "2 (strict)";
  return v;
}

// The 1-minute load average and the CPUs online when the run started, "3.10 on 2 CPUs": a loaded
// machine makes every timing noisier (ratios within one run still hold best). "n/a" on Windows.
inline std::string load_average() {
#if defined(_WIN32)
  return "n/a";
#else
  double load[1] = {0};
  if (::getloadavg(load, 1) != 1) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f on %ld CPUs", load[0], ::sysconf(_SC_NPROCESSORS_ONLN));
  return text;
#endif
}

// CPUID leaf 1, ECX bit 31: set by hypervisors for their guests. "unknown" off x86.
inline std::string hypervisor_present() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 1, b = 0, c = 0, d = 0;
  __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d) : "2"(0u));
  return (c >> 31) & 1u ? "yes" : "no";
#else
  return "unknown";
#endif
}

// Nanoseconds per page to write one byte into each page of a fresh mapping of `bytes`:
//   kind 0: a read-write mmap, as malloc makes large blocks (one fault per page);
//   kind 1: a PROT_NONE reservation opened by mprotect in 64 KiB steps, then written;
//   kind 2: a populated mapping (the populate included in the time);
//   kind 3: a read-write mmap advised for transparent huge pages, 2 MiB aligned (one fault per
//           2 MiB; the time per 4 KiB of it), Linux with THP honouring MADV_HUGEPAGE only.
// 0 where the kind cannot be measured on this system.
inline double first_touch_ns_per_page(int kind, std::size_t bytes = std::size_t{64} << 20) {
#if defined(_WIN32)
  (void)kind;
  (void)bytes;
  return 0;
#else
  const std::size_t page = pal::page_size();
  using clock = std::chrono::steady_clock;
  if (kind == 3) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (!pal::transparent_huge_pages()) return 0;
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const auto t0 = clock::now();
    void* m =
        mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 0;
    const auto start = reinterpret_cast<std::uintptr_t>(m);
    auto* p = reinterpret_cast<char*>((start + kHuge - 1) / kHuge * kHuge);
    if (madvise(p, bytes, MADV_HUGEPAGE) != 0) {
      munmap(m, bytes + kHuge);
      return 0;
    }
    for (std::size_t off = 0; off < bytes; off += 4096)
      static_cast<volatile char*>(p)[off] = 1;
    const auto t1 = clock::now();
    munmap(m, bytes + kHuge);
    return std::chrono::duration<double, std::nano>(t1 - t0).count() /
           static_cast<double>(bytes / 4096);
#else
    return 0;
#endif
  }
  const auto t0 = clock::now();
  void* p = nullptr;
  if (kind == 2) {
    p = populated_map(bytes);
  } else {
    p = mmap(nullptr, bytes, kind == 0 ? PROT_READ | PROT_WRITE : PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
  }
  const std::size_t step = std::size_t{64} << 10;
  for (std::size_t off = 0; off < bytes; off += page) {
    if (kind == 1 && off % step == 0 &&
        mprotect(static_cast<char*>(p) + off, step, PROT_READ | PROT_WRITE) != 0) {
      munmap(p, bytes);
      return 0;
    }
    static_cast<volatile char*>(p)[off] = 1;
  }
  const auto t1 = clock::now();
  munmap(p, bytes);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() /
         static_cast<double>(bytes / page);
#endif
}

}  // namespace reservoir::bench
