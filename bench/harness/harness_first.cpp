// The harness's first-array program: what a process's first container costs against its second.
//   harness_first dynarray|arena
// In a fresh process (nothing of the library touched before), times the first DynArray<int>
// (default options) made and given one push_back, then a second one made the same way while the
// first still lives; or the same with an Arena (default options) and one 64-byte allocation.
// Prints
//   kind=K first_ns=A second_ns=B extra_ns=A-B minor_faults_first=F minor_faults_second=G
// One process per run: scripts/bench_harness.py (or a shell loop) takes medians over runs. The
// system calls of the first container are counted with strace -f -c on the same program.
#include <reservoir/reservoir.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>

#include "harness.hpp"

namespace {

using Clock = std::chrono::steady_clock;

long long ns_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// The clock's and the fault counter's own first use (symbol binding, the vDSO's data pages) would
// otherwise fall into the first container's window: made once before anything is timed.
void warm_the_instruments() {
  (void)Clock::now();
  (void)harness::minor_faults();
}

int report(const char* kind, long long first, long long second, long f1, long f2) {
  std::printf(
      "kind=%s first_ns=%lld second_ns=%lld extra_ns=%lld minor_faults_first=%ld "
      "minor_faults_second=%ld\n",
      kind, first, second, first - second, f1, f2);
  return 0;
}

int dynarrays() {
  std::optional<reservoir::DynArray<int>> a, b;
  warm_the_instruments();
  const long f0 = harness::minor_faults();
  const auto t0 = Clock::now();
  a.emplace();
  a->push_back(1);
  const auto t1 = Clock::now();
  const long f1 = harness::minor_faults();
  b.emplace();
  b->push_back(2);
  const auto t2 = Clock::now();
  const long f2 = harness::minor_faults();
  harness::g_sink = static_cast<std::uint64_t>(a->back() + b->back());
  return report("dynarray", ns_between(t0, t1), ns_between(t1, t2), f1 - f0, f2 - f1);
}

int arenas() {
  std::optional<reservoir::Arena> a, b;
  warm_the_instruments();
  const long f0 = harness::minor_faults();
  const auto t0 = Clock::now();
  a.emplace(std::size_t{1} << 30);
  auto* p = static_cast<unsigned char*>(a->allocate(64));
  p[0] = 1;
  const auto t1 = Clock::now();
  const long f1 = harness::minor_faults();
  b.emplace(std::size_t{1} << 30);
  auto* q = static_cast<unsigned char*>(b->allocate(64));
  q[0] = 2;
  const auto t2 = Clock::now();
  const long f2 = harness::minor_faults();
  harness::g_sink = static_cast<std::uint64_t>(p[0] + q[0]);
  return report("arena", ns_between(t0, t1), ns_between(t1, t2), f1 - f0, f2 - f1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "dynarray") == 0) return dynarrays();
  if (argc == 2 && std::strcmp(argv[1], "arena") == 0) return arenas();
  std::fprintf(stderr, "usage: %s dynarray|arena\n", argv[0]);
  return 2;
}
