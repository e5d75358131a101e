// Memory limits: a commit step that would cross the process's memory limit is refused with
// OsAllocationError naming the limit, and nothing stored is lost. For real in a Linux memory
// cgroup (created here when running as root), where the same growth without the check is killed
// by the OOM killer, as std::vector would be; and with a limit set by hand everywhere.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <ranges>
#include <string>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

#if defined(__linux__)
#include <sys/stat.h>
#include <unistd.h>
#endif

using reservoir::DynArray;
using reservoir::OsAllocationError;
namespace pal = reservoir::pal;

namespace {

// The ints 0 .. n - 1 as a forward range that stores none of them (std::views::iota does not
// compile with clang 14 and libstdc++ 12's ranges).
struct Counting {
  struct iterator {
    using iterator_concept = std::forward_iterator_tag;
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    int i = 0;
    int operator*() const noexcept { return i; }
    iterator& operator++() noexcept {
      ++i;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator was = *this;
      ++i;
      return was;
    }
    bool operator==(const iterator&) const = default;
  };
  int n = 0;
  iterator begin() const noexcept { return {0}; }
  iterator end() const noexcept { return {n}; }
};

// Grows an array of ints toward `target` bytes; returns 0 if a memory-limit refusal came with
// every element intact, and prints the message.
int grow_until_refused(std::size_t target) {
  DynArray<int> a;
  std::size_t n = 0;
  try {
    for (; n * sizeof(int) < target; ++n)
      a.push_back(static_cast<int>(n));
    std::printf("no refusal: grew to %zu MiB\n", (n * sizeof(int)) >> 20);
    return 3;
  } catch (const OsAllocationError& e) {
    std::printf("refused at %zu MiB: %s\n", (n * sizeof(int)) >> 20, e.what());
  }
  if (a.size() != n) return 4;
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != static_cast<int>(i)) return 5;
  }
  return 0;
}

#if defined(__linux__)
// Moves this process into the cgroup directory named by RESERVOIR_TEST_CGROUP.
bool join_test_cgroup() {
  const char* dir = std::getenv("RESERVOIR_TEST_CGROUP");
  if (!dir) return false;
  std::ofstream procs(std::string(dir) + "/cgroup.procs");
  procs << ::getpid() << std::flush;
  return static_cast<bool>(procs);
}

// Which cgroup hierarchy a TestCgroup is made in.
enum class CgroupKind { any, v1, v2 };

// A memory cgroup limited to `limit` bytes, removed again on destruction; empty path if it
// cannot be made here (not root, no memory controller, read-only cgroupfs).
struct TestCgroup {
  std::string path;
  std::string why_not;
  explicit TestCgroup(std::size_t limit, CgroupKind kind = CgroupKind::any) {
    static int serial = 0;
    const std::string name =
        "/reservoir-test-" + std::to_string(::getpid()) + "-" + std::to_string(++serial);
    struct Candidate {
      const char* root;
      const char* limit_file;
      CgroupKind kind;
    };
    // v1 memory controller, or a v2 hierarchy that offers the memory controller.
    for (Candidate c : {Candidate{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", CgroupKind::v1},
                        Candidate{"/sys/fs/cgroup", "memory.max", CgroupKind::v2},
                        Candidate{"/sys/fs/cgroup/unified", "memory.max", CgroupKind::v2}}) {
      if (kind != CgroupKind::any && kind != c.kind) continue;
      const std::string root = c.root;
      if (c.kind == CgroupKind::v2) {
        std::ifstream controllers(root + "/cgroup.controllers");
        std::string all;
        std::getline(controllers, all);
        if ((" " + all + " ").find(" memory ") == std::string::npos) {
          if (why_not.empty()) why_not = "no cgroup v2 hierarchy here offers the memory controller";
          continue;
        }
        std::ofstream(root + "/cgroup.subtree_control") << "+memory" << std::flush;
      }
      if (::mkdir((root + name).c_str(), 0755) != 0) {
        why_not = "cannot create " + root + name;
        continue;
      }
      std::ofstream limit_out(root + name + "/" + c.limit_file);
      limit_out << limit << std::flush;
      if (!limit_out) {
        ::rmdir((root + name).c_str());
        why_not = "cannot set " + root + name + "/" + c.limit_file;
        continue;
      }
      path = root + name;
      return;
    }
    if (why_not.empty()) why_not = "no memory cgroup controller is mounted";
  }
  ~TestCgroup() {
    if (!path.empty()) ::rmdir(path.c_str());
  }
  TestCgroup(const TestCgroup&) = delete;
  TestCgroup& operator=(const TestCgroup&) = delete;
};

std::string kind_name(CgroupKind kind) {
  return kind == CgroupKind::v1 ? "v1" : kind == CgroupKind::v2 ? "v2" : "any";
}

// Runs child scenario `name` in a fresh memory cgroup of `limit` bytes of the given kind; false
// (and a printed reason) if no such cgroup can be made here.
bool run_in_cgroup(const char* name, std::size_t limit, CgroupKind kind, test::ProcessResult* r) {
  TestCgroup cg(limit, kind);
  if (cg.path.empty()) {
    MESSAGE("cgroup " << kind_name(kind) << " skipped: " << cg.why_not
                      << " (needs root and a memory cgroup controller)");
    return false;
  }
  ::setenv("RESERVOIR_TEST_CGROUP", cg.path.c_str(), 1);
  *r = test::run_child(name);
  ::unsetenv("RESERVOIR_TEST_CGROUP");
  return true;
}

// Ends the process (as a kill would) once its resident set passes `bytes`: the safety net of the
// tests that ask for more memory than the machine has, should the check under test fail.
void start_rss_watchdog(std::size_t bytes) {
  std::thread([bytes] {
    for (;;) {
      if (pal::current_rss() > bytes) {
        std::printf("watchdog: resident set passed %zu MiB\n", bytes >> 20);
        std::fflush(stdout);
        ::_exit(9);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }).detach();
}
#endif

}  // namespace

#if defined(__linux__)
RESERVOIR_CHILD("memory_limit.cgroup_checked") {
  if (!join_test_cgroup()) return 2;
  return grow_until_refused(std::size_t{2} << 30);
}

// The same, with the cgroup's mount found in /proc/self/mountinfo, as on systems that mount the
// memory controller elsewhere than /sys/fs/cgroup.
RESERVOIR_CHILD("memory_limit.cgroup_checked_mountinfo") {
  if (!join_test_cgroup()) return 2;
  pal::testing::skip_conventional_cgroup_mounts(true);
  return grow_until_refused(std::size_t{2} << 30);
}

RESERVOIR_CHILD("memory_limit.cgroup_unchecked") {
  if (!join_test_cgroup()) return 2;
  reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
  return grow_until_refused(std::size_t{2} << 30);  // expected to be killed instead
}

// 16 threads, each growing its own default array until the limit refuses a step: every thread
// must end with a refusal and its elements intact, and the process must not be killed.
RESERVOIR_CHILD("memory_limit.threads_race") {
  if (!join_test_cgroup()) return 2;
  constexpr int kThreads = 16;
  std::atomic<int> refused{0}, intact{0};
  std::atomic<std::size_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      DynArray<int> a;
      std::size_t n = 0;
      try {
        for (;; ++n)
          a.push_back(static_cast<int>(n));
      } catch (const std::bad_alloc&) {
        refused.fetch_add(1);
      }
      bool ok = a.size() == n;
      for (std::size_t i = 0; ok && i < n; ++i)
        ok = a[i] == static_cast<int>(i);
      intact.fetch_add(ok ? 1 : 0);
      total.fetch_add(n * sizeof(int));
    });
  }
  for (std::thread& t : threads)
    t.join();
  std::printf("%d threads: %d refused, %d intact, %zu MiB held together\n", kThreads,
              refused.load(), intact.load(), total.load() >> 20);
  return refused == kThreads && intact == kThreads ? 0 : 3;
}

// reserve() far past the limit commits without backing, so it is not refused; filling part of it
// works.
RESERVOIR_CHILD("memory_limit.reserve_beyond_limit") {
  if (!join_test_cgroup()) return 2;
  DynArray<char> a;
  try {
    a.reserve(std::size_t{1} << 30);
  } catch (const std::exception& e) {
    std::printf("reserve(1 GiB) refused: %s\n", e.what());
    return 3;
  }
  const std::size_t fill = std::size_t{100} << 20;
  for (std::size_t i = 0; i < fill; ++i)
    a.push_back(static_cast<char>(i));
  for (std::size_t i = 0; i < fill; i += 4093) {
    if (a[i] != static_cast<char>(i)) return 4;
  }
  std::printf("reserve(1 GiB) accepted, capacity %zu MiB, filled %zu MiB\n", a.capacity() >> 20,
              fill >> 20);
  return 0;
}

// An array of 1.5 x (RAM + swap) is refused up front, as std::vector's allocation is; nothing
// is populated first. Only the machine-wide check is under test here, so the memory-limit check
// is off; the cgroup (when there is one) and a watchdog on the resident set keep a failure of
// the check from taking the machine's memory.
RESERVOIR_CHILD("memory_limit.beyond_ram") {
  const char* dir = std::getenv("RESERVOIR_TEST_CGROUP");
  if (dir && !join_test_cgroup()) return 2;
  reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
  start_rss_watchdog(std::size_t{1} << 30);
  std::size_t ram = 0, swap = 0;
  {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib) {
      if (key == "MemTotal:") ram = kib << 10;
      if (key == "SwapTotal:") swap = kib << 10;
      std::getline(meminfo, unit);
    }
  }
  if (ram == 0) return 4;
  const std::size_t n = (ram + swap) / 2 * 3;
  try {
    if (n <= reservoir::kDefaultReserveBytes) {
      DynArray<char> a(n);
    } else {
      DynArray<char> a{reservoir::max_elements(n)};
      a.resize(n);
    }
  } catch (const std::bad_alloc& e) {
    std::printf("DynArray<char>(%zu GiB) refused: %s\n", n >> 30, e.what());
    return 0;
  }
  std::printf("DynArray<char>(%zu GiB) was not refused\n", n >> 30);
  return 3;
}
#endif

#if defined(__linux__)
namespace {
// The child's exit code where /proc/self/io does not count read() calls.
constexpr int kReadsNotCounted = 77;

// The read() calls this process has made (/proc/self/io's syscr), or -1 where it is not counted.
long read_calls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  long value = 0;
  while (io >> key >> value) {
    if (key == "syscr:") return value;
  }
  return -1;
}
}  // namespace

// A fresh process's first small DynArray and first Arena read nothing (no cgroup file, no
// /proc/meminfo, no huge-page setting: not one read() call, and no reading of the limits through
// pal); an arena without the limit checks reads nothing up to kHugePageThreshold; an array that
// grows past kUnreadCommitBytes starts the checks.
RESERVOIR_CHILD("memory_limit.first_array_reads_nothing") {
  const long r0 = read_calls();
  const long r1 = read_calls();
  if (r0 < 0 || r1 < 0) return kReadsNotCounted;
  const long own = r1 - r0;  // the read() calls of one read_calls()
  const std::uint64_t stats = pal::testing::calls(pal::Op::stats);
  const long before = read_calls();
  DynArray<int> a;
  a.push_back(1);
  DynArray<int> b(1000, 2);
  reservoir::Arena arena(std::size_t{1} << 30);
  static_cast<unsigned char*>(arena.allocate(64))[0] = 3;
  const long after = read_calls();
  std::printf("read() calls %ld, limit readings %llu; ", after - before - own,
              static_cast<unsigned long long>(pal::testing::calls(pal::Op::stats) - stats));
  // A sanitizer's runtime reads /proc files of its own (the memory map) as the process maps memory.
  if (after - before != own && !kAddressSanitizer && !kThreadSanitizer) return 3;
  if (pal::testing::calls(pal::Op::stats) != stats) return 4;
  // Without the limit checks and with population left to faults (prefault off), the machine's
  // huge-page setting is asked only once a step could reach past kHugePageThreshold: an arena
  // grown to exactly that reads nothing; its next step reads the setting. This relies on nothing
  // before it having asked pal::capabilities() in this process (it reads the setting once, for
  // good): `big` takes a slot of the pools' first large chunk (kFirstLargeChunkSlots is 2), so
  // no new chunk is sized (next_chunk asks it).
  {
    reservoir::ArenaOptions unchecked;
    unchecked.respect_memory_limit = false;
    unchecked.prefault = false;
    reservoir::Arena big(std::size_t{1} << 30, unchecked);
    const long at_start = read_calls();
    while (big.size() < reservoir::kHugePageThreshold)
      static_cast<unsigned char*>(big.allocate(std::size_t{64} << 10))[0] = 4;
    const long at_threshold = read_calls();
    if (big.committed() != reservoir::kHugePageThreshold) return 7;
    if (at_threshold - at_start != own && !kAddressSanitizer && !kThreadSanitizer) return 8;
    static_cast<unsigned char*>(big.allocate(1))[0] = 5;
    const long past = read_calls();
    std::printf("huge-page setting: read() calls %ld up to 4 MiB, %ld past it; ",
                at_threshold - at_start - own, past - at_threshold - own);
    // Where pal reads the setting and finds huge pages honoured (not in the generic-POSIX
    // build, which never reads it), the step past the threshold must have read it.
    if (past - at_threshold == own && !kAddressSanitizer && !kThreadSanitizer &&
        pal::capabilities().transparent_huge_pages) {
      return 9;  // the setting was never asked
    }
  }
  for (int i = 0; i < (4 << 20) / 4; ++i)
    a.push_back(i);
  std::printf("after 4 MiB: limit readings %llu\n",
              static_cast<unsigned long long>(pal::testing::calls(pal::Op::stats) - stats));
  if (pal::testing::calls(pal::Op::stats) == stats) return 5;  // the machine was never read
  return a.back() == (4 << 20) / 4 - 1 && b[999] == 2 ? 0 : 6;
}
#endif

TEST_SUITE("memory_limit") {
#if defined(__linux__)
  TEST_CASE("a fresh process's first small array and arena read no limit and no /proc file") {
    if (test::under_valgrind()) {
      MESSAGE("under valgrind (its own reads are counted): skipped");
      return;
    }
    const test::ProcessResult r = test::run_child("memory_limit.first_array_reads_nothing");
    MESSAGE(test::describe(r) << ": " << r.output);
    if (r.exited && r.exit_code == kReadsNotCounted)
      return;  // /proc/self/io does not count reads here
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
  }
#endif

  TEST_CASE("a limit set by hand: the step that would cross it is refused, nothing is lost") {
    const std::size_t rss = pal::current_rss();
    if (rss == 0) {
      MESSAGE("this OS does not report the resident set: skipped");
      return;
    }
    reservoir::set_memory_limit(rss + (std::size_t{96} << 20));
    const std::size_t headroom = reservoir::memory_limit_headroom();
    CHECK(headroom < (std::size_t{96} << 20));
    CHECK(grow_until_refused(std::size_t{1} << 30) == 0);
    {
      reservoir::ArenaOptions off;
      off.respect_memory_limit = false;  // per arena: not checked
      DynArray<int> a(reservoir::max_elements(std::size_t{64} << 20), off);
      CHECK_NOTHROW(a.resize(std::size_t{32} << 20));  // 128 MiB, past the limit
    }
    reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
    CHECK(reservoir::memory_limit_headroom() == reservoir::kMemoryLimitOff);
    reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  }

  // A step refused at the memory limit names the user's call between the refusal and the limit's
  // own sentence, for DynArray, ConcurrentDynArray and Arena; nothing stored is lost.
  TEST_CASE("a refusal at the memory limit names the user's call") {
    const std::size_t rss = pal::current_rss();
    if (rss == 0) {
      MESSAGE("this OS does not report the resident set: skipped");
      return;
    }
    reservoir::set_memory_limit(rss + (std::size_t{64} << 20));
    constexpr std::size_t kInts = std::size_t{32} << 20;  // 128 MiB of ints: past the limit
    const auto refusal = [](auto&& grow) {
      try {
        grow();
      } catch (const OsAllocationError& e) {
        return std::string(e.code() == reservoir::Refusal::memory_limit ? "" : "not the limit: ") +
               e.what();
      }
      return std::string("not refused");
    };
    // The cause, the call (in a ConcurrentDynArray whose claims the refusal closed, with the
    // index), then the limit's own sentence.
    const auto names = [](const std::string& what, const std::string& call) {
      const std::size_t at = what.find(
          ": the step would cross the process's memory limit. reservoir::" + call + " needed it");
      return what.starts_with("cannot commit ") && at != std::string::npos &&
             what.find(". The memory limit is ", at) != std::string::npos;
    };
    {
      DynArray<int> a(reservoir::max_elements(2 * kInts));
      const std::string what = refusal([&] { a.resize(kInts); });
      CHECK_MESSAGE(names(what, "DynArray::resize"), what);
      CHECK(a.empty());
    }
    {
      DynArray<int> a(reservoir::max_elements(2 * kInts));
      const std::string what = refusal([&] {
        for (std::size_t i = 0; i < kInts; ++i)
          a.push_back(static_cast<int>(i));
      });
      CHECK_MESSAGE(names(what, "DynArray::push_back/emplace_back"), what);
      CHECK(test::first_wrong(
                a.size(), [&](std::size_t i) { return a[i] == static_cast<int>(i); }) == a.size());
    }
    {
      DynArray<int> a(reservoir::max_elements(2 * kInts));
      const std::string what = refusal([&] { a.append_range(Counting{static_cast<int>(kInts)}); });
      CHECK_MESSAGE(names(what, "DynArray::append_range"), what);
      CHECK(a.empty());
    }
    {
      reservoir::ConcurrentDynArray<int> c{reservoir::max_elements(2 * kInts)};
      const std::string what = refusal([&] {
        for (std::size_t i = 0; i < kInts; ++i)
          c.push_back(static_cast<int>(i));
      });
      CHECK_MESSAGE(names(what, "ConcurrentDynArray::push_back/emplace_back"), what);
      CHECK(test::first_wrong(
                c.size(), [&](std::size_t i) { return c[i] == static_cast<int>(i); }) == c.size());
    }
    {
      reservoir::Arena arena(2 * kInts * sizeof(int));
      std::string what = refusal([&] { arena.commit(kInts * sizeof(int)); });
      CHECK_MESSAGE(names(what, "Arena::commit"), what);
      what = refusal([&] { (void)arena.allocate(kInts * sizeof(int)); });
      CHECK_MESSAGE(names(what, "Arena::allocate"), what);
      CHECK(arena.size() == 0);
    }
    reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  }

#if defined(__linux__)
  // The cgroups' limit: 512 MiB, or 256 MiB under ASan, which checks every access of the same
  // code at a fraction of the speed and whose shadow memory grows with the data (the limit's
  // size changes nothing that the test shows).
  constexpr std::size_t kCgroupMiB = kAddressSanitizer ? 256 : 512;
  TEST_CASE("in a real memory cgroup of 512 MiB: a clean exception instead of an OOM kill") {
    if (kCgroupMiB != 512) MESSAGE("under ASan: a cgroup of " << kCgroupMiB << " MiB");
    TestCgroup cg(kCgroupMiB << 20);
    if (cg.path.empty()) {
      MESSAGE("skipped: " << cg.why_not << " (needs root and a memory cgroup controller)");
      return;
    }
    ::setenv("RESERVOIR_TEST_CGROUP", cg.path.c_str(), 1);
    const test::ProcessResult checked = test::run_child("memory_limit.cgroup_checked");
    MESSAGE("checked: " << test::describe(checked) << ": " << checked.output);
    CHECK(checked.exited);
    CHECK(checked.exit_code == 0);
    CHECK(checked.output.find("memory limit is " + std::to_string(kCgroupMiB) + " MiB") !=
          std::string::npos);
    const test::ProcessResult parsed = test::run_child("memory_limit.cgroup_checked_mountinfo");
    MESSAGE("checked, mount from mountinfo: " << test::describe(parsed) << ": " << parsed.output);
    CHECK(parsed.exited);
    CHECK(parsed.exit_code == 0);
    CHECK(parsed.output.find("memory limit is " + std::to_string(kCgroupMiB) + " MiB") !=
          std::string::npos);
    // The control: the same growth with the check off dies as std::vector's would.
    const test::ProcessResult unchecked = test::run_child("memory_limit.cgroup_unchecked");
    MESSAGE("unchecked: " << test::describe(unchecked) << ": " << unchecked.output);
    CHECK_FALSE(unchecked.exited);
    CHECK(unchecked.signal == 9);
    ::unsetenv("RESERVOIR_TEST_CGROUP");
  }
#endif
#if defined(__linux__)
  TEST_CASE("16 threads racing a 512 MiB cgroup limit, rounds: no kill, every element kept") {
    if (kThreadSanitizer) {
      // ThreadSanitizer's shadow and metadata grow with every page the threads touch and count
      // against the cgroup, unseen by the headroom between two readings: the margin is sized for
      // what a program itself uses. The release, ASan, clang and libc++ builds run this test.
      MESSAGE("skipped under ThreadSanitizer: its shadow memory is outside the margin");
      return;
    }
    // Ten rounds where the race runs at full speed (optimized builds); three in debug builds and
    // under ASan, where each round of 16 threads filling 512 MiB takes several seconds and what
    // they add is assertions and the check of every access, not more interleavings.
#if defined(NDEBUG)
    constexpr bool kOptimized = !kAddressSanitizer;
#else
    constexpr bool kOptimized = false;
#endif
    constexpr int kRounds = kOptimized ? 10 : 3;
    for (CgroupKind kind : {CgroupKind::v2, CgroupKind::v1}) {
      int kills = 0, failures = 0, ran = 0;
      for (int round = 0; round < kRounds; ++round) {
        test::ProcessResult r;
        if (!run_in_cgroup("memory_limit.threads_race", kCgroupMiB << 20, kind, &r)) break;
        ++ran;
        if (round == 0 || !r.exited || r.exit_code != 0) {
          MESSAGE("cgroup " << kind_name(kind) << " round " << round << ": " << test::describe(r)
                            << ": " << r.output);
        }
        kills += !r.exited;
        failures += r.exited && r.exit_code != 0;
      }
      if (ran == 0) continue;
      MESSAGE("cgroup " << kind_name(kind) << ": " << kills << " kills, " << failures
                        << " failures in " << ran << " rounds of 16 threads");
      CHECK(kills == 0);
      CHECK(failures == 0);
    }
  }

  TEST_CASE("reserve(1 GiB) in a 512 MiB cgroup is accepted (it backs nothing), 100 MiB filled") {
    for (CgroupKind kind : {CgroupKind::v2, CgroupKind::v1}) {
      test::ProcessResult r;
      if (!run_in_cgroup("memory_limit.reserve_beyond_limit", kCgroupMiB << 20, kind, &r)) continue;
      MESSAGE("cgroup " << kind_name(kind) << ": " << test::describe(r) << ": " << r.output);
      CHECK(r.exited);
      CHECK(r.exit_code == 0);
    }
  }

  TEST_CASE("an array of 1.5 x (RAM + swap) is refused with bad_alloc, nothing populated") {
    // In a cgroup of 2 GiB, so that a check that fails cannot reach the machine's memory. Only
    // where no cgroup can be made, as a plain child with a watchdog on its resident set: a weaker
    // net, since ending the process does not stop a populate call already under way (measured:
    // MADV_POPULATE_WRITE ran on to 1.5 GiB after _exit at 1 GiB).
    test::ProcessResult r;
    if (run_in_cgroup("memory_limit.beyond_ram", std::size_t{2} << 30, CgroupKind::any, &r)) {
      MESSAGE("in a cgroup: " << test::describe(r) << ": " << r.output);
    } else {
      r = test::run_child("memory_limit.beyond_ram");
      MESSAGE("no cgroup: " << test::describe(r) << ": " << r.output);
    }
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("refused") != std::string::npos);
  }
#endif
}
