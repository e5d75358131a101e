// The fresh-process harness: one tiny program per contender (harness_*.cpp), each run as its own
// process, nothing warmed: it fills one container with N ints by push_back (the floor: one
// populated mapping of the final size filled by a store loop) and prints
//   seconds=S minor_faults=F
// S: from just before the container is made to just after the last store; F: the page faults the
// process took meanwhile. scripts/bench_harness.py runs them alternately and beside the bench's
// own throughput cells, so that the two can be held against each other. Deliberately independent
// of the bench: no code of bench/ is included.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace harness {

inline long minor_faults() {
  struct rusage ru{};
  return ::getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

// Keeps the optimizer from deleting the stores.
inline volatile std::uint64_t g_sink = 0;

// argv[1]: the element count (e.g. 1e6). Calls fill(n), which builds and fills the container and
// returns a value read from it, timed.
template <class Fill>
int run(int argc, char** argv, Fill fill) {
  const double count = argc == 2 ? std::strtod(argv[1], nullptr) : 0;
  if (!(count >= 1 && count <= 1e12)) {
    std::fprintf(stderr, "usage: %s N (1 <= N <= 1e12 ints)\n", argv[0]);
    return 2;
  }
  const auto n = static_cast<std::uint64_t>(count);
  const long faults_before = minor_faults();
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t check = fill(n);
  const auto t1 = std::chrono::steady_clock::now();
  g_sink = check;
  std::printf("seconds=%.9g minor_faults=%ld\n", std::chrono::duration<double>(t1 - t0).count(),
              minor_faults() - faults_before);
  return 0;
}

}  // namespace harness
