// The harness's DynArray under a chosen population policy, push_back from empty on the default
// reservation, held beside harness_dynarray (the default options) to compare policies. One source,
// three programs (bench/harness/CMakeLists.txt):
//   harness_dynarray_faults    HARNESS_PREFAULT 0: population left to the appends' first touches
//                              (geometric steps, each a permission change)
//   harness_dynarray_populate  HARNESS_PREFAULT 1: every bounded step populated as it is committed
//   harness_dynarray_step      HARNESS_PREFAULT 1 and max_commit_step =
//                              $RESERVOIR_HARNESS_STEP_KIB KiB (default 2048): for choosing the
//                              step of a population policy
#include <cstdlib>

#include <reservoir/reservoir.hpp>

#include "harness.hpp"

#ifndef HARNESS_PREFAULT
#error "HARNESS_PREFAULT (0 or 1) is set by bench/harness/CMakeLists.txt"
#endif

int main(int argc, char** argv) {
  reservoir::ArenaOptions options;
  options.prefault = HARNESS_PREFAULT != 0;
#ifdef HARNESS_STEP_FROM_ENV
  const char* kib = std::getenv("RESERVOIR_HARNESS_STEP_KIB");
  options.max_commit_step = (kib ? std::strtoull(kib, nullptr, 10) : 2048) * 1024;
#endif
  return harness::run(argc, argv, [options](std::uint64_t n, auto& watch) -> std::uint64_t {
    reservoir::DynArray<int> a(
        reservoir::max_elements(reservoir::DynArray<int>::default_max_size()), options);
    for (std::uint64_t i = 0; i < n; ++i)
      a.push_back(static_cast<int>(i));
    watch.stop();
    return a.size() + static_cast<std::uint64_t>(a.back());
  });
}
