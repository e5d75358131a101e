// Shared test helpers: an instance-counting element type, a fault-injection guard, and child
// processes for scenarios that must crash (guard pages) or need a fresh process (peak memory).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <ostream>  // doctest prints std::error_code with it
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "pal_testing.hpp"
#include "process.hpp"

// AddressSanitizer maps one shadow byte per 8 bytes of memory the program writes, so RSS rises by
// an eighth more than the data.
// RESERVOIR_TEST_ASAN is for #if (GCC defines __SANITIZE_ADDRESS__, clang only answers
// __has_feature); with it, ASan's interface (__asan_address_is_poisoned) is declared.
#if defined(__SANITIZE_ADDRESS__)
#define RESERVOIR_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RESERVOIR_TEST_ASAN 1
#endif
#endif
#if defined(RESERVOIR_TEST_ASAN)
#include <sanitizer/asan_interface.h>
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// ThreadSanitizer keeps shadow memory proportional to the memory a program touches, so RSS rises
// by about twice the bytes written: upper bounds on RSS do not hold in that build.
// RESERVOIR_TEST_TSAN is for #if: GCC defines __SANITIZE_THREAD__, clang only answers
// __has_feature.
#if defined(__SANITIZE_THREAD__)
#define RESERVOIR_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RESERVOIR_TEST_TSAN 1
#endif
#endif
#if defined(RESERVOIR_TEST_TSAN)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

namespace test {

inline constexpr std::size_t kMiB = std::size_t{1} << 20;

// Child processes and this program's path, from the process layer the bench shares
// (tests/process/process.hpp).
using reservoir::process::ProcessResult;
using reservoir::process::run_process;
using reservoir::process::self_reexec_path;
using reservoir::process::under_wine;

// True when the program runs under valgrind (its preload library is in LD_PRELOAD).
inline bool under_valgrind() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload && std::strstr(preload, "vgpreload") != nullptr;
}

// True if the OS makes open reservations (pal::reserve_open): the slot pools' chunks are then
// read-write from the start, and the closed kind (pal::testing::refuse_open_reservations) is
// a second path to test.
inline bool open_reservations_here() {
  void* p = nullptr;
  const std::size_t size = reservoir::pal::allocation_granularity();
  if (reservoir::pal::reserve_open(size, &p)) return false;
  (void)reservoir::pal::release(p, size);
  return true;
}

// Sets reservoir::set_open_pool_chunks(open) for its scope and restores the setting after:
// closed chunks are the default, and the tests of open ones (an explicit opt-in) turn them on.
// Chunks already reserved keep their kind: trim_pools() first for a clean start.
class PoolChunks {
 public:
  explicit PoolChunks(bool open) : saved_(reservoir::open_pool_chunks()) {
    reservoir::set_open_pool_chunks(open);
  }
  ~PoolChunks() { reservoir::set_open_pool_chunks(saved_); }
  PoolChunks(const PoolChunks&) = delete;
  PoolChunks& operator=(const PoolChunks&) = delete;

 private:
  bool saved_;
};

// Why resident-set growth cannot be measured here, or nullptr when it can: valgrind and TSan keep
// memory of their own that grows with what the program maps, and some OSes report no RSS.
inline const char* rss_unmeasurable() {
  if (under_valgrind() || kThreadSanitizer) {
    return "skipped under valgrind and TSan, whose own memory grows with what the program maps";
  }
  if (reservoir::pal::current_rss() == 0) return "no resident-set size on this OS: not checked";
  return nullptr;
}

// A "Key: N kB" line of /proc/self/status (VmRSS, VmSize, ...) in KiB, or 0 where /proc does not
// tell (other OSes).
inline std::size_t proc_status_kib(const char* key) {
  return reservoir::process::proc_kib_line("/proc/self/status", key) / 1024;
}

// A fresh directory under the system's temporary directory, removed with all it holds when this
// goes out of scope: the one place a test writes files, so a run leaves the source tree (and the
// working directory) as it found them.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::random_device entropy;
    for (;;) {
      path_ = std::filesystem::temp_directory_path() /
              (prefix + "-" + std::to_string(entropy()) + std::to_string(entropy()));
      if (std::filesystem::create_directory(path_)) break;  // false: the name was taken
    }
  }
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw; a leftover is harmless
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Counts every construction and destruction; can be told to throw on the n-th construction.
// The first i in [0, n) for which ok(i) is false, or n: one assertion over a whole array instead
// of one per element (a million assertions take a minute under valgrind).
template <class Ok>
std::size_t first_wrong(std::size_t n, Ok ok) {
  for (std::size_t i = 0; i < n; ++i)
    if (!ok(i)) return i;
  return n;
}

struct Tracked {
  static inline long long value_constructions = 0;
  static inline long long copies = 0;
  static inline long long moves = 0;
  static inline long long destructions = 0;
  static inline long long throw_countdown = -1;  // throw when it reaches 0; -1 = never

  static void reset() {
    value_constructions = copies = moves = destructions = 0;
    throw_countdown = -1;
  }
  static long long constructions() { return value_constructions + copies + moves; }
  static long long live() { return constructions() - destructions; }

  Tracked() : Tracked(0) {}
  explicit Tracked(int v) : value(v) {
    maybe_throw();
    ++value_constructions;
  }
  Tracked(const Tracked& o) : value(o.value) {
    maybe_throw();
    ++copies;
  }
  Tracked(Tracked&& o) noexcept(false) : value(o.value) {
    maybe_throw();
    ++moves;
  }
  Tracked& operator=(const Tracked&) = default;
  Tracked& operator=(Tracked&&) = default;
  ~Tracked() { ++destructions; }
  friend bool operator==(const Tracked& a, const Tracked& b) { return a.value == b.value; }

  int value;

 private:
  static void maybe_throw() {
    if (throw_countdown >= 0 && throw_countdown-- == 0) throw std::runtime_error("Tracked throws");
  }
};

// Empties this thread's reservation cache and the pools' free slots, so that the next arena
// reserves afresh and starts with nothing committed (a parked reservation keeps a first step
// committed): for tests that refuse a commit after making the arena.
inline void no_parked_reservations() {
  reservoir::clear_reservation_cache();
  reservoir::trim_pools();
}

// Arms the pal failure seam for one operation; disarms everything when it goes out of scope.
class FaultGuard {
 public:
  FaultGuard(reservoir::pal::Op op, std::uint64_t skip = 0, std::uint64_t count = 1,
             std::error_code error = reservoir::pal::testing::out_of_memory_error()) {
    // A parked reservation or a free pool slot would be handed out without calling the OS at all.
    if (op == reservoir::pal::Op::reserve) no_parked_reservations();
    reservoir::pal::testing::fail(op, skip, count, error);
  }
  ~FaultGuard() { reservoir::pal::testing::clear(); }
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;
};

// A scenario the test binary runs in a child of itself: `reservoir_tests --child NAME`.
// Its return value is the child's exit code; what it prints to stdout comes back in output.
void register_child(const std::string& name, std::function<int()> body);
int run_child_main(const std::string& name);       // in the child
ProcessResult run_child(const std::string& name);  // in the parent

struct ChildRegistrar {
  ChildRegistrar(const char* name, std::function<int()> body) { register_child(name, body); }
};
#define RESERVOIR_CONCAT_(a, b) a##b
#define RESERVOIR_CONCAT(a, b) RESERVOIR_CONCAT_(a, b)
// Named by __COUNTER__: names must be unique in a unit, and the unity build puts several test
// files (whose children may sit on the same line numbers) in one unit.
#define RESERVOIR_CHILD_(name, id)                                      \
  static int RESERVOIR_CONCAT(child_body_, id)();                       \
  static const ::test::ChildRegistrar RESERVOIR_CONCAT(child_reg_, id)( \
      name, &RESERVOIR_CONCAT(child_body_, id));                        \
  static int RESERVOIR_CONCAT(child_body_, id)()
#define RESERVOIR_CHILD(name) RESERVOIR_CHILD_(name, __COUNTER__)

// True if the child died of a memory access fault (SIGSEGV/SIGBUS, or an access violation).
bool died_of_access_violation(const ProcessResult& r);
std::string describe(const ProcessResult& r);

// Prepares this (child) process to die of a fault in the plain way: default signal disposition,
// so sanitizers and the test framework do not turn the fault into an ordinary exit.
void expect_fault_here();

// Ends the process with a message and exit code 3 unless it is disarmed (destroyed) within
// `seconds`: a test that would hang (a lost wake-up) fails instead, naming itself, before the
// suite's timeout.
class HangWatchdog {
 public:
  HangWatchdog(const char* what, double seconds)
      : thread_([this, what, seconds] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                                 [this] { return done_; })) {
            std::fprintf(stderr, "hung: %s did not finish within %g s\n", what, seconds);
            std::fflush(stderr);
            std::_Exit(3);
          }
        }) {}
  ~HangWatchdog() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace test
