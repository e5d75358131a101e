// Ways a process using reservoir could die, hang or starve that std::vector survives, each run as
// a user meets it (in a child process where it may kill or change the process), with the same
// body on std::vector where it has defined behaviour: commit means commit (a write past the
// committed prefix faults, by default, on every OS), locked memory, a lowered data limit, a
// memory limit that can no longer be read, a refused populate, a thread on a low stack, and
// destroyed arrays cached by live threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

#if !defined(_WIN32)
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/stat.h>

#include <fstream>
#endif

using reservoir::Arena;
using reservoir::DynArray;
using reservoir::OsAllocationError;
namespace pal = reservoir::pal;

namespace {

// ---- commit means commit
// -------------------------------------------------------------------------

// The example a new user tries: a 1 GiB arena, grown, written one byte past committed().
RESERVOIR_CHILD("failures.write_past_commit.arena") {
  Arena a(std::size_t{1} << 30);
  char* p = static_cast<char*>(a.grow(10));
  a.grow(3 * 4096);
  if (a.committed() >= a.reserved()) return 2;
  test::expect_fault_here();
  static_cast<volatile char*>(p)[a.committed()] = 1;
  return 0;
}

// The same past a default DynArray's committed prefix (a large pool slot).
RESERVOIR_CHILD("failures.write_past_commit.dynarray") {
  DynArray<int> a;
  for (int i = 0; i < 1000; ++i)
    a.push_back(i);
  auto* past = static_cast<volatile std::byte*>(a.arena().base()) + a.arena().committed();
  if (a.arena().committed() >= a.arena().reserved()) return 2;
  test::expect_fault_here();
  *past = std::byte{1};
  return 0;
}

// ---- process-wide limits and locks --------------------------------------------------------------

// Exit code of a child that could not set up its scenario here (a call refused for lack of
// privilege): the parent reports it and checks nothing.
constexpr int kNotHere = 77;

// Checks a child's end: exit 0, or kNotHere (reported, nothing checked).
void check_child(const std::string& name, const test::ProcessResult& r) {
  CAPTURE(name);
  if (r.exited && r.exit_code == kNotHere) {
    MESSAGE(name << ": not possible here (" << r.output << "): not checked");
    return;
  }
  CHECK_MESSAGE((r.exited && r.exit_code == 0), test::describe(r) << " " << r.output);
}

#if defined(__linux__)
// Sanitizers and valgrind keep mappings of their own that locked memory or a data limit would
// break, whoever allocates.
#if defined(RESERVOIR_TEST_ASAN) || defined(RESERVOIR_TEST_TSAN)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Moves this process into the cgroup directory named by RESERVOIR_TEST_FAILURES_CGROUP.
bool join_cgroup() {
  const char* dir = std::getenv("RESERVOIR_TEST_FAILURES_CGROUP");
  if (!dir) return false;
  std::ofstream procs(std::string(dir) + "/cgroup.procs");
  procs << ::getpid() << std::flush;
  return static_cast<bool>(procs);
}

// A memory cgroup limited to `limit` bytes (v1 memory controller, or a v2 hierarchy offering
// it), removed on destruction; empty path (and why_not) where it cannot be made: not root, no
// memory controller.
struct LimitedCgroup {
  std::string path;
  std::string why_not = "no memory cgroup controller is mounted";
  explicit LimitedCgroup(std::size_t limit) {
    static int serial = 0;
    const std::string name =
        "/reservoir-failures-" + std::to_string(::getpid()) + "-" + std::to_string(++serial);
    const struct {
      const char* root;
      const char* limit_file;
      bool v2;
    } candidates[] = {{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", false},
                      {"/sys/fs/cgroup", "memory.max", true},
                      {"/sys/fs/cgroup/unified", "memory.max", true}};
    for (const auto& c : candidates) {
      const std::string root = c.root;
      if (c.v2) {
        std::string all;
        std::getline(std::ifstream(root + "/cgroup.controllers"), all);
        if ((" " + all + " ").find(" memory ") == std::string::npos) continue;
        std::ofstream(root + "/cgroup.subtree_control") << "+memory" << std::flush;
      }
      if (::mkdir((root + name).c_str(), 0755) != 0) {
        why_not = "cannot create " + root + name + " (needs root)";
        continue;
      }
      std::ofstream out(root + name + "/" + c.limit_file);
      out << limit << std::flush;
      if (!out) {
        ::rmdir((root + name).c_str());
        why_not = "cannot set " + root + name + "/" + c.limit_file;
        continue;
      }
      path = root + name;
      return;
    }
  }
  ~LimitedCgroup() {
    if (!path.empty()) ::rmdir(path.c_str());
  }
  LimitedCgroup(const LimitedCgroup&) = delete;
  LimitedCgroup& operator=(const LimitedCgroup&) = delete;
};

// Runs each child in a fresh cgroup of `limit` bytes; false (with a message) where none can be
// made.
bool run_in_cgroup(std::initializer_list<const char*> names, std::size_t limit) {
  for (const char* name : names) {
    LimitedCgroup cg(limit);
    if (cg.path.empty()) {
      MESSAGE("skipped: " << cg.why_not);
      return false;
    }
    ::setenv("RESERVOIR_TEST_FAILURES_CGROUP", cg.path.c_str(), 1);
    const test::ProcessResult r = test::run_child(name);
    ::unsetenv("RESERVOIR_TEST_FAILURES_CGROUP");
    check_child(name, r);
  }
  return true;
}

// 1000 ints pushed into `a`, all read back.
template <class Vec>
bool push_thousand(Vec& a) {
  for (int i = 0; i < 1000; ++i)
    a.push_back(i);
  return a.size() == 1000 && test::first_wrong(1000, [&](std::size_t i) {
                               return a[i] == static_cast<int>(i);
                             }) == 1000;
}

// mlockall(MCL_FUTURE), then 1000 ints into a fresh array: every later mapping is locked, which
// for a writable one means backed at once, so nothing may be mapped writable beyond what is used.
template <class Vec>
int locked_future() {
  if (!join_cgroup()) return 2;
  if (::mlockall(MCL_FUTURE) != 0) return kNotHere;
  Vec a;
  return push_thousand(a) ? 0 : 3;
}

// One array first, then mlockall(MCL_CURRENT | MCL_FUTURE) (which backs every writable mapping
// there is), with guard pages made by mprotect as on kernels before 6.13; then 1000 ints more.
template <class Vec>
int locked_current() {
  if (!join_cgroup()) return 2;
  pal::testing::refuse_guard_install(true);
  Vec first;
  first.push_back(7);
  if (::mlockall(MCL_CURRENT | MCL_FUTURE) != 0) return kNotHere;
  Vec a;
  if (!push_thousand(a)) return 3;
  return first[0] == 7 ? 0 : 4;
}

RESERVOIR_CHILD("failures.mlock_future.vector") {
  return locked_future<std::vector<int>>();
}
RESERVOIR_CHILD("failures.mlock_future.dynarray") {
  return locked_future<DynArray<int>>();
}
RESERVOIR_CHILD("failures.mlock_current.vector") {
  return locked_current<std::vector<int>>();
}
RESERVOIR_CHILD("failures.mlock_current.dynarray") {
  return locked_current<DynArray<int>>();
}

// RLIMIT_DATA lowered to 4 GiB after the first array (`with_array`): malloc, std::vector and
// std::thread must still work, and so must the array.
int data_limit_lowered(bool with_array) {
  if (test::proc_status_kib("VmData") > (std::size_t{2} << 20)) return kNotHere;  // > 2 GiB
  DynArray<int> a;  // empty: no reservation yet
  if (with_array) a.push_back(7);
  struct rlimit lim{};
  if (::getrlimit(RLIMIT_DATA, &lim) != 0) return 2;
  lim.rlim_cur = static_cast<rlim_t>(std::size_t{4} << 30);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < lim.rlim_cur) return kNotHere;
  if (::setrlimit(RLIMIT_DATA, &lim) != 0) return kNotHere;
  constexpr std::size_t kBig = std::size_t{64} << 20;
  void* p = std::malloc(kBig);
  if (p == nullptr) return 3;
  std::memset(p, 1, kBig);
  std::free(p);
  try {
    std::vector<char> v(kBig, 1);
    if (v[kBig - 1] != 1) return 4;
  } catch (const std::exception& e) {
    std::printf("std::vector: %s\n", e.what());
    return 4;
  }
  try {
    std::atomic<int> ran{0};
    std::thread t([&ran] { ran = 1; });
    t.join();
    if (ran != 1) return 5;
  } catch (const std::exception& e) {
    std::printf("std::thread: %s\n", e.what());
    return 5;
  }
  if (with_array) {
    for (int i = 1; i < 1'000'000; ++i)
      a.push_back(i + 7);
    DynArray<int> b;
    if (!push_thousand(b)) return 6;
    if (test::first_wrong(
            a.size(), [&](std::size_t i) { return a[i] == static_cast<int>(i) + 7; }) != a.size()) {
      return 7;
    }
  }
  return 0;
}

RESERVOIR_CHILD("failures.data_limit.vector") {
  return data_limit_lowered(false);
}
RESERVOIR_CHILD("failures.data_limit.dynarray") {
  return data_limit_lowered(true);
}
#endif

// ---- a refused populate
// ---------------------------------------------------------------------------

// Appends n ints and reads them back; false if any is wrong. The same body for std::vector.
template <class Vec>
bool append_and_check(Vec& a, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    a.push_back(static_cast<int>(i));
  if (a.size() != n) return false;
  return test::first_wrong(n, [&](std::size_t i) { return a[i] == static_cast<int>(i); }) == n;
}

// ---- a memory limit that can no longer be read
// ---------------------------------------------------

// Grows `a` by 1e6 ints at a time up to `cap` bytes; true if a step was refused with
// OsAllocationError (printed), every element intact either way (else *intact is false).
bool grow_until_refused(DynArray<int>& a, std::size_t cap, bool* intact) {
  bool refused = false;
  try {
    while (a.size() * sizeof(int) < cap)
      a.push_back(static_cast<int>(a.size()));
    std::printf("no refusal up to %zu MiB; ", cap >> 20);
  } catch (const OsAllocationError& e) {
    std::printf("refused at %zu MiB: %s; ", (a.size() * sizeof(int)) >> 20, e.what());
    refused = true;
  }
  *intact = test::first_wrong(
                a.size(), [&](std::size_t i) { return a[i] == static_cast<int>(i); }) == a.size();
  return refused;
}

#if !defined(_WIN32)
// Makes every open() fail with EMFILE from here on (a lower descriptor limit, filled).
bool exhaust_descriptors() {
  struct rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_cur, 256);
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  for (int i = 0; i < 4096; ++i) {
    if (::open("/dev/null", O_RDONLY | O_CLOEXEC) < 0) return errno == EMFILE;
  }
  return false;
}
#endif

// A limit set by hand (the resident set + 96 MiB) is read once; then every reading of the memory
// in use fails: growth must still stop at the limit.
RESERVOIR_CHILD("failures.limit_unreadable.by_hand") {
  const std::size_t rss = pal::current_rss();
  if (rss == 0) return kNotHere;
  constexpr std::size_t kRoom = std::size_t{96} << 20;
  reservoir::set_memory_limit(rss + kRoom);
  DynArray<int> a;
  bool intact = false;
  if (grow_until_refused(a, std::size_t{16} << 20, &intact) || !intact) return 2;
  test::FaultGuard unreadable(pal::Op::stats, 0, 1'000'000'000);
  const bool refused = grow_until_refused(a, std::size_t{256} << 20, &intact);
  std::printf("grew to %zu MiB\n", (a.size() * sizeof(int)) >> 20);
  if (!refused) return 3;
  if (!intact) return 4;
  return a.size() * sizeof(int) <= kRoom ? 0 : 5;
}

#if defined(__linux__)
// In a 256 MiB cgroup whose limit was read, the readings then fail (`emfile`: the process runs
// out of descriptors; otherwise injected): growth must be refused, not killed.
int cgroup_limit_unreadable(bool emfile) {
  if (!join_cgroup()) return 2;
  DynArray<int> a;
  bool intact = false;
  if (grow_until_refused(a, std::size_t{32} << 20, &intact) || !intact) return 3;
  if (reservoir::memory_limit_headroom() == reservoir::kMemoryLimitOff) return 4;  // not read
  if (emfile) {
    if (!exhaust_descriptors()) return kNotHere;
  } else {
    pal::testing::fail(pal::Op::stats, 0, 1'000'000'000, pal::testing::out_of_memory_error());
  }
  const bool refused = grow_until_refused(a, std::size_t{1} << 30, &intact);
  std::printf("grew to %zu MiB\n", (a.size() * sizeof(int)) >> 20);
  if (!refused) return 5;
  return intact ? 0 : 6;
}

RESERVOIR_CHILD("failures.limit_unreadable.cgroup_emfile") {
  return cgroup_limit_unreadable(true);
}
RESERVOIR_CHILD("failures.limit_unreadable.cgroup_injected") {
  return cgroup_limit_unreadable(false);
}
#endif

// ---- memory given back while the readings fail
// ---------------------------------------------------

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Fills a default array with `bytes` of ints and destroys it, `rounds` times; the round refused
// (printed), or -1 if none was.
int churn(std::size_t bytes, int rounds) {
  const std::size_t n = bytes / sizeof(int);
  for (int round = 0; round < rounds; ++round) {
    try {
      DynArray<int> a;
      for (std::size_t i = 0; i < n; ++i)
        a.push_back(static_cast<int>(i));
      if (a[n - 1] != static_cast<int>(n - 1)) return round;
    } catch (const OsAllocationError& e) {
      std::printf("round %d refused: %s\n", round, e.what());
      return round;
    }
  }
  return -1;
}

// Stops every reading of the memory in use, the limit and the machine: no descriptor left
// (`emfile`), or injected. False where descriptors cannot be exhausted here.
bool stop_readings(bool emfile) {
#if !defined(_WIN32)
  if (emfile) return exhaust_descriptors();
#else
  if (emfile) return false;
#endif
  pal::testing::fail(pal::Op::stats, 0, 1'000'000'000, pal::testing::out_of_memory_error());
  return true;
}

// A limit of the resident set + 200 MiB, read once; then the readings fail and 25 MiB arrays are
// made and destroyed one at a time: what each gives back must come back (to the limit's headroom
// and to the machine's), or a long-running process ends up refusing all growth.
int churn_unreadable_limit(bool emfile) {
  const std::size_t rss = pal::current_rss();
  if (rss == 0) return kNotHere;
  reservoir::set_memory_limit(rss + 200 * kMiB);
  if (churn(25 * kMiB, 1) != -1) return 2;  // the limit and the machine read, as they stand
  if (reservoir::memory_limit_headroom() == reservoir::kMemoryLimitOff) return 3;
  if (!stop_readings(emfile)) return kNotHere;
  const int refused = churn(25 * kMiB, 24);
  return refused == -1 ? 0 : 10 + refused;
}

RESERVOIR_CHILD("failures.released_back.limit_injected") {
  return churn_unreadable_limit(false);
}
#if defined(__linux__)
RESERVOIR_CHILD("failures.released_back.limit_emfile") {
  return churn_unreadable_limit(true);
}
#endif

// The machine's headroom alone (no memory limit): a machine with 236 MiB to spare, read once;
// then the readings fail and 25 MiB arrays come and go.
RESERVOIR_CHILD("failures.released_back.machine") {
  reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
  pal::testing::set_machine_memory(std::size_t{1} << 30, 300 * kMiB);  // margin 64 MiB
  if (churn(25 * kMiB, 1) != -1) return 2;
  if (!stop_readings(false)) return kNotHere;
  const int refused = churn(25 * kMiB, 24);
  return refused == -1 ? 0 : 10 + refused;
}

// A step that takes its bytes from the machine's headroom and then fails (its commit call, or
// the memory limit) gives them back. The readings fail throughout, so only what the headroom
// counts decides: the machine has 146 MiB to spare after the first 4 MiB, the limit about 80.
RESERVOIR_CHILD("failures.machine_refund") {
  const std::size_t rss = pal::current_rss();
  if (rss == 0) return kNotHere;
  pal::testing::set_machine_memory(std::size_t{1} << 30, 214 * kMiB);  // margin 64 MiB
  reservoir::set_memory_limit(rss + 96 * kMiB);
  Arena a(std::size_t{1} << 30);
  if (!a.try_commit(4 * kMiB)) return 2;  // both read
  if (reservoir::memory_limit_headroom() == reservoir::kMemoryLimitOff) return 3;
  if (!stop_readings(false)) return kNotHere;
  // 1. Three commit calls refused by the OS, 40 MiB each.
  pal::testing::fail(pal::Op::commit, 0, 3, pal::testing::out_of_memory_error());
  for (int i = 0; i < 3; ++i)
    if (a.try_commit(44 * kMiB)) return 4;
  if (!a.try_commit(64 * kMiB)) return 5;  // 60 MiB: it fits both headrooms
  if (a.reset()) return 6;
  // 2. Two steps of 100 MiB the memory limit refuses (after the machine's check).
  for (int i = 0; i < 2; ++i)
    if (a.try_commit(100 * kMiB)) return 7;
  if (!a.try_commit(64 * kMiB)) return 8;
  return 0;
}

// ---- a small step on a machine short of its margin
// -----------------------------------------------

// A 24 GiB machine with `available` free (less than its margin): std::vector grows, and so must
// a default array by small steps (each at most kPopulatedStepLimit) while the machine has the
// step itself; a large step is still refused.
int small_steps_below_margin(std::size_t available) {
  reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
  pal::testing::set_machine_memory(std::size_t{24} << 30, available);
  std::vector<int> v;
  if (!append_and_check(v, 1000)) return 2;
  try {
    DynArray<int> a;
    a.push_back(1);
    DynArray<int> b;
    if (!append_and_check(b, (16 * kMiB) / sizeof(int))) return 3;
  } catch (const OsAllocationError& e) {
    std::printf("refused: %s\n", e.what());
    return 4;
  }
  Arena big(std::size_t{1} << 30);
  return big.try_commit(available + 64 * kMiB) ? 5 : 0;
}

RESERVOIR_CHILD("failures.small_step.above_margin") {
  return small_steps_below_margin(700 * kMiB);  // a 256 MiB margin at most
}
RESERVOIR_CHILD("failures.small_step.below_margin") {
  return small_steps_below_margin(200 * kMiB);
}
// Less available than a step: refused, nothing lost, the message from the reading, said once.
RESERVOIR_CHILD("failures.small_step.nothing_left") {
  reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
  pal::testing::set_machine_memory(std::size_t{24} << 30, kMiB);
  DynArray<int> a;
  bool intact = false;
  std::string what;
  try {
    while (a.size() < (16 * kMiB) / sizeof(int))
      a.push_back(static_cast<int>(a.size()));
  } catch (const OsAllocationError& e) {
    what = e.what();
  }
  intact = test::first_wrong(
               a.size(), [&](std::size_t i) { return a[i] == static_cast<int>(i); }) == a.size();
  std::printf("%zu ints, %s\n", a.size(), what.c_str());
  if (what.empty()) return 2;
  if (!intact || a.size() == 0) return 3;
  if (what.find("24 GiB of RAM") == std::string::npos) return 4;
  return what.find("can back") == what.rfind("can back") ? 0 : 5;
}

// ---- a thread on a low stack
// -----------------------------------------------------------------------

#if !defined(_WIN32)
void* run_function(void* f) {
  (*static_cast<std::function<void()>*>(f))();
  return nullptr;
}

// Runs `body` on a thread whose stack is a 1 MiB mapping at 0x20000000 (MAP_FIXED_NOREPLACE where
// the OS has it, else a hint); *stack gets where it went, 0 if nothing could be mapped there (the
// address is taken, or below where the OS maps anything, as macOS's 4 GiB zero page: body not
// run). False if the thread could not be made.
bool run_on_low_stack(std::function<void()> body, std::uintptr_t* stack) {
  constexpr std::size_t kStack = std::size_t{1} << 20;
  int flags = MAP_PRIVATE | MAP_ANON;
#if defined(MAP_FIXED_NOREPLACE)
  flags |= MAP_FIXED_NOREPLACE;
#endif
  *stack = 0;
  void* p = ::mmap(reinterpret_cast<void*>(std::uintptr_t{0x20000000}), kStack,
                   PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return errno == EEXIST;
  if (p != reinterpret_cast<void*>(std::uintptr_t{0x20000000})) {  // a hint the OS did not take
    ::munmap(p, kStack);
    return true;
  }
  *stack = reinterpret_cast<std::uintptr_t>(p);
  pthread_attr_t attr;
  bool ok = ::pthread_attr_init(&attr) == 0;
  if (ok) {
    pthread_t t;
    ok = ::pthread_attr_setstack(&attr, p, kStack) == 0 &&
         ::pthread_create(&t, &attr, &run_function, &body) == 0 && ::pthread_join(t, nullptr) == 0;
    ::pthread_attr_destroy(&attr);
  }
  ::munmap(p, kStack);
  return ok;
}
#endif

// ---- growth past the machine's RAM
// ---------------------------------------------------------------

// An element of 1 MiB, as the growth-past-RAM report appended. Never a temporary on the stack
// (a thread's stack may be 2 MiB in all, as MinGW's main thread's): made in static storage.
using MiB = std::array<unsigned char, std::size_t{1} << 20>;

// A machine of 512 MiB with 384 MiB available and no swap (the seam: this machine's RAM does not
// matter), then growth toward 2 GiB: refused with OsAllocationError before the process's resident
// set grew by what was available, every element intact. With `unreadable`, every reading of the
// machine fails once 64 MiB are stored: the last figure must still stand. The refusal describes the
// machine as last read (512 MiB), and says once that the step is more than it can back.
template <class T, class Make>
int grow_past_small_machine(Make make, bool unreadable = false) {
  constexpr std::size_t kAvailable = std::size_t{384} << 20;
  pal::testing::set_machine_memory(std::size_t{512} << 20, kAvailable);
  const std::size_t rss = pal::current_rss();
  if (rss == 0) return kNotHere;
  DynArray<T> a;
  std::size_t n = 0;
  bool refused = false;
  std::string what;
  try {
    for (; n * sizeof(T) < (std::size_t{2} << 30); ++n) {
      if (unreadable && n * sizeof(T) == (std::size_t{64} << 20)) {
        pal::testing::fail(pal::Op::stats, 0, 1'000'000'000, pal::testing::out_of_memory_error());
      }
      a.push_back(make(n));
    }
  } catch (const OsAllocationError& e) {
    refused = true;
    what = e.what();
    std::printf("refused at %zu MiB: %s; ", (n * sizeof(T)) >> 20, e.what());
  }
  pal::testing::clear();
  const std::size_t grown = pal::current_rss() - std::min(rss, pal::current_rss());
  std::printf("resident set grew by %zu MiB\n", grown >> 20);
  if (!refused) return 3;
  if (a.size() != n) return 4;
  for (std::size_t i = 0; i < n; ++i)
    if (!(a[i] == make(i))) return 5;
  if (what.find("512 MiB of RAM") == std::string::npos) return 7;
  if (what.find("can back") != what.rfind("can back")) return 8;
  return grown < kAvailable ? 0 : 6;
}

RESERVOIR_CHILD("failures.past_ram.ints") {
  return grow_past_small_machine<int>([](std::size_t i) { return static_cast<int>(i); });
}
RESERVOIR_CHILD("failures.past_ram.unreadable") {
  return grow_past_small_machine<int>([](std::size_t i) { return static_cast<int>(i); }, true);
}
RESERVOIR_CHILD("failures.past_ram.mib") {
  return grow_past_small_machine<MiB>([](std::size_t i) -> const MiB& {
    static MiB e;
    e.fill(static_cast<unsigned char>(i));
    return e;
  });
}

}  // namespace

TEST_SUITE("failures") {
  TEST_CASE("commit means commit: by default a write past committed() faults") {
    CHECK_FALSE(reservoir::open_pool_chunks());
    for (const std::string name :
         {"failures.write_past_commit.arena", "failures.write_past_commit.dynarray"}) {
      CAPTURE(name);
      const test::ProcessResult r = test::run_child(name);
      CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
    }
  }

#if defined(__linux__)
  TEST_CASE("mlockall in a 1 GiB cgroup: a default array lives where std::vector does") {
    if (kSanitized || test::under_valgrind()) {
      MESSAGE("skipped under the sanitizers and valgrind: locking their own mappings");
      return;
    }
    // Each in a cgroup of its own: a failure is a memory-cgroup kill there, not the machine's.
    run_in_cgroup({"failures.mlock_future.vector", "failures.mlock_future.dynarray",
                   "failures.mlock_current.vector", "failures.mlock_current.dynarray"},
                  std::size_t{1} << 30);
  }

  TEST_CASE("RLIMIT_DATA lowered after the first default array: malloc, vector, thread work") {
    if (kSanitized || test::under_valgrind()) {
      MESSAGE("skipped under the sanitizers and valgrind: their own mappings need the data limit");
      return;
    }
    for (const char* name : {"failures.data_limit.vector", "failures.data_limit.dynarray"})
      check_child(name, test::run_child(name));
  }
#endif

#if !defined(_WIN32)
  TEST_CASE("MADV_POPULATE_WRITE refused with EINVAL, EPERM or ENOSYS: arrays grow by touching") {
    // 16 MiB of ints: many populated steps past the first 64 KiB in every kind of array (prefault
    // on: the default leaves population to the appends' first touches).
    constexpr std::size_t kInts = std::size_t{4} << 20;
    reservoir::ArenaOptions populated;
    populated.prefault = true;
    {
      std::vector<int> v;
      CHECK(append_and_check(v, kInts));  // the same body, where nothing is populated
    }
    for (const int err : {EINVAL, EPERM, ENOSYS}) {
      CAPTURE(err);
      const std::error_code refusal(err, std::generic_category());
      const std::uint64_t before = pal::testing::calls(pal::Op::prefault);
      test::FaultGuard guard(pal::Op::prefault, 0, 1'000'000, refusal);
      DynArray<int> fresh{reservoir::max_elements(DynArray<int>::default_max_size()), populated};
      CHECK(append_and_check(fresh, kInts));
      DynArray<int> bounded{reservoir::max_elements(kInts), populated};
      CHECK(append_and_check(bounded, kInts));
      reservoir::ConcurrentDynArray<int> shared{reservoir::max_elements(kInts), populated};
      CHECK(append_and_check(shared, kInts));
      CHECK(pal::testing::calls(pal::Op::prefault) - before >= 3);  // the seam was asked
    }
    // ENOMEM still means the memory cannot be had: the step is refused, nothing is lost.
    DynArray<int> a{reservoir::max_elements(DynArray<int>::default_max_size()), populated};
    REQUIRE(append_and_check(a, 1000));
    {
      test::FaultGuard guard(pal::Op::prefault, 0, 1'000'000, pal::testing::out_of_memory_error());
      try {
        for (std::size_t i = 1000; i < kInts; ++i)
          a.push_back(static_cast<int>(i));
        FAIL("no refusal while every populate says ENOMEM");
      } catch (const OsAllocationError&) {
      }
    }
    CHECK(test::first_wrong(a.size(), [&](std::size_t i) { return a[i] == static_cast<int>(i); }) ==
          a.size());
  }
#endif

  TEST_CASE("a memory limit read once still stands when it can no longer be read") {
    const char* name = "failures.limit_unreadable.by_hand";
    const test::ProcessResult r = test::run_child(name);
    MESSAGE(r.output);
    check_child(name, r);
#if defined(__linux__)
    if (kSanitized || test::under_valgrind()) {
      MESSAGE(
          "cgroup part skipped under the sanitizers and valgrind: their memory is not the data's");
      return;
    }
    // In a cgroup of 256 MiB: refused near 246 MiB instead of killed by the memory cgroup.
    run_in_cgroup(
        {"failures.limit_unreadable.cgroup_emfile", "failures.limit_unreadable.cgroup_injected"},
        std::size_t{256} << 20);
#endif
  }

  TEST_CASE("once the readings fail, what arrays give back comes back to both headrooms") {
    std::vector<const char*> names = {"failures.released_back.limit_injected",
                                      "failures.released_back.machine", "failures.machine_refund"};
#if defined(__linux__)
    // Without descriptors the sanitizers' and valgrind's runtimes fail on their own (they open
    // files as the process runs); the injected variant runs there.
    if (!kSanitized && !test::under_valgrind())
      names.push_back("failures.released_back.limit_emfile");
#endif
    for (const std::string name : names) {
      const test::ProcessResult r = test::run_child(name);
      MESSAGE(name << ": " << r.output);
      check_child(name, r);
    }
  }

  TEST_CASE("a small step goes on where the machine has the step, short of its margin") {
    for (const std::string name :
         {"failures.small_step.above_margin", "failures.small_step.below_margin",
          "failures.small_step.nothing_left"}) {
      const test::ProcessResult r = test::run_child(name);
      MESSAGE(name << ": " << r.output);
      check_child(name, r);
    }
  }

#if !defined(_WIN32)
  TEST_CASE("a thread on a low stack counts the whole address space, for itself and for others") {
    const std::size_t space = pal::address_space_size();
    const auto default_max = [] {
      DynArray<int> a;
      a.push_back(1);
      return a.max_size();
    };
    const bool full_here = default_max() == DynArray<int>::default_max_size();
    std::size_t low_space = 0;
    std::size_t low_max = 0;
    std::uintptr_t stack = 0;
    // Past the time a reading of the address space stands for (20 ms), so the thread takes one.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(run_on_low_stack(
        [&] {
          low_space = pal::address_space_size();
          low_max = default_max();
        },
        &stack));
    MESSAGE("the thread's stack was at " << reinterpret_cast<void*>(stack));
    if (stack == 0) {
      MESSAGE("skipped: nothing can be mapped at 0x20000000 in this process");
      return;
    }
    REQUIRE(stack < (std::uintptr_t{1} << 32));  // a low stack, or the test would prove nothing
    CHECK(low_space == space);
    std::size_t next_max = 0;
    std::thread([&] { next_max = default_max(); }).join();
    if (full_here) {
      CHECK(low_max == DynArray<int>::default_max_size());
      CHECK(next_max == DynArray<int>::default_max_size());
    } else {
      MESSAGE("no full default reservation here (valgrind, RLIMIT_AS): sizes not compared");
    }
  }
#endif

  TEST_CASE("destroyed arrays cached by live threads do not count as alive") {
    const auto fresh_max = [] {
      DynArray<int> a;
      a.push_back(1);
      return a.max_size();
    };
    if (fresh_max() != DynArray<int>::default_max_size()) {
      MESSAGE("no full default reservation here (valgrind, RLIMIT_AS, TSan): not checked");
      return;
    }
    // Threads each make and destroy a one-element default array, then stay alive (their pool
    // caches keep the slot) while this thread makes a new one. 500: their cached slots (the first
    // 256 of 64 GiB, then 1 GiB ones) are well past a quarter of a 128 TiB space's budget.
    constexpr int kThreads = 500;
    std::mutex m;
    std::condition_variable cv;
    int ready = 0;
    bool done = false;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        {
          DynArray<int> a;
          a.push_back(t);
        }
        std::unique_lock lock(m);
        ++ready;
        cv.notify_all();
        cv.wait(lock, [&] { return done; });
      });
    }
    {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return ready == kThreads; });
    }
    DynArray<int> big;
    big.push_back(1);
    const std::size_t max = big.max_size();
    bool grew = true;
    try {
      big.reserve((std::size_t{3} << 30) / sizeof(int));  // commits 3 GiB, backs its first step
    } catch (const std::exception& e) {
      MESSAGE(e.what());
      grew = false;
    }
    {
      std::lock_guard lock(m);
      done = true;
    }
    cv.notify_all();
    for (std::thread& th : threads)
      th.join();
    CHECK(max == DynArray<int>::default_max_size());
    CHECK(grew);
    CHECK(big[0] == 1);
  }

  TEST_CASE("growth past the machine's RAM is refused, not killed (a small machine, by the seam)") {
    for (const std::string name :
         {"failures.past_ram.ints", "failures.past_ram.mib", "failures.past_ram.unreadable"}) {
      const test::ProcessResult r = test::run_child(name);
      MESSAGE(name << ": " << r.output);
      check_child(name, r);
    }
  }
}
