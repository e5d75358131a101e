// The fresh-process harness: one tiny program per contender (harness_*.cpp), each run as its own
// process, nothing warmed: it fills one container with N ints by push_back (the floor: one
// populated mapping of the final size filled by a store loop) and prints
//   seconds=S minor_faults=F
// S: from just before the container is made to just after the last store (its destruction is not
// timed); F: the page faults the process took meanwhile. scripts/bench_harness.py runs them
// alternately and beside the bench's own throughput cells, so that the two can be held against each
// other. Deliberately independent of the bench: no code of bench/ is included.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>

namespace harness {

inline long minor_faults() {
  struct rusage ru{};
  return ::getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

// Keeps the optimizer from deleting the stores.
inline volatile std::uint64_t g_sink = 0;

// Where a contender's timing ends: fill calls stop() right after its last store, before its
// container is destroyed, so no contender's teardown is timed (the floor never unmaps its mapping;
// the others would otherwise pay for freeing hundreds of MiB inside the clock).
class Stopwatch {
 public:
  void stop() noexcept {
    if (stopped_) return;
    stop_ = std::chrono::steady_clock::now();
    faults_ = minor_faults();
    stopped_ = true;
  }
  bool stopped() const noexcept { return stopped_; }
  std::chrono::steady_clock::time_point at() const noexcept { return stop_; }
  long faults() const noexcept { return faults_; }

 private:
  std::chrono::steady_clock::time_point stop_{};
  long faults_ = 0;
  bool stopped_ = false;
};

// argv[1]: the element count (e.g. 1e6). Calls fill(n, watch), which builds and fills the
// container, calls watch.stop() after its last store and returns a value read from it; timed from
// just before the call to the stop (and the faults counted up to it).
template <class Fill>
int run(int argc, char** argv, Fill fill) {
  const double count = argc == 2 ? std::strtod(argv[1], nullptr) : 0;
  if (!(count >= 1 && count <= 1e12)) {
    std::fprintf(stderr, "usage: %s N (1 <= N <= 1e12 ints)\n", argv[0]);
    return 2;
  }
  const auto n = static_cast<std::uint64_t>(count);
  const long faults_before = minor_faults();
  Stopwatch watch;
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t check = fill(n, watch);
  if (!watch.stopped()) {
    std::fprintf(stderr, "%s: the contender never stopped the clock\n", argv[0]);
    return 3;
  }
  g_sink = check;
  std::printf("seconds=%.9g minor_faults=%ld\n",
              std::chrono::duration<double>(watch.at() - t0).count(),
              watch.faults() - faults_before);
  return 0;
}

// The element types, made as reservoir-bench makes them: the int i, a std::string of 15
// characters (held in the string's own buffer) and a std::unique_ptr<int> (one heap block each).
template <class T>
T element(std::uint64_t i) {
  if constexpr (std::is_same_v<T, int>) {
    return static_cast<int>(i);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return std::string(15, static_cast<char>('a' + i % 26));
  } else {
    return std::make_unique<int>(static_cast<int>(i));
  }
}

// A value read from an element, so that the fill cannot be optimized away.
inline std::uint64_t read(int v) {
  return static_cast<std::uint64_t>(v);
}
inline std::uint64_t read(const std::string& s) {
  return s.size() + static_cast<unsigned char>(s[0]);
}
inline std::uint64_t read(const std::unique_ptr<int>& p) {
  return static_cast<std::uint64_t>(*p);
}

// The program for a container of T made by make(): push_back of n elements from empty, timed to
// the last one (the container and its elements are destroyed after the clock stops).
template <class T, class Make>
int run_typed(int argc, char** argv, Make make) {
  return run(argc, argv, [&make](std::uint64_t n, Stopwatch& watch) -> std::uint64_t {
    auto c = make();
    for (std::uint64_t i = 0; i < n; ++i)
      c.push_back(element<T>(i));
    watch.stop();
    return c.size() + read(c.back());
  });
}

}  // namespace harness
