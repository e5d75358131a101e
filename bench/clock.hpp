// The bench's clock: the x86 time-stamp counter calibrated against std::chrono::steady_clock
// where there is one (a read costs a few ns instead of ~20), steady_clock elsewhere.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <x86intrin.h>
#endif
#define RESERVOIR_BENCH_HAVE_TSC 1
#endif

namespace reservoir::bench {

class TickClock {
 public:
  static std::uint64_t now() noexcept {
#if defined(RESERVOIR_BENCH_HAVE_TSC)
    return __rdtsc();
#else
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
#endif
  }
  static const char* name() noexcept {
#if defined(RESERVOIR_BENCH_HAVE_TSC)
    return "rdtsc (calibrated against steady_clock)";
#else
    return "steady_clock";
#endif
  }

  // Nanoseconds per tick, measured against steady_clock over `ms` milliseconds.
  static double calibrate(int ms = 50) {
#if defined(RESERVOIR_BENCH_HAVE_TSC)
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const std::uint64_t c0 = now();
    while (clock::now() - t0 < std::chrono::milliseconds(ms)) {
    }
    const std::uint64_t c1 = now();
    const auto t1 = clock::now();
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    return c1 > c0 ? ns / static_cast<double>(c1 - c0) : 1.0;
#else
    (void)ms;
    return 1.0;
#endif
  }

  // The cost of one timed empty interval (two back-to-back reads), in ticks: the median of many.
  static std::uint64_t overhead_ticks() {
    std::vector<std::uint64_t> d(10001);
    for (auto& x : d) {
      const std::uint64_t a = now();
      x = now() - a;
    }
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    return d[d.size() / 2];
  }
};

}  // namespace reservoir::bench
