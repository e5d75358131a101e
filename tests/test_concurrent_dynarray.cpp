// Tests of <reservoir/concurrent_dynarray.hpp>: many appending threads, readers that never wait,
// nothing moves; failures under contention leave every published element intact.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <reservoir/concurrent_dynarray.hpp>

#include "support.hpp"

#if defined(_WIN32)
#include <io.h>  // _dup2
#else
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

using reservoir::ConcurrentDynArray;
namespace pal = reservoir::pal;

namespace {
constexpr int kWriters = 4;

// How much stress work a test does: far less under valgrind (which serialises threads and runs
// the concurrent suite in CI) and TSan (which slows every access), the full amount otherwise.
std::uint64_t stress_scale(std::uint64_t full) {
  if (test::under_valgrind()) return (std::max<std::uint64_t>)(full / 50, 1);
  if (kThreadSanitizer) return (std::max<std::uint64_t>)(full / 5, 1);
  return full;
}
// As stress_scale, but the full amount under TSan too: for loops that TSan runs in reasonable
// time, where the count only multiplies the interleavings tried. Under valgrind, which runs one
// thread at a time, more of the same interleavings buy nothing but minutes.
std::uint64_t valgrind_scale(std::uint64_t full) {
  return test::under_valgrind() ? (std::max<std::uint64_t>)(full / 50, 1) : full;
}

// Appends per writer in the tests with 4 writers and 2 readers.
std::uint64_t per_writer() {
  return valgrind_scale(250'000);
}

// Never 0, so an unconstructed (zero) slot can be told from a real one.
std::uint64_t encode(std::uint64_t thread, std::uint64_t seq) {
  return ((thread + 1) << 32) | seq;
}

// Every published value is non-zero (a hole, an unconstructed slot, would read 0) and appears
// once (no element published twice).
void require_no_hole_no_duplicate(const ConcurrentDynArray<std::uint64_t>& a) {
  std::set<std::uint64_t> seen;
  for (std::uint64_t v : a.published()) {
    REQUIRE(v != 0);
    REQUIRE(seen.insert(v).second);
  }
}

// Starts a thread whose emplace_back_with claims the next slot of `a` and holds it (its make()
// waits until `release` is set, then returns encode(tag, index)); returns once the slot is claimed.
std::thread hold_next_slot(ConcurrentDynArray<std::uint64_t>& a, std::uint64_t tag,
                           const std::atomic<bool>& release) {
  std::atomic<bool> claimed{false};  // the thread is done with it before this returns
  std::thread holder([&a, tag, &release, &claimed] {
    a.emplace_back_with([&](std::size_t i) noexcept {
      claimed = true;
      while (!release.load())
        std::this_thread::yield();
      return encode(tag, i);
    });
  });
  while (!claimed.load())
    std::this_thread::yield();
  return holder;
}

// Copying throws when the value is a multiple of 7 (the "poisoned" values); moving never throws.
struct Picky {
  std::uint64_t v = 0;
  explicit Picky(std::uint64_t x) : v(x) {}
  Picky(const Picky& o) : v(o.v) {
    if (o.v % 7 == 0) throw std::runtime_error("poisoned");
  }
  Picky(Picky&& o) noexcept : v(o.v) {}
  Picky& operator=(const Picky&) = default;
};

// Every member on an array that holds nothing and has no reservation.
template <class A>
void check_empty_unreserved(A& a) {
  const A& c = a;
  CHECK(c.size() == 0);
  CHECK(c.empty());
  CHECK(c.max_size() == 0);
  CHECK(c.capacity() == 0);
  CHECK(c.published().empty());
  CHECK(c.data() == nullptr);
  CHECK_THROWS_AS((void)c.at(0), std::out_of_range);
  CHECK_THROWS_AS(a.push_back(1), std::length_error);
  const int one = 1;
  CHECK_THROWS_AS(a.push_back(one), std::length_error);
  CHECK_THROWS_AS(a.emplace_back(1), std::length_error);
  CHECK_THROWS_AS(a.emplace_back_with([](std::size_t) noexcept { return 1; }), std::length_error);
  CHECK_FALSE(a.try_emplace_back(1).has_value());
  const std::vector<int> two{1, 2};
  CHECK_THROWS_AS(a.append_range(two), std::length_error);
  CHECK(a.append_range(std::vector<int>{}) == a.max_size());  // empty: nothing claimed
  {
    auto w = a.writer();
    CHECK_THROWS_AS(w.push_back(1), std::length_error);  // no room for even a buffer
    CHECK(w.buffered() == 0);
    CHECK(w.flush() == a.max_size());  // nothing buffered
  }
  CHECK(a.size() == 0);
  A moved(std::move(a));  // moving an empty array is fine too
  CHECK(moved.max_size() == 0);
  a = std::move(moved);
  CHECK(a.max_size() == 0);
}

// Element types that take the container's code at its word (as in tests/conformance/hostile.cpp).
// In a namespace of their own: Comma's deleted operator, is a template of the enclosing namespace,
// which test_dynarray.cpp's Comma declares too when a unity build compiles both files as one.
namespace concurrent_hostile {
struct Amp {
  int v = 0;
  Amp() = default;
  explicit Amp(int x) noexcept : v(x) {}
  int operator&() const { return 0; }
};
struct Comma {
  int v = 0;
  Comma() = default;
  explicit Comma(int x) noexcept : v(x) {}
  template <class A, class B>
  friend void operator,(A&&, B&&) = delete;
};
struct MayThrow {  // a constructor that may throw: built aside, then moved in
  int v = 0;
  MayThrow() = default;
  explicit MayThrow(int x) noexcept(false) : v(x) {}
};
}  // namespace concurrent_hostile

// Every member of ConcurrentDynArray<T>, from one thread.
template <class T>
void every_member() {
  using A = ConcurrentDynArray<T>;
  A a(reservoir::max_elements(64));
  A b(reservoir::max_bytes(64 * sizeof(T)), reservoir::ArenaOptions{});
  A empty;
  const T one(1);
  CHECK(a.push_back(one) == 0);
  CHECK(a.push_back(T(2)) == 1);
  CHECK(a.emplace_back(3) == 2);
  CHECK(a.emplace_back_with([](std::size_t i) noexcept { return T(static_cast<int>(i) + 1); }) ==
        3);
  CHECK(a.try_emplace_back(5) == std::optional<std::size_t>(4));
  const T block[] = {T(6), T(7)};
  CHECK(a.append_range(block) == 5);  // contiguous: in place
  std::deque<T> aside;                // not contiguous: built aside, then moved into the block
  aside.emplace_back(8);
  CHECK(a.append_range(aside) == 7);
  {
    auto w = a.writer();
    w.push_back(one);
    w.push_back(T(9));
    w.emplace_back(10);
    CHECK(w.buffered() == 3);
    CHECK(w.flush() == 8);
  }
  CHECK(a.size() == 11);
  CHECK(!a.empty());
  CHECK(a.capacity() >= a.size());
  CHECK(a.max_size() == 64);
  CHECK(a[2].v == 3);
  CHECK(a.at(10).v == 10);
  CHECK(a.published().size() == 11);
  CHECK(a.data()[7].v == 8);
  const A& ca = a;
  CHECK(ca[4].v == 5);
  b = std::move(a);
  A c(std::move(b));
  swap(c, empty);
  CHECK(empty.size() == 11);
  CHECK(c.max_size() == 0);
  A& self = empty;
  empty = std::move(self);  // self move-assignment keeps the elements
  CHECK(empty[0].v == 1);
}

// An element whose construction takes a while and writes its fields one after another: a reader
// that saw a slot under construction (or never constructed: zero) finds the fields inconsistent.
struct Slow {
  static constexpr std::uint64_t kSeal = 0x5ea1'5ea1'5ea1'5ea1;
  std::uint64_t value = 0;
  std::uint64_t check = 0;  // ~value once constructed
  std::uint64_t seal = 0;   // kSeal once constructed
  explicit Slow(std::uint64_t v) noexcept : value(v) {
    // Stores apart (every 16th value gives up the CPU in between), so that a premature read has
    // room to catch the element half done.
    if (v % 16 == 5) std::this_thread::yield();
    check = ~v;
    seal = kSeal;
  }
  bool whole() const noexcept { return seal == kSeal && check == ~value && value != 0; }
};

}  // namespace

// 4 Writers released at once fill a fresh array of ints, 5 times; exit 0 if every array ends
// full, 3 (the watchdog) if a round hangs.
RESERVOIR_CHILD("concurrent.writers_meet_fresh") {
  const test::HangWatchdog watchdog("4 Writers at the commit lock", 120);
  constexpr std::uint64_t kEach = 25'000;
  for (int round = 0; round < 5; ++round) {
    ConcurrentDynArray<int> a{reservoir::max_elements(kWriters * kEach)};
    std::atomic<int> arrived{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&] {
        arrived.fetch_add(1);
        while (!go.load())
          std::this_thread::yield();
        auto w = a.writer();
        for (std::uint64_t s = 0; s < kEach; ++s)
          w.push_back(static_cast<int>(s));
      });
    }
    while (arrived.load() < kWriters)
      std::this_thread::yield();
    go.store(true);
    for (auto& w : writers)
      w.join();
    if (a.size() != kWriters * kEach) return 1;
  }
  return 0;
}

#if !defined(_WIN32) && !defined(RESERVOIR_TEST_TSAN)
namespace {
// Waits for `pid` until `deadline`, then kills it. 0: exited with status 0; 1: hung (killed);
// 2: exited otherwise or died of a signal.
int wait_child(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
      std::fprintf(stderr, "child status %#x\n", static_cast<unsigned>(status));
      return 2;
    }
    if (r < 0) return 2;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, &status, 0);
      return 1;
    }
    ::usleep(500);
  }
}

// What a run of forks came to: children forked, hung (killed at their deadline), and failed
// (fork() refused, or a child that exited non-zero or died of a signal).
struct ForkTally {
  int forks = 0;
  int hangs = 0;
  int failures = 0;
  bool clean() const noexcept { return hangs == 0 && failures == 0 && forks > 0; }
  void print(const char* end = "\n") const {
    std::printf("forks %d, hangs %d, failures %d%s", forks, hangs, failures, end);
  }
};

// Forks up to `count` children, one at a time, while keep_going() says so. Each child runs
// child() and exits with what it returns (an exception: reported, exit 4); the parent waits up to
// `timeout` for it.
template <class KeepGoing, class Child>
void fork_children(ForkTally& tally, int count, std::chrono::seconds timeout, KeepGoing keep_going,
                   Child child) {
  for (int f = 0; f < count && keep_going(); ++f) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      ++tally.failures;
      continue;
    }
    if (pid == 0) {
      try {
        ::_exit(child());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        ::_exit(4);
      }
    }
    ++tally.forks;
    const int r = wait_child(pid, std::chrono::steady_clock::now() + timeout);
    tally.hangs += r == 1;
    tally.failures += r == 2;
  }
}

// The child's one append to `a`: exit status 0 if it was appended.
int append_once(ConcurrentDynArray<int>& a) {
  return a.push_back(3) >= 1 ? 0 : 3;
}

// The solo-mode owner of the fork tests: appends until `stop` or the array is half full (a
// child's append must not find it full), and sets `started` after its first append.
void own_until(ConcurrentDynArray<int>& a, std::size_t max, const std::atomic<bool>& stop,
               std::atomic<bool>& started) {
  try {
    a.push_back(1);
    started = true;
    while (!stop.load(std::memory_order_relaxed) && a.size() < max / 2)
      a.push_back(2);
  } catch (const std::length_error&) {  // full: this round is over
    started = true;
  }
}
}  // namespace

// Forks while two threads push_back to a shared-mode array that commits a page at a time (so a
// commit is in progress much of the time); each child appends once and exits. A child must
// never wait for a thread that exists only in its parent. Prints "forks F, hangs H, failures X".
RESERVOIR_CHILD("concurrent.fork_while_pushing") {
  constexpr int kRounds = 40, kForksPerRound = 5;
  constexpr std::size_t kMax = std::size_t{1} << 24;
  ForkTally tally;
  for (int round = 0; round < kRounds && tally.hangs == 0; ++round) {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // a commit every page of elements
    ConcurrentDynArray<int> a(reservoir::max_elements(kMax), o);
    a.push_back(0);  // the owner: the threads below end solo mode before any fork
    std::atomic<int> started{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> pushers;
    for (int t = 0; t < 2; ++t) {
      pushers.emplace_back([&] {
        try {
          a.push_back(1);
          started.fetch_add(1);
          while (!stop.load(std::memory_order_relaxed))
            a.push_back(2);
        } catch (const std::length_error&) {  // full: this round is over
        }
      });
    }
    while (started.load() < 2 && a.size() < kMax / 2)
      std::this_thread::yield();
    fork_children(
        tally, kForksPerRound, std::chrono::seconds(20), [&] { return a.size() < kMax / 2; },
        [&] { return append_once(a); });
    stop = true;
    for (std::thread& t : pushers)
      t.join();
  }
  tally.print();
  return tally.clean() ? 0 : 1;
}

// A thread that is not the forking one appends alone (solo mode) to an array that commits a page
// at a time, so that its solo claim is often in the middle of a commit; the main thread forks and
// each child appends once. The child's append ends solo mode: it must not wait for the owner's
// claim in progress at the fork (the owner does not exist in the child). Prints "forks F, hangs
// H, failures X".
RESERVOIR_CHILD("concurrent.fork_during_solo") {
  constexpr int kRounds = 40, kForksPerRound = 5;
  constexpr std::size_t kMax = std::size_t{1} << 24;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  ForkTally tally;
  for (int round = 0; round < kRounds && tally.hangs == 0 && std::chrono::steady_clock::now() < end;
       ++round) {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // a commit every page of elements
    ConcurrentDynArray<int> a(reservoir::max_elements(kMax), o);
    std::atomic<bool> started{false}, stop{false};
    std::thread owner([&] { own_until(a, kMax, stop, started); });
    while (!started.load())
      std::this_thread::yield();
    fork_children(
        tally, kForksPerRound, std::chrono::seconds(2), [&] { return a.size() < kMax / 2; },
        [&] { return append_once(a); });
    stop = true;
    owner.join();
  }
  tally.print();
  return tally.clean() ? 0 : 1;
}

// As above, and a third thread ends solo mode while the main thread forks: a child forked while
// that thread was ending it (it does not exist in the child) must finish the end itself, not wait
// for it. Prints "forks F, hangs H, failures X".
RESERVOIR_CHILD("concurrent.fork_while_ending_solo") {
  constexpr int kRounds = 200, kForksPerRound = 3;
  constexpr std::size_t kMax = std::size_t{1} << 24;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  ForkTally tally;
  for (int round = 0; round < kRounds && tally.hangs == 0 && std::chrono::steady_clock::now() < end;
       ++round) {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();
    ConcurrentDynArray<int> a(reservoir::max_elements(kMax), o);
    std::atomic<bool> started{false}, stop{false}, go{false};
    std::thread owner([&] { own_until(a, kMax, stop, started); });
    while (!started.load())
      std::this_thread::yield();
    std::thread ender([&] {
      while (!go.load())
        std::this_thread::yield();
      try {
        a.push_back(4);  // ends solo mode
      } catch (const std::length_error&) {
      }
    });
    go = true;
    fork_children(
        tally, kForksPerRound, std::chrono::seconds(2), [] { return true; },
        [&] { return append_once(a); });
    ender.join();
    stop = true;
    owner.join();
  }
  tally.print();
  return tally.clean() ? 0 : 1;
}

// Two threads push_back against a memory limit that refuses commits, so the claims keep closing
// (one-slot claims past capacity undone) and reopening; the main thread forks, and each child
// lifts the limit and appends. A child forked while the claims were closed must reopen them: the
// parent's undone claims never leave in the child. Prints "forks F, hangs H, failures X,
// refusals R" (a child that cannot append in three tries exits 5: a failure).
RESERVOIR_CHILD("concurrent.fork_while_closed") {
  constexpr int kForks = 100;
  reservoir::ArenaOptions o;
  o.commit_granule = o.max_commit_step = pal::page_size();
  ConcurrentDynArray<int> a(reservoir::max_elements(std::size_t{1} << 24), o);
  a.push_back(0);
  reservoir::set_memory_limit(pal::current_rss() + (std::size_t{12} << 20));
  std::atomic<bool> stop{false};
  std::atomic<long> refusals{0};
  std::vector<std::thread> pushers;
  for (int t = 0; t < 2; ++t) {
    pushers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        try {
          a.push_back(1);
        } catch (const std::exception&) {  // refused, or full
          refusals.fetch_add(1);
        }
      }
    });
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (refusals.load() < 1000 && std::chrono::steady_clock::now() < end)
    std::this_thread::yield();
  ForkTally tally;
  fork_children(
      tally, kForks, std::chrono::seconds(2),
      [&] { return std::chrono::steady_clock::now() < end; },
      [&] {
        reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
        for (int k = 0; k < 3; ++k) {
          try {
            (void)a.push_back(3);
            return 0;
          } catch (const std::exception&) {
          }
        }
        return 5;
      });
  stop = true;
  for (std::thread& t : pushers)
    t.join();
  reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  tally.print("");
  std::printf(", refusals %ld\n", refusals.load());
  return tally.clean() && refusals.load() > 0 ? 0 : 1;
}
#endif

// Sends this child's stderr to its stdout, which the parent captures, and prints the address of
// `array` ("array 0x..."), which the loss message must name.
void stderr_to_stdout_naming(const void* array) {
  std::printf("array %p\n", array);
  std::fflush(stdout);
  std::fflush(stderr);
#if defined(_WIN32)
  (void)_dup2(_fileno(stdout), _fileno(stderr));
#else
  (void)::dup2(STDOUT_FILENO, STDERR_FILENO);
#endif
}

// 15 elements through a Writer into an array of 10, the writer destroyed with no flush: the 5 that
// do not fit are lost without any flush having reported it. The default writer aborts with a
// message naming the array (every build); made with WriterLoss::count, it prints "dropped N size
// S".
int writer_drops_unreported(reservoir::WriterLoss on_loss) {
  ConcurrentDynArray<int> a{reservoir::max_elements(10)};
  stderr_to_stdout_naming(&a);
  {
    auto w = a.writer(on_loss);
    for (int i = 0; i < 15; ++i)
      w.push_back(i);
  }
  std::printf("dropped %zu size %zu\n", a.dropped(), a.size());
  return 0;
}
RESERVOIR_CHILD("concurrent.writer_drops_unreported") {
  return writer_drops_unreported(reservoir::WriterLoss::abort);
}
RESERVOIR_CHILD("concurrent.writer_drops_unreported_counted") {
  return writer_drops_unreported(reservoir::WriterLoss::count);
}

// A flush() throws for the one element that does not fit (the program is told), then one more is
// buffered and the writer destroyed: two dropped, the second never reported. Aborts naming one
// element (default writer), or prints "dropped N size S" (WriterLoss::count).
int writer_drops_one_unreported_after_told(reservoir::WriterLoss on_loss) {
  ConcurrentDynArray<int> a{reservoir::max_elements(4)};
  stderr_to_stdout_naming(&a);
  {
    auto w = a.writer(on_loss);
    for (int i = 0; i < 5; ++i)
      w.push_back(i);
    try {
      w.flush();
    } catch (const std::length_error&) {  // told: one element stays buffered
    }
    w.push_back(5);  // never reported
  }
  std::printf("dropped %zu size %zu\n", a.dropped(), a.size());
  return 0;
}
RESERVOIR_CHILD("concurrent.writer_drops_one_unreported_after_told") {
  return writer_drops_one_unreported_after_told(reservoir::WriterLoss::abort);
}
RESERVOIR_CHILD("concurrent.writer_drops_one_unreported_after_told_counted") {
  return writer_drops_one_unreported_after_told(reservoir::WriterLoss::count);
}

// The final flush's commit is refused: the loss message gives the refusal's own words.
RESERVOIR_CHILD("concurrent.writer_drops_refused") {
  reservoir::ArenaOptions o;
  o.reuse_reservation = false;  // nothing committed yet: the flush must commit
  ConcurrentDynArray<int> a{reservoir::max_elements(1000), o};
  stderr_to_stdout_naming(&a);
  {
    auto w = a.writer();
    for (int i = 0; i < 3; ++i)
      w.push_back(i);
    reservoir::pal::testing::fail(pal::Op::commit, 0, 1000,
                                  reservoir::pal::testing::out_of_memory_error());
  }
  std::printf("dropped %zu size %zu\n", a.dropped(), a.size());
  return 0;
}

#if !defined(NDEBUG)
// operator[] past size(): the assertion stops it (a debug build), as DynArray's does.
RESERVOIR_CHILD("concurrent.index_past_size") {
  ConcurrentDynArray<int> a{reservoir::max_elements(8)};
  a.push_back(1);
  a.push_back(2);
  std::printf("%d\n", a[1]);  // fine: the last published element
  std::fflush(stdout);
  const ConcurrentDynArray<int>& c = a;
  std::printf("%d\n", c[2]);  // committed memory, not published
  return 0;
}
#endif

// The child's end was std::abort().
bool aborted(const test::ProcessResult& r) {
#if defined(_WIN32)
  return r.exited && r.exit_code == 3;
#else
  return !r.exited && r.signal == SIGABRT;
#endif
}

// The address the child printed as "array 0x...".
std::string array_address(const std::string& output) {
  const std::size_t at = output.find("array ");
  if (at == std::string::npos) return "(none)";
  const std::size_t end = output.find_first_of("\r\n", at);
  return output.substr(at + 6, end - at - 6);
}

namespace {
// Runs one of the fork children above and checks that it forked and that no child hung or failed
// (skipped where fork cannot be tested with threads: Windows, ThreadSanitizer, AddressSanitizer,
// valgrind).
void check_fork_child(const char* name) {
#if defined(_WIN32) || defined(RESERVOIR_TEST_TSAN)
  (void)name;
  MESSAGE("skipped: no fork on Windows; ThreadSanitizer does not support forking threads");
#else
  if (kAddressSanitizer || test::under_valgrind()) {
    MESSAGE("skipped under AddressSanitizer and valgrind: not fork-safe with threads");
    return;
  }
  const test::ProcessResult r = test::run_child(name);
  MESSAGE(test::describe(r) << ": " << r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("hangs 0, failures 0") != std::string::npos);
#endif
}
}  // namespace

namespace {
// Holds the commit lock on purpose: the first commit the thread marked with t_hold_commit makes
// (inside pal's commit, testing::on_call) waits there, under the lock, until another thread has
// gone to sleep on that lock (pal counted a wait), or gives up after a minute.
thread_local bool t_hold_commit = false;
std::atomic<std::uint64_t> g_waits_at_hold{0};
std::atomic<bool> g_held{false};
std::atomic<bool> g_hold_gave_up{false};

void hold_commit_until_a_wait() {
  if (!t_hold_commit) return;
  t_hold_commit = false;  // once
  g_waits_at_hold = pal::testing::calls(pal::Op::wait);
  g_held = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (pal::testing::calls(pal::Op::wait) == g_waits_at_hold.load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      g_hold_gave_up = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}
}  // namespace

TEST_SUITE("concurrent") {
  TEST_CASE("single-threaded basics and limits") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    CHECK(a.empty());
    CHECK(a.push_back(5) == 0);
    CHECK(a.emplace_back(6u) == 1);
    CHECK(a.size() == 2);
    CHECK(a.at(1) == 6);
    CHECK_THROWS_AS((void)a.at(2), std::out_of_range);
    while (a.size() < a.max_size())
      a.push_back(a.size());
    CHECK_THROWS_AS(a.push_back(1), std::length_error);
    CHECK_FALSE(a.try_emplace_back(1u).has_value());
    CHECK(a.size() == 100'000);
    CHECK(a.published().back() == 99'999);
    CHECK_THROWS_AS(ConcurrentDynArray<int>(reservoir::max_elements(0)), std::invalid_argument);
    if constexpr (sizeof(std::size_t) == 8) {  // the claims count in 48 bits: 2^47 at most
      CHECK_THROWS_AS(ConcurrentDynArray<char>(reservoir::max_elements((std::size_t{1} << 47) + 1)),
                      std::length_error);
    }
  }

  TEST_CASE(
      "4 writers x 250k appends while 2 readers scan: every value exactly once, no torn read") {
    const std::uint64_t each = per_writer();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each)};
    const std::uint64_t* const base = a.data();
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, scans{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&] {
        std::size_t last = 0;
        while (!done.load()) {
          const std::size_t n = a.size();
          if (n < last) bad_reads++;  // size() never decreases
          last = n;
          for (std::uint64_t v : a.published()) {
            if (v == 0 || (v >> 32) > kWriters || (v & 0xffffffff) >= each) bad_reads++;
          }
          scans++;
        }
      });
    }
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&a, t, each] {
        for (std::uint64_t s = 0; s < each; ++s)
          a.push_back(encode(t, s));
      });
    }
    for (auto& w : writers)
      w.join();
    done = true;
    for (auto& r : readers)
      r.join();
    CHECK(bad_reads == 0);
    CHECK(scans > 0);
    REQUIRE(a.size() == kWriters * each);
    CHECK(a.data() == base);  // nothing moved
    // Every value exactly once, and each writer's values in its own order.
    std::vector<std::uint64_t> next(kWriters, 0);
    for (std::uint64_t v : a.published()) {
      const std::uint64_t t = (v >> 32) - 1, s = v & 0xffffffff;
      REQUIRE(t < kWriters);
      REQUIRE(s == next[t]);
      ++next[t];
    }
    for (auto n : next)
      CHECK(n == each);
  }

  TEST_CASE(
      "refused commits under contention: errors to their threads, published elements intact") {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // many commits
    // Enough pages for the refusals to end (about 2 commits a page: the elements' and the
    // marks'), fewer under valgrind.
    const std::uint64_t each = test::under_valgrind() ? 5'000 : 20'000;
    ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(kWriters * each), o);
    std::atomic<std::uint64_t> added{0}, refused{0};
    {
      test::FaultGuard fault(pal::Op::commit, 10, 25);  // the 11th..35th commits fail
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          for (std::uint64_t s = 0; s < each; ++s) {
            if (s % 2) {
              if (a.try_emplace_back(encode(t, s)))
                added++;
              else
                refused++;
            } else {
              try {
                a.push_back(encode(t, s));
                added++;
              } catch (const reservoir::OsAllocationError&) {
                refused++;
              }
            }
          }
        });
      }
      for (auto& w : writers)
        w.join();
    }
    CHECK(refused > 0);
    CHECK(a.size() == added);
    require_no_hole_no_duplicate(a);
    a.push_back(encode(0, 99'999));  // usable afterwards
    CHECK(a.size() == added + 1);
  }

  TEST_CASE("one thread appending alone never touches the ready marks' pages") {
    if (const char* why = test::rss_unmeasurable()) {
      MESSAGE(why);
      return;
    }
    // 64 MiB of elements, one mark byte each (16 MiB): in order, the marks are never written,
    // so only the elements become resident.
    constexpr std::size_t kCount = std::size_t{1} << 24;
    std::vector<std::uint32_t> batch(std::size_t{1} << 20);
    const std::size_t before = pal::current_rss() / 1024;
    {
      ConcurrentDynArray<std::uint32_t> a{reservoir::max_elements(kCount)};
      for (std::size_t done = 0; done < kCount / 2; done += batch.size()) {
        std::iota(batch.begin(), batch.end(), static_cast<std::uint32_t>(done));
        a.append_range(batch);
      }
      auto w = a.writer();  // a lone Writer's blocks are in order too
      for (std::size_t i = kCount / 2; i < kCount; ++i)
        w.push_back(static_cast<std::uint32_t>(i));
      w.flush();
      const std::size_t after = pal::current_rss() / 1024;
      const std::size_t grew_kib = after > before ? after - before : 0;
      INFO("RSS grew by " << grew_kib << " KiB for " << kCount * 4 / 1024 << " KiB of elements");
      CHECK(a.size() == kCount);
      CHECK(a[kCount - 1] == kCount - 1);
      // Elements + 8 MiB (+ ASan's shadow of them); the marks alone would add 16 MiB.
      const std::size_t shadow = kAddressSanitizer ? kCount * 4 / 8 : 0;
      CHECK(grew_kib < (kCount * 4 + shadow + kCount / 2) / 1024);
    }
  }

  TEST_CASE("a refused commit of the ready marks after the elements' commit adds nothing") {
    reservoir::ArenaOptions o;
    o.reuse_reservation = false;  // no parked reservation: the first append commits both arenas
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000), o};
    {
      // The next commit (the elements') passes, the one after it (the marks') fails.
      test::FaultGuard fault(pal::Op::commit, 1, 1);
      const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
      CHECK_THROWS_AS(a.push_back(1), reservoir::OsAllocationError);
      CHECK(pal::testing::calls(pal::Op::commit) - commits == 2);
    }
    CHECK(a.size() == 0);
    CHECK(a.capacity() == 0);    // not published: the marks are missing
    CHECK(a.push_back(2) == 0);  // the retry commits the marks; the elements' step is kept
    CHECK(a.push_back(3) == 1);
    CHECK(a.size() == 2);
    CHECK(a[0] == 2);
    CHECK(a[1] == 3);
    CHECK(a.capacity() > 0);
  }

  TEST_CASE("every member is defined on default-constructed and moved-from arrays") {
    ConcurrentDynArray<int> d;
    check_empty_unreserved(d);

    ConcurrentDynArray<int> a{reservoir::max_elements(1000)};
    a.push_back(1);
    a.push_back(2);
    const int* base = a.data();
    ConcurrentDynArray<int> b(std::move(a));
    check_empty_unreserved(a);
    CHECK(b.size() == 2);
    CHECK(b.data() == base);  // nothing moved in memory
    CHECK(b.max_size() == 1000);
    b.push_back(3);
    CHECK(b.at(2) == 3);

    ConcurrentDynArray<int> c{reservoir::max_bytes(4000)};
    c.push_back(9);
    c = std::move(b);  // c's old element is destroyed, b's taken
    check_empty_unreserved(b);
    CHECK(c.size() == 3);
    CHECK(c[0] == 1);
    CHECK(c.data() == base);
    swap(b, c);
    CHECK(b.size() == 3);
    check_empty_unreserved(c);
    c = ConcurrentDynArray<int>{reservoir::max_elements(10)};  // a moved-from array is reusable
    CHECK(c.push_back(4) == 0);
  }

  TEST_CASE("append_range: one block of consecutive indices, all-or-nothing at the limit") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100)};
    std::vector<std::uint64_t> v(40);
    std::iota(v.begin(), v.end(), 1);
    CHECK(a.append_range(v) == 0);
    CHECK(a.push_back(1000) == 40);
    CHECK(a.append_range(v) == 41);
    CHECK(a.size() == 81);
    CHECK(a[41] == 1);
    CHECK(a[80] == 40);
    // 19 slots left: a block of 40 does not fit and claims nothing.
    CHECK_THROWS_AS(a.append_range(v), std::length_error);
    CHECK(a.size() == 81);
    // A block ending exactly at the limit fits.
    const std::vector<std::uint64_t> last(19, 7);
    CHECK(a.append_range(last) == 81);
    CHECK(a.size() == 100);
    CHECK(a.published().back() == 7);
    CHECK_THROWS_AS(a.append_range(last), std::length_error);
    CHECK_THROWS_AS(a.push_back(1), std::length_error);
    CHECK(a.size() == 100);
  }

  TEST_CASE("a throwing copy inside a block claims nothing: no hole, array still usable") {
    ConcurrentDynArray<Picky> a{reservoir::max_elements(1000)};
    std::vector<Picky> ok, poisoned;  // (an initializer list would copy)
    for (std::uint64_t v : {1, 2, 3})
      ok.emplace_back(v);
    for (std::uint64_t v : {8, 14, 9})  // copying the second throws
      poisoned.emplace_back(v);
    CHECK(a.append_range(ok) == 0);
    CHECK_THROWS_AS(a.append_range(poisoned), std::runtime_error);
    CHECK(a.size() == 3);
    CHECK(a.append_range(ok) == 3);  // indices continue with no gap
    CHECK_THROWS_AS(a.push_back(Picky(8) = Picky(21)), std::runtime_error);  // copy throws
    for (Picky& p : poisoned)                                                // moving never throws
      a.push_back(std::move(p));
    CHECK(a.size() == 9);
    for (std::size_t i = 0; i < a.size(); ++i)
      CHECK(a[i].v != 0);
  }

  TEST_CASE("4 writers appending blocks of 1..64 with throwing copies while readers scan") {
    const std::uint64_t blocks = valgrind_scale(4000);
    ConcurrentDynArray<Picky> a{reservoir::max_elements(kWriters * blocks * 64)};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, added{0}, thrown{0};
    std::thread reader([&] {
      while (!done.load()) {
        for (const Picky& p : a.published())
          if (p.v == 0) bad_reads++;
      }
    });
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        std::uint64_t seq = 1;
        std::vector<Picky> block;
        for (std::uint64_t b = 0; b < blocks; ++b) {
          block.clear();
          const std::uint64_t n = 1 + (b * 37 + static_cast<std::uint64_t>(t)) % 64;
          for (std::uint64_t k = 0; k < n; ++k) {
            // Values that are multiples of 7 throw when copied: only in every 10th block.
            std::uint64_t v = encode(t, seq++);
            if (b % 10 != 0 && v % 7 == 0) v = encode(t, seq++);
            if (b % 10 != 0 && v % 7 == 0) v = encode(t, seq++);
            block.emplace_back(v);
          }
          try {
            a.append_range(block);  // copies
            added += n;
          } catch (const std::runtime_error&) {
            thrown++;
          }
        }
      });
    }
    for (auto& w : writers)
      w.join();
    done = true;
    reader.join();
    CHECK(bad_reads == 0);
    CHECK(thrown > 0);
    REQUIRE(a.size() == added);
    // Blocks are contiguous and each writer's values in its own order.
    std::vector<std::uint64_t> last(kWriters, 0);
    for (const Picky& p : a.published()) {
      const std::uint64_t t = (p.v >> 32) - 1, s = p.v & 0xffffffff;
      REQUIRE(t < kWriters);
      REQUIRE(s > last[t]);
      last[t] = s;
    }
  }

  TEST_CASE("once every writer has returned from its last append, a reader sees all of it") {
    // No publish point is needed: no thread holds claimed slots between calls, so after the last
    // append of every writer returns, size() is the total (without joining the writers).
    const std::uint64_t each = valgrind_scale(5000);
    for (int round = 0; round < 20; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each * 2)};
      std::atomic<int> finished{0};
      std::atomic<bool> release{false};
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          for (std::uint64_t s = 0; s < each; ++s) {
            if (s % 3 == 0) {
              const std::uint64_t pair[2] = {encode(t, s), encode(t, s) | (1ull << 31)};
              a.append_range(pair);
            } else {
              a.push_back(encode(t, s));
            }
          }
          finished.fetch_add(1, std::memory_order_release);
          while (!release.load())  // stay alive: the check below must not rely on join()
            std::this_thread::yield();
        });
      }
      while (finished.load(std::memory_order_acquire) < kWriters)
        std::this_thread::yield();
      const std::uint64_t expected = kWriters * (each + (each + 2) / 3);
      CHECK(a.size() == expected);
      std::uint64_t zeros = 0;
      for (std::uint64_t v : a.published())
        zeros += v == 0;
      CHECK(zeros == 0);
      release = true;
      for (auto& w : writers)
        w.join();
    }
  }

  TEST_CASE("4 writers race blocks to a reservation limit: the last blocks fit exactly, no hole") {
    // 4 threads append blocks of 1..16 until the array refuses: every refused block claims
    // nothing, so the array ends full or with fewer free slots than the smallest refused block.
    const std::size_t limit = valgrind_scale(50'000);
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(limit)};
    std::atomic<std::uint64_t> added{0};
    std::atomic<std::size_t> smallest_refused{limit};
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        std::uint64_t seq = 0;
        std::vector<std::uint64_t> block;
        for (std::uint64_t b = 0;; ++b) {
          const std::size_t n = 1 + (b * 5 + static_cast<std::uint64_t>(t)) % 16;
          block.clear();
          for (std::size_t k = 0; k < n; ++k)
            block.push_back(encode(t, seq++));
          try {
            a.append_range(block);
            added += n;
          } catch (const std::length_error&) {
            std::size_t cur = smallest_refused.load();
            while (n < cur && !smallest_refused.compare_exchange_weak(cur, n)) {
            }
            if (n == 1) return;  // full
            seq -= n;            // retry smaller blocks with the same values
          }
        }
      });
    }
    for (auto& w : writers)
      w.join();
    CHECK(a.size() == added);
    CHECK(a.size() == limit);  // threads stop only when a 1-element block is refused
    CHECK(smallest_refused == 1);
    require_no_hole_no_duplicate(a);
  }

  TEST_CASE("a Writer of a type without assignment: a partial flush keeps the rest in order") {
    struct Fixed {  // nothrow movable, neither copy- nor move-assignable
      const int v;
      explicit Fixed(int x) noexcept : v(x) {}
    };
    static_assert(!std::is_move_assignable_v<Fixed>);
    ConcurrentDynArray<Fixed> a{reservoir::max_elements(10)};
    CHECK(a.emplace_back(0) == 0);  // the array's own appends need no assignment either
    auto w = a.writer();
    for (int v = 1; v <= 10; ++v)  // the writer's block is the array's size, 10: no flush yet
      w.emplace_back(v);
    CHECK(w.buffered() == 10);
    try {
      (void)w.flush();
      FAIL("a flush past max_size() must throw");
    } catch (const std::length_error& e) {
      // The message says what went where.
      CHECK(std::string(e.what()).find("appended 9 of 10 buffered elements at index 1") !=
            std::string::npos);
    }
    CHECK(a.size() == 10);
    CHECK(w.buffered() == 1);
    for (int i = 0; i < 10; ++i)
      CHECK(a[static_cast<std::size_t>(i)].v == i);
    CHECK_THROWS_AS((void)w.flush(), std::length_error);     // still full: nothing moves
    CHECK_THROWS_AS(w.emplace_back(11), std::length_error);  // its flush throws: not added
    CHECK(w.buffered() == 1);
    CHECK(a.size() == 10);
  }

  TEST_CASE("append_range from a range whose iterator throws claims nothing") {
    // A forward range (not contiguous) whose dereference throws on a negative element and
    // otherwise yields ten times the element.
    struct Scaled {
      struct iterator {
        using value_type = int;
        using difference_type = std::ptrdiff_t;
        const int* p = nullptr;
        int operator*() const {
          if (*p < 0) throw std::runtime_error("bad element");
          return *p * 10;
        }
        iterator& operator++() {
          ++p;
          return *this;
        }
        iterator operator++(int) {
          iterator old = *this;
          ++p;
          return old;
        }
        bool operator==(const iterator&) const = default;
      };
      const std::vector<int>* v;
      iterator begin() const { return {v->data()}; }
      iterator end() const { return {v->data() + v->size()}; }
    };
    static_assert(std::ranges::forward_range<Scaled> && !std::ranges::contiguous_range<Scaled>);
    ConcurrentDynArray<int> a{reservoir::max_elements(100)};
    const std::vector<int> bad = {1, 2, -3, 4};
    CHECK_THROWS_AS((void)a.append_range(Scaled{&bad}), std::runtime_error);
    CHECK(a.size() == 0);  // no claimed, unpublished slot holds the prefix back
    CHECK(a.push_back(7) == 0);
    CHECK(a.size() == 1);
    const std::vector<int> ok = {1, 2, 3};
    CHECK(a.append_range(Scaled{&ok}) == 1);
    CHECK(a.append_range(ok) == 4);  // contiguous: built in place
    CHECK(a.size() == 7);
    CHECK(a[3] == 30);
    CHECK(a[6] == 3);
  }

  TEST_CASE("a Writer: buffered until flush, one block of consecutive indices, then visible") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    auto w = a.writer();
    for (std::uint64_t v = 1; v <= 10; ++v)
      w.push_back(v);
    CHECK(w.buffered() == 10);
    CHECK(a.size() == 0);          // the writer's alone until flushed
    CHECK(a.push_back(100) == 0);  // the array's own appends are not held back
    CHECK(w.flush() == 1);         // the block's first index
    CHECK(w.buffered() == 0);
    CHECK(a.size() == 11);
    CHECK(a[1] == 1);
    CHECK(a[10] == 10);
    CHECK(w.flush() == a.max_size());  // nothing buffered
    // The buffer fills and flushes by itself; blocks grow (16, 32, ...), so after 1000 appends at
    // most one block is held back.
    for (std::uint64_t v = 11; v <= 1010; ++v)
      w.push_back(v);
    CHECK(a.size() >= 11 + 1000 - 512);
    CHECK(a.size() + w.buffered() == 1011);
    {
      auto moved = std::move(w);  // takes the buffer; w stays usable, empty
      CHECK(w.buffered() == 0);
      w.push_back(5000);
    }  // moved's destructor publishes
    CHECK(a.size() + w.buffered() == 1012);
    w.flush();
    CHECK(a.size() == 1012);
    for (std::uint64_t i = 1; i < 1011; ++i)
      REQUIRE(a[i] == i);
    CHECK(a[1011] == 5000);
  }

  TEST_CASE("a Writer at the reservation limit: what fits is appended, the rest stays buffered") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100)};
    for (std::uint64_t v = 1; v <= 90; ++v)
      a.push_back(v);
    auto w = a.writer();
    for (std::uint64_t v = 91; v <= 105; ++v)  // 15 buffered, 10 fit
      w.push_back(v);
    CHECK_THROWS_AS(w.flush(), std::length_error);
    CHECK(a.size() == 100);
    CHECK(a[99] == 100);
    CHECK(w.buffered() == 5);
    CHECK_THROWS_AS(w.flush(), std::length_error);  // still full: keeps them
    CHECK(w.buffered() == 5);
    CHECK(a.size() == 100);
    // A block never outgrows the array: a writer of a tiny array flushes at its size. Errors
    // come from flushes: an element buffered while the array is already full stays buffered.
    ConcurrentDynArray<std::uint64_t> tiny{reservoir::max_elements(3)};
    auto t = tiny.writer();
    t.push_back(1);
    t.push_back(2);
    t.push_back(3);
    CHECK(tiny.size() == 0);
    t.push_back(4);  // flushes 1, 2, 3 first
    CHECK(tiny.size() == 3);
    CHECK(t.buffered() == 1);
    CHECK_THROWS_AS(t.flush(), std::length_error);
    CHECK(t.buffered() == 1);
  }  // the destructors drop what does not fit, without throwing

  TEST_CASE("a throwing constructor inside a Writer's block adds nothing; the block goes on") {
    ConcurrentDynArray<Picky> a{reservoir::max_elements(1000)};
    {
      auto w = a.writer();
      for (std::uint64_t v = 1; v <= 40; ++v) {
        const Picky p(v);
        if (v % 7 == 0)
          CHECK_THROWS_AS(w.push_back(p), std::runtime_error);  // copying throws
        else
          w.push_back(p);
      }
      CHECK(w.buffered() + a.size() == 35);
    }
    CHECK(a.size() == 35);
    std::uint64_t expected = 1;
    for (const Picky& p : a.published()) {
      if (expected % 7 == 0) ++expected;
      REQUIRE(p.v == expected);
      ++expected;
    }
  }

  TEST_CASE("4 Writers and 2 readers: every value once, no torn read, each writer in order") {
    const std::uint64_t each = per_writer();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each)};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, scans{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&] {
        std::size_t last = 0;
        while (!done.load()) {
          const std::size_t n = a.size();
          if (n < last) bad_reads++;
          last = n;
          for (std::uint64_t v : a.published()) {
            if (v == 0 || (v >> 32) > kWriters || (v & 0xffffffff) >= each) bad_reads++;
          }
          scans++;
        }
      });
    }
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&a, t, each] {
        auto w = a.writer();
        for (std::uint64_t s = 0; s < each; ++s) {
          w.push_back(encode(t, s));
          if (s % (each / 25 + 7) == 0) w.flush();  // some short blocks too
        }
      });  // the writer's destructor publishes the rest
    }
    for (auto& w : writers)
      w.join();
    done = true;
    for (auto& r : readers)
      r.join();
    CHECK(bad_reads == 0);
    CHECK(scans > 0);
    REQUIRE(a.size() == kWriters * each);
    std::vector<std::uint64_t> next(kWriters, 0);
    for (std::uint64_t v : a.published()) {
      const std::uint64_t t = (v >> 32) - 1, s = v & 0xffffffff;
      REQUIRE(t < kWriters);
      REQUIRE(s == next[t]);
      ++next[t];
    }
  }

  TEST_CASE("Writers that meet at a fresh process's first commits: every waiter wakes") {
    // Each child starts 4 Writers at once on the process's first arrays (test::run_child starts
    // a fresh process), where a waiter's first sleep is slowest to begin. std::atomic::wait
    // under MinGW-w64's libstdc++ lost the holder's wake there now and then (a bench cell hung
    // in about 1 of 15 fresh processes under Wine); the child's watchdog turns a hang into exit 3.
    const int children = test::under_valgrind() ? 2 : 24;
    for (int c = 0; c < children; ++c) {
      CAPTURE(c);
      const test::ProcessResult r = test::run_child("concurrent.writers_meet_fresh");
      INFO(test::describe(r) << ": " << r.output);
      REQUIRE(r.exited);
      REQUIRE(r.exit_code == 0);
    }
  }

  TEST_CASE("the commit lock: no wait or wake alone; a waiter sleeps until the holder lets go") {
    // Both with the OS's wait and with every wait refused by the OS (then the waiter polls).
    const test::HangWatchdog watchdog("the commit lock's waiter", 600);
    for (const bool refuse_waits : {false, true}) {
      CAPTURE(refuse_waits);
      reservoir::ArenaOptions o;
      o.commit_granule = o.max_commit_step = pal::page_size();  // a commit every page
      ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(10'000'000), o);
      a.push_back(encode(9, 1));
      std::thread([&] { a.push_back(encode(9, 2)); }).join();  // shared mode from here
      // One appender alone: hundreds of commits under the lock, never a wait, so never a wake
      // (a release wakes only when a waiter marked the lock).
      const std::uint64_t waits = pal::testing::calls(pal::Op::wait);
      const std::uint64_t wakes = pal::testing::calls(pal::Op::wake);
      const std::uint64_t alone = test::under_valgrind() ? 20'000 : 100'000;
      for (std::uint64_t s = 1; s <= alone; ++s)
        a.push_back(encode(8, s));
      CHECK(pal::testing::calls(pal::Op::wait) == waits);
      CHECK(pal::testing::calls(pal::Op::wake) == wakes);

      // The holder's next commit stops under the lock until the other thread, out of capacity,
      // has gone to sleep on it; its release must then wake that thread.
      std::optional<test::FaultGuard> refused;
      if (refuse_waits)
        refused.emplace(pal::Op::wait, 0, 1'000'000'000,
                        std::make_error_code(std::errc::not_supported));
      g_held = false;
      g_hold_gave_up = false;
      pal::testing::on_call(pal::Op::commit, &hold_commit_until_a_wait);
      std::atomic<bool> holder_done{false};
      std::atomic<std::uint64_t> other_added{0};
      const std::uint64_t each = 50'000;
      std::thread holder([&] {
        t_hold_commit = true;
        for (std::uint64_t s = 1; s <= each; ++s)
          a.push_back(encode(0, s));
        holder_done = true;
      });
      std::thread other([&] {
        // Appends until the holder is done (and at least until it has held the lock), so it
        // runs out of capacity while the lock is held.
        std::uint64_t s = 0;
        while ((!holder_done.load() || !g_held.load()) && s < 5'000'000)
          a.push_back(encode(1, ++s));
        other_added = s;
      });
      holder.join();
      other.join();
      pal::testing::on_call(pal::Op::commit, nullptr);
      refused.reset();
      CHECK(g_held.load());
      CHECK_FALSE(g_hold_gave_up.load());  // the other thread went to sleep on the held lock
      CHECK(pal::testing::calls(pal::Op::wait) > g_waits_at_hold.load());
      CHECK(pal::testing::calls(pal::Op::wake) > wakes);  // and the release woke it
      REQUIRE(a.size() == 2 + alone + each + other_added.load());
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE(
      "once every Writer has flushed, a reader sees all of it; a stopped one hides only its own") {
    // At least 737: writer t of round r appends each - (r * 37 + t * 11).
    const std::uint64_t each = test::under_valgrind() ? 1000 : 5000;
    for (int round = 0; round < 20; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each * 2)};
      std::atomic<int> finished{0};
      std::atomic<bool> release{false};
      std::vector<std::thread> writers;
      // Writer 0 also appends a partly filled block and does not flush it: the others' elements
      // after it must still be published, and only its buffer is missing.
      std::atomic<std::uint64_t> hidden{0};
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          auto w = a.writer();
          const std::uint64_t n = each - static_cast<std::uint64_t>(round * 37 + t * 11);
          for (std::uint64_t s = 0; s < n; ++s) {
            if (s % 3 == 0)
              a.push_back(encode(t, s));  // the array's own appends mixed in
            else
              w.push_back(encode(t, s));
          }
          w.flush();
          if (t == 0) {
            for (std::uint64_t s = 0; s < 5; ++s)
              w.push_back(encode(t, n + s));
            hidden = w.buffered();
          }
          finished.fetch_add(1, std::memory_order_release);
          while (!release.load())  // stay alive: the check below must not rely on join()
            std::this_thread::yield();
        });
      }
      while (finished.load(std::memory_order_acquire) < kWriters)
        std::this_thread::yield();
      std::uint64_t expected = 0;
      for (int t = 0; t < kWriters; ++t)
        expected += each - static_cast<std::uint64_t>(round * 37 + t * 11);
      CHECK(hidden == 5);
      CHECK(a.size() == expected);
      std::uint64_t zeros = 0;
      for (std::uint64_t v : a.published())
        zeros += v == 0;
      CHECK(zeros == 0);
      release = true;
      for (auto& w : writers)
        w.join();
      CHECK(a.size() == expected + 5);  // writer 0's destructor published its block
    }
  }

  TEST_CASE("threads that exit with partly filled Writer blocks: all of it published, no hole") {
    // Threads come and go, each appending a count that is no multiple of a block and exiting
    // without flushing; a reader scans meanwhile.
    constexpr std::size_t kMax = 400'000;
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kMax)};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, total{0};
    std::thread reader([&] {
      while (!done.load())
        for (std::uint64_t v : a.published())
          if (v == 0) bad_reads++;
    });
    const std::uint64_t longest = valgrind_scale(3000);
    for (int wave = 0; wave < 25; ++wave) {
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        const std::uint64_t n = 1 + (static_cast<std::uint64_t>(wave) * 977 + 131 * t) % longest;
        total += n;
        writers.emplace_back([&a, t, wave, n] {
          auto w = a.writer();
          for (std::uint64_t s = 0; s < n; ++s)
            w.push_back(encode(static_cast<std::uint64_t>(wave * kWriters + t), s));
        });
      }
      for (auto& w : writers)
        w.join();
      CHECK(a.size() == total);  // every exited thread's block is in
    }
    done = true;
    reader.join();
    CHECK(bad_reads == 0);
    require_no_hole_no_duplicate(a);
  }

  TEST_CASE("4 Writers race to the reservation limit: the array ends exactly full, no hole") {
    const std::size_t limit = valgrind_scale(100'000) + 3;  // not a multiple of any block
    for (int round = 0; round < 5; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(limit)};
      std::atomic<std::uint64_t> accepted{0}, left_over{0};
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          auto w = a.writer();
          for (std::uint64_t s = 0;; ++s) {
            try {
              w.push_back(encode(t, s));
              accepted++;
              if (s % 1'001 == 0) w.flush();
            } catch (const std::length_error&) {
              break;  // full: what fitted was appended
            }
          }
          left_over += w.buffered();  // dropped by the destructor
        });
      }
      for (auto& w : writers)
        w.join();
      CHECK(a.size() == limit);
      CHECK(a.size() + left_over == accepted);
      CHECK(a.dropped() == left_over);  // each writer's last flush threw: reported, then counted
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE("refused commits under contention with Writers: nothing lost, no hole") {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // many commits
    // Enough pages for the refusals to end (about 2 commits a page: the elements' and the
    // marks'), fewer under valgrind.
    const std::uint64_t each = test::under_valgrind() ? 5'000 : 20'000;
    ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(kWriters * each), o);
    std::atomic<std::uint64_t> added{0}, refused{0};
    {
      test::FaultGuard fault(pal::Op::commit, 10, 25);  // the 11th..35th commits fail
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          auto w = a.writer();
          for (std::uint64_t s = 0; s < each; ++s) {
            try {
              w.push_back(encode(t, s));
              added++;
            } catch (const reservoir::OsAllocationError&) {
              refused++;  // the buffer is kept; this value was not added
            }
          }
          for (;;) {  // the refusals are finite: flush until it goes through
            try {
              w.flush();
              break;
            } catch (const reservoir::OsAllocationError&) {
              refused++;
            }
          }
        });
      }
      for (auto& w : writers)
        w.join();
    }
    CHECK(refused > 0);
    CHECK(a.size() == added);
    require_no_hole_no_duplicate(a);
  }

  TEST_CASE("blocks of many sizes marked ready out of order: the prefix skips whole chunks") {
    // Holds back slot 0 while other threads publish blocks of 1..300 after it through
    // append_range, so every block is marked ready in chunks; then slot 0 completes and one
    // thread publishes the whole run.
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(200'000)};
    std::atomic<bool> go{false};
    std::thread first = hold_next_slot(a, 9, go);  // slot 0 is taken
    std::vector<std::thread> writers;
    std::atomic<std::uint64_t> added{1};
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        std::vector<std::uint64_t> block;
        std::uint64_t seq = 0;
        for (std::uint64_t b = 0; b < 100; ++b) {
          block.clear();
          const std::uint64_t n = 1 + (b * 89 + static_cast<std::uint64_t>(t) * 7) % 300;
          for (std::uint64_t k = 0; k < n; ++k)
            block.push_back(encode(t, seq++));
          a.append_range(block);
          added += n;
        }
      });
    }
    for (auto& w : writers)
      w.join();
    CHECK(a.size() == 0);  // all held back by slot 0
    go = true;
    first.join();
    CHECK(a.size() == added);
    for (std::uint64_t v : a.published())
      REQUIRE(v != 0);
  }

  // ---- solo mode: one appending thread uses no atomic read-modify-write until a second appends

  TEST_CASE("solo mode: a second appending thread ends it with one barrier, once") {
    const bool solo = pal::process_barrier_supported();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    const std::uint64_t before = pal::testing::calls(pal::Op::barrier);
    std::thread owner([&] {  // appends first, then ends: the array outlives its owner thread
      for (std::uint64_t k = 0; k < 1000; ++k)
        a.push_back(encode(0, k));
    });
    owner.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before);  // nothing to end yet
    for (std::uint64_t k = 0; k < 1000; ++k)
      a.push_back(encode(1, k));
    CHECK(pal::testing::calls(pal::Op::barrier) == before + (solo ? 1 : 0));
    std::thread third([&] {
      for (std::uint64_t k = 0; k < 1000; ++k)
        a.emplace_back_with([k](std::size_t) noexcept { return encode(2, k); });
    });
    third.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before + (solo ? 1 : 0));  // ended for good
    REQUIRE(a.size() == 3000);
    for (std::uint64_t i = 0; i < 3000; ++i)
      REQUIRE(a[i] == encode(i / 1000, i % 1000));
  }

  TEST_CASE("the owner's trivial copies take the sectionless append until another thread appends") {
    using reservoir::detail::ConcurrentCore;
    const bool solo = pal::process_barrier_supported();
    ConcurrentCore core(1000, sizeof(int), alignof(int), reservoir::ArenaOptions{});
    int* const slots = static_cast<int*>(core.data());
    std::size_t constructed = 0;
    const auto store = [&](std::size_t k) noexcept {
      slots[k] = static_cast<int>(k) * 3;
      ++constructed;
    };
    CHECK(core.append_solo(store) == 0);  // no owner yet (and nothing committed)
    CHECK(constructed == 0);
    const std::size_t first =
        core.claim({sizeof(int), "push_back"});  // the general way: this thread owns it
    slots[first] = 0;
    core.publish(first);
    // An append of the owner's in progress (claimed, not yet published): a nested one must go
    // the general way.
    const std::size_t open = core.claim({sizeof(int), "push_back"});
    CHECK(core.append_solo(store) == 0);
    slots[open] = 3;
    core.publish(open);
    CHECK(core.append_solo(store) == (solo ? 3u : 0u));
    CHECK(constructed == (solo ? 1u : 0u));
    CHECK(core.size() == (solo ? 3u : 2u));
    std::thread second([&] {  // a second appender ends solo mode
      const std::size_t i = core.claim({sizeof(int), "push_back"});
      slots[i] = static_cast<int>(i) * 3;
      core.publish(i);
    });
    second.join();
    const std::size_t n = core.size();
    CHECK(core.append_solo(store) == 0);
    CHECK(core.size() == n);
    for (std::size_t k = 0; k < n; ++k)
      REQUIRE(slots[k] == static_cast<int>(k) * 3);
  }

  TEST_CASE("ending solo mode while the owner keeps appending: every value once, in order") {
    // The owner appends alone, then three more threads start at a different point each round;
    // readers check the published prefix all along.
    const std::uint64_t owner_count = valgrind_scale(60'000), others_count = owner_count / 3;
    for (std::uint64_t round = 0; round < 12; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(owner_count + 3 * others_count)};
      std::atomic<bool> done{false};
      std::atomic<std::uint64_t> bad{0};
      std::thread reader([&] {
        while (!done.load()) {
          for (std::uint64_t v : a.published())
            if (v == 0) ++bad;
        }
      });
      std::thread owner([&] {
        for (std::uint64_t k = 0; k < owner_count; ++k)
          a.push_back(encode(0, k));
      });
      // 0 (at once) .. 55% of the owner's elements
      const std::uint64_t start = round * (owner_count / 20);
      while (a.size() < start)
        std::this_thread::yield();
      std::vector<std::thread> others;
      for (std::uint64_t t = 1; t <= 3; ++t) {
        others.emplace_back([&, t] {
          if (t == 3) {
            auto w = a.writer();
            for (std::uint64_t k = 0; k < others_count; ++k)
              w.push_back(encode(t, k));
          } else {
            for (std::uint64_t k = 0; k < others_count; ++k)
              a.push_back(encode(t, k));
          }
        });
      }
      owner.join();
      for (auto& t : others)
        t.join();
      done = true;
      reader.join();
      CHECK(bad.load() == 0);
      REQUIRE(a.size() == owner_count + 3 * others_count);
      require_no_hole_no_duplicate(a);
      std::vector<std::uint64_t> next(4, 0);  // each thread's values appear in its own order
      for (std::uint64_t v : a.published()) {
        const std::uint64_t t = (v >> 32) - 1;
        REQUIRE((v & 0xffffffffU) == next[t]);
        ++next[t];
      }
    }
  }

  TEST_CASE("solo mode ends in the middle of the owner's trivial appends: no slot twice") {
    // The owner's append of a trivial copy claims before it checks the mode: a claim the ending
    // thread counted stands (the owner fills and publishes it after solo mode), one it did not
    // count is dropped and taken again the shared way. Short rounds, the second thread's one
    // append landing at a different point of the owner's loop each time, hit both windows.
    // A thread per round: under ASan a fifth of the rounds (each thread start costs about a
    // millisecond there), under TSan and valgrind as stress_scale says.
    const std::uint64_t rounds = kAddressSanitizer ? 800 : stress_scale(4000), owner_count = 3000;
    std::uint64_t lost = 0, duplicated = 0, out_of_order = 0;
    for (std::uint64_t round = 0; round < rounds; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(owner_count + 1)};
      std::atomic<bool> go{false};
      std::thread owner([&] {
        a.push_back(encode(0, 0));  // owner from here on
        go.store(true);
        for (std::uint64_t k = 1; k < owner_count; ++k)
          a.push_back(encode(0, k));
      });
      while (!go.load())
        std::this_thread::yield();
      for (std::uint64_t spin = round % 64 * 20; spin != 0; --spin)
        (void)a.size();
      a.push_back(encode(1, 0));
      owner.join();
      lost += a.size() != owner_count + 1;
      std::set<std::uint64_t> seen;
      std::uint64_t next = 0;
      for (std::uint64_t v : a.published()) {
        duplicated += !seen.insert(v).second;
        if ((v >> 32) == 1) continue;
        out_of_order += (v & 0xffffffffU) != next;
        next = (v & 0xffffffffU) + 1;
      }
    }
    CHECK(lost == 0);
    CHECK(duplicated == 0);
    CHECK(out_of_order == 0);
  }

  TEST_CASE("a thread ending solo mode never waits for the owner's construction") {
    // The owner's make() waits until another thread's push_back has returned: if that push_back
    // waited for the owner's append to finish, this would never end.
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    std::atomic<bool> other_done{false};
    std::size_t seen_by_other = 99;
    std::thread owner = hold_next_slot(a, 0, other_done);
    std::thread other([&] {
      a.push_back(encode(1, 0));
      seen_by_other = a.size();  // slot 0 is still held by the owner's construction
      other_done = true;
    });
    other.join();
    CHECK(seen_by_other == 0);
    owner.join();
    REQUIRE(a.size() == 2);
    CHECK(a[0] == encode(0, 0));
    CHECK(a[1] == encode(1, 0));
  }

  TEST_CASE("an append nested in the owner's make() is published after the outer one") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    std::size_t seen_inside = 99;
    a.emplace_back_with([&](std::size_t i) noexcept {
      a.push_back(encode(1, 0));  // slot i + 1, finished first
      seen_inside = a.size();     // held back by slot i
      return encode(0, i);
    });
    CHECK(seen_inside == 0);
    REQUIRE(a.size() == 2);
    CHECK(a[0] == encode(0, 0));
    CHECK(a[1] == encode(1, 0));
    a.push_back(encode(2, 0));  // and the owner goes on
    CHECK(a.size() == 3);
  }

  TEST_CASE("a refused barrier: the second thread's append adds nothing, the owner goes on") {
    if (!pal::process_barrier_supported()) {
      MESSAGE("no process-wide barrier on this system: arrays never enter solo mode");
      return;
    }
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    for (std::uint64_t k = 0; k < 10; ++k)
      a.push_back(encode(0, k));
    {
      test::FaultGuard refuse(pal::Op::barrier, 0, 3);
      std::thread other([&] {
        CHECK_THROWS_AS(a.push_back(encode(1, 0)), std::system_error);
        CHECK_FALSE(a.try_emplace_back(encode(1, 0)).has_value());
        auto w = a.writer();
        w.push_back(encode(1, 0));
        CHECK_THROWS_AS(w.flush(), std::system_error);
        CHECK(w.buffered() == 1);  // kept
        w.flush();                 // the barrier works again
        CHECK(w.buffered() == 0);
      });
      other.join();
    }
    CHECK(a.size() == 11);
    a.push_back(encode(0, 10));
    REQUIRE(a.size() == 12);
    for (std::uint64_t k = 0; k < 10; ++k)
      CHECK(a[k] == encode(0, k));
    CHECK(a[10] == encode(1, 0));
    CHECK(a[11] == encode(0, 10));
  }

  TEST_CASE("barriers refused while the owner appends: its claims stand, nothing is lost") {
    // The owner's trivial append claims, then sees solo mode ending, waits, and finds it solo
    // again (the barrier was refused): the claim stands and the append goes on in solo mode.
    if (!pal::process_barrier_supported()) {
      MESSAGE("no process-wide barrier on this system: arrays never enter solo mode");
      return;
    }
    const std::uint64_t most = 4'000'000, attempts = valgrind_scale(3000);
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(most)};
    std::atomic<bool> owner_started{false}, tried_once{false}, stop{false};
    std::uint64_t appended = 0, refused = 0;
    {
      test::FaultGuard refuse(pal::Op::barrier, 0, std::uint64_t{1} << 40);
      std::thread owner([&] {
        a.push_back(encode(0, 0));
        owner_started.store(true);
        while (!tried_once.load())  // at least one refused attempt, whatever the scheduling
          std::this_thread::yield();
        std::uint64_t k = 1;
        for (; k < most && !stop.load(std::memory_order_relaxed); ++k) {
          a.push_back(encode(0, k));
          if (k % 256 == 0) std::this_thread::yield();  // the other thread's turn, on one core
        }
        appended = k;
        stop.store(true);
      });
      while (!owner_started.load())
        std::this_thread::yield();
      std::uint64_t tried = 0;
      for (; tried < attempts && !stop.load(); ++tried) {
        refused += !a.try_emplace_back(encode(1, 0)).has_value();
        tried_once.store(true);
        std::this_thread::yield();  // a window of solo mode for the owner to see
      }
      stop.store(true);
      owner.join();
      CHECK(refused == tried);
    }
    MESSAGE(refused << " appends refused while the owner appended " << appended);
    CHECK(refused > 0);
    CHECK(a.size() == appended);  // the refused appends added nothing
    CHECK(test::first_wrong(a.size(), [&](std::size_t k) { return a[k] == encode(0, k); }) ==
          a.size());
  }

  TEST_CASE("without a process-wide barrier an array appends the shared way from the start") {
    std::uint64_t before = 0;
    std::optional<ConcurrentDynArray<std::uint64_t>> a;
    {
      test::FaultGuard unsupported(pal::Op::barrier, 0, 1);  // the constructor's question
      a.emplace(reservoir::max_elements(100'000));
      before = pal::testing::calls(pal::Op::barrier);
    }
    std::vector<std::thread> writers;
    for (std::uint64_t t = 0; t < 3; ++t) {
      writers.emplace_back([&, t] {
        for (std::uint64_t k = 0; k < 10'000; ++k)
          a->push_back(encode(t, k));
      });
    }
    for (auto& w : writers)
      w.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before);  // never asked for one
    REQUIRE(a->size() == 30'000);
    require_no_hole_no_duplicate(*a);
  }

  TEST_CASE("a move hands solo mode over with the elements; the source starts afresh") {
    const bool solo = pal::process_barrier_supported();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    for (std::uint64_t k = 0; k < 10; ++k)
      a.push_back(encode(0, k));
    ConcurrentDynArray<std::uint64_t> b(std::move(a));
    check_empty_unreserved(a);
    const std::uint64_t before = pal::testing::calls(pal::Op::barrier);
    b.push_back(encode(0, 10));  // still the owner: no barrier
    CHECK(pal::testing::calls(pal::Op::barrier) == before);
    std::thread other([&] { b.push_back(encode(1, 0)); });
    other.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before + (solo ? 1 : 0));
    REQUIRE(b.size() == 12);
    CHECK(b[10] == encode(0, 10));
    CHECK(b[11] == encode(1, 0));
    a = ConcurrentDynArray<std::uint64_t>{reservoir::max_elements(10)};  // reusable
    a.push_back(1);
    CHECK(a.size() == 1);
  }

  TEST_CASE("hostile element types: every member compiles and behaves") {
    every_member<concurrent_hostile::Amp>();
    every_member<concurrent_hostile::Comma>();
    every_member<concurrent_hostile::MayThrow>();
  }

  TEST_CASE("a 16 MiB element is appended without a copy on the stack") {
    // A thread's default stack is 8 MiB: a 16 MiB value built or copied on it would crash.
    struct Big {
      std::array<unsigned char, 16 << 20> b;
    };
    struct BigMayThrow {
      std::array<unsigned char, 16 << 20> b;
      BigMayThrow() noexcept(false) { b[0] = 7; }
    };
    std::size_t sizes[3] = {};
    std::thread t([&] {
      ConcurrentDynArray<Big> a(reservoir::max_elements(8));
      a.emplace_back();
      const auto value = std::make_unique<Big>();
      value->b[1] = 9;
      a.push_back(*value);
      (void)a.try_emplace_back(*value);
      a.emplace_back_with([](std::size_t) noexcept { return Big{}; });
      sizes[0] = a.size();
      sizes[1] = a[1].b[1];
      ConcurrentDynArray<BigMayThrow> m(reservoir::max_elements(2));
      m.emplace_back();  // built on the heap, then moved into its slot
      (void)m.try_emplace_back();
      sizes[2] = m.size() * 10 + m[1].b[0];
    });
    t.join();
    CHECK(sizes[0] == 4);
    CHECK(sizes[1] == 9);
    CHECK(sizes[2] == 27);
  }

  TEST_CASE("elements aligned past a page, and to a cache line") {
    struct alignas(8192) Page2 {
      int v = 0;
    };
    struct alignas(64) Line {
      int v = 0;
    };
    auto aligned = [](const auto& a) {
      using E = typename std::remove_cvref_t<decltype(a)>::value_type;
      return reinterpret_cast<std::uintptr_t>(a.data()) % alignof(E) == 0;
    };
    ConcurrentDynArray<Page2> p(reservoir::max_elements(64));
    for (int i = 0; i < 40; ++i)
      p.push_back(Page2{i});
    CHECK(aligned(p));
    CHECK(reinterpret_cast<std::uintptr_t>(&p[39]) % 8192 == 0);
    ConcurrentDynArray<Page2> moved(std::move(p));
    CHECK(aligned(moved));
    CHECK(moved[39].v == 39);
    ConcurrentDynArray<Line> l(reservoir::max_elements(10'000));
    for (int i = 0; i < 5000; ++i)
      l.push_back(Line{i});
    CHECK(aligned(l));
    CHECK(l[4999].v == 4999);
  }

  TEST_CASE("2 to 16 threads push_back at once (oversubscribed): every value once, no hole") {
    // More threads than cores: appenders are preempted between claim and publish, and those
    // still running go on past them. A reader checks the published prefix all along.
    for (const unsigned threads : {2u, 3u, 4u, 8u, 16u}) {
      CAPTURE(threads);
      const std::uint64_t each = stress_scale(160'000) / threads;
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(threads * each)};
      std::atomic<bool> done{false};
      std::atomic<std::uint64_t> bad_reads{0}, shrank{0};
      std::thread reader([&] {
        std::size_t last = 0;
        while (!done.load()) {
          const std::span<const std::uint64_t> p = a.published();
          if (p.size() < last) shrank++;
          last = p.size();
          for (std::uint64_t v : p)
            bad_reads += v == 0;
        }
      });
      std::vector<std::thread> writers;
      for (unsigned t = 0; t < threads; ++t) {
        writers.emplace_back([&a, t, each] {
          for (std::uint64_t s = 1; s <= each; ++s)
            a.push_back(encode(t, s));
        });
      }
      for (auto& w : writers)
        w.join();
      done = true;
      reader.join();
      CHECK(bad_reads == 0);
      CHECK(shrank == 0);
      REQUIRE(a.size() == threads * each);
      // Each thread's values once each and in its own order.
      std::vector<std::uint64_t> last(threads, 0);
      for (std::uint64_t v : a.published()) {
        const std::uint64_t t = (v >> 32) - 1, s = v & 0xffffffff;
        REQUIRE(t < threads);
        REQUIRE(s == last[t] + 1);
        last[t] = s;
      }
    }
  }

  TEST_CASE("a reader never observes an element under construction, with 2 to 16 appenders") {
    // Slow writes its fields apart from one another, in its slot (its constructor cannot throw).
    // Readers check every element below size(), and the newest one through at(), while 2-16
    // threads append; under TSan a read of a slot being constructed is also reported as a race.
    for (const unsigned threads : {2u, 5u, 16u}) {
      CAPTURE(threads);
      const std::uint64_t each = stress_scale(32'000) / threads;
      ConcurrentDynArray<Slow> a{reservoir::max_elements(threads * (each + each / 16))};
      std::atomic<bool> done{false};
      std::atomic<std::uint64_t> torn{0}, checked{0};
      std::vector<std::thread> readers;
      for (int r = 0; r < 2; ++r) {
        readers.emplace_back([&, r] {
          std::uint64_t n = 0;
          std::size_t seen = 0;
          while (!done.load()) {
            if (r == 0) {  // what was published since the last look
              const std::span<const Slow> p = a.published();
              for (std::size_t i = seen; i < p.size(); ++i)
                torn += !p[i].whole();
              n += p.size() - seen;
              seen = p.size();
            } else {  // the newest element only, as soon as it is counted
              const std::size_t size = a.size();
              if (size != 0) torn += !a.at(size - 1).whole();
              ++n;
            }
          }
          checked += n;
        });
      }
      std::vector<std::thread> writers;
      for (unsigned t = 0; t < threads; ++t) {
        writers.emplace_back([&a, t, each] {
          for (std::uint64_t s = 1; s <= each; ++s) {
            if (s % 16 == 0) {
              const std::uint64_t v[2] = {encode(t, s), encode(t, s) | (1ull << 31)};
              a.append_range(std::span<const std::uint64_t>(v));  // a block of two
            } else {
              a.emplace_back(encode(t, s));
            }
          }
        });
      }
      for (auto& w : writers)
        w.join();
      done = true;
      for (auto& r : readers)
        r.join();
      CHECK(torn == 0);
      CHECK(checked > 0);
      REQUIRE(a.size() == threads * (each + each / 16));
      for (const Slow& e : a.published())
        REQUIRE(e.whole());
    }
  }

  TEST_CASE("a stalled append holds the prefix back only until it returns, with no later append") {
    // Slot 0 is held by a construction in progress while 2 other threads append past it; when it
    // finishes, size() counts every element although nobody appends afterwards (a reader's size()
    // finds the ready blocks, whichever thread finished last).
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(10'000)};
    std::atomic<bool> release{false};
    a.push_back(encode(9, 1));                               // the owner
    std::thread([&] { a.push_back(encode(9, 2)); }).join();  // ends solo mode
    std::thread holder = hold_next_slot(a, 0, release);
    std::vector<std::thread> others;
    for (unsigned t = 1; t <= 2; ++t) {
      others.emplace_back([&a, t] {
        for (std::uint64_t s = 1; s <= 1000; ++s)
          a.push_back(encode(t, s));
      });
    }
    for (auto& o : others)
      o.join();
    CHECK(a.size() == 2);  // held back by slot 2
    release = true;
    holder.join();
    CHECK(a.size() == 2003);
    for (std::uint64_t v : a.published())
      REQUIRE(v != 0);
  }

  TEST_CASE("fork while two threads push_back: the child's append never waits for them") {
    check_fork_child("concurrent.fork_while_pushing");
  }

  TEST_CASE("fork while the solo owner appends: the child's append does not wait for it") {
    check_fork_child("concurrent.fork_during_solo");
  }

  TEST_CASE("fork while another thread ends solo mode: the child finishes the end itself") {
    check_fork_child("concurrent.fork_while_ending_solo");
  }

  TEST_CASE("fork while refused commits close the claims: the child's claims reopen") {
    check_fork_child("concurrent.fork_while_closed");
  }

  TEST_CASE("a Writer never loses elements silently: flush throws, take_buffered, dropped()") {
    // Explicitly: the flush that cannot append throws, the rest stays buffered and comes back.
    ConcurrentDynArray<int> a{reservoir::max_elements(10)};
    {
      auto w = a.writer();
      for (int i = 0; i < 15; ++i)
        w.push_back(i);  // the 11th flushes the first 10
      CHECK(a.size() == 10);
      CHECK(w.buffered() == 5);
      CHECK_THROWS_AS(w.flush(), std::length_error);
      CHECK(w.buffered() == 5);
      const std::vector<int> rest = w.take_buffered();
      CHECK(rest == std::vector<int>{10, 11, 12, 13, 14});
      CHECK(w.buffered() == 0);
    }
    CHECK(a.dropped() == 0);
    for (int i = 0; i < 10; ++i)
      CHECK(a[static_cast<std::size_t>(i)] == i);

    // Reported, then destroyed: the program knew (the flush threw); the loss is counted.
    ConcurrentDynArray<int> b{reservoir::max_elements(10)};
    {
      auto w = b.writer();
      for (int i = 0; i < 15; ++i)
        w.push_back(i);
      CHECK_THROWS_AS(w.flush(), std::length_error);
    }
    CHECK(b.size() == 10);
    CHECK(b.dropped() == 5);
    ConcurrentDynArray<int> moved(std::move(b));  // the count moves with the elements
    CHECK(moved.dropped() == 5);
    CHECK(b.dropped() == 0);

    // Never reported: the default writer stops the program in every build, naming the array,
    // the count and why; one made with WriterLoss::count counts the loss.
    const test::ProcessResult r = test::run_child("concurrent.writer_drops_unreported");
    MESSAGE(test::describe(r) << ": " << r.output);
    CHECK_MESSAGE(aborted(r), test::describe(r));  // SIGABRT; Windows' abort() exits with 3
    CHECK(r.output.find("reservoir::ConcurrentDynArray::~Writer: 5 buffered elements could not "
                        "be appended to the array at " +
                        array_address(r.output) +
                        ": full at max_size() 10. No flush() had "
                        "reported it") != std::string::npos);
    CHECK(r.output.find("writer(reservoir::WriterLoss::count)") != std::string::npos);
    CHECK(r.output.find("\ndropped ") == std::string::npos);
    const test::ProcessResult counted =
        test::run_child("concurrent.writer_drops_unreported_counted");
    MESSAGE(test::describe(counted) << ": " << counted.output);
    CHECK(counted.exited);
    CHECK(counted.exit_code == 0);
    CHECK(counted.output.find("dropped 5 size 10") != std::string::npos);
    CHECK(counted.output.find("~Writer") == std::string::npos);  // the library printed nothing
    // Told about one element, then another buffered: the second one is not covered by the first
    // report, so its loss is treated as never reported.
    const test::ProcessResult after =
        test::run_child("concurrent.writer_drops_one_unreported_after_told");
    MESSAGE(test::describe(after) << ": " << after.output);
    CHECK_MESSAGE(aborted(after), test::describe(after));
    CHECK(after.output.find("\ndropped ") == std::string::npos);  // not its own line
    CHECK(after.output.find("~Writer: 1 buffered element could not be appended to the array at " +
                            array_address(after.output) + ": full at max_size() 4.") !=
          std::string::npos);
    const test::ProcessResult after_counted =
        test::run_child("concurrent.writer_drops_one_unreported_after_told_counted");
    MESSAGE(test::describe(after_counted) << ": " << after_counted.output);
    CHECK(after_counted.exited);
    CHECK(after_counted.output.find("dropped 2 size 4") != std::string::npos);
    // A refused commit: the message carries the refusal.
    const test::ProcessResult refused = test::run_child("concurrent.writer_drops_refused");
    MESSAGE(test::describe(refused) << ": " << refused.output);
    CHECK_MESSAGE(aborted(refused), test::describe(refused));
    CHECK(refused.output.find("~Writer: 3 buffered elements could not be appended to the array "
                              "at " +
                              array_address(refused.output) + ": cannot commit ") !=
          std::string::npos);
  }

  TEST_CASE("operator[] past size() stops a debug build, as DynArray's does") {
#if defined(NDEBUG)
    MESSAGE("NDEBUG: assertions are off, as for DynArray's operator[]");
#else
    const test::ProcessResult r = test::run_child("concurrent.index_past_size");
    CHECK_MESSAGE(aborted(r), test::describe(r));
    std::string out = r.output;  // without the \r of Windows' text mode
    out.erase(std::remove(out.begin(), out.end(), '\r'), out.end());
    CHECK(out == "2\n");  // the valid read ran, the one past size() did not
#endif
  }

  // Every length error names the user's call; a default-constructed array says what it needs.
  TEST_CASE("ConcurrentDynArray: errors name the user's call") {
    auto message = [](auto&& f) {
      try {
        f();
      } catch (const std::length_error& e) {
        return std::string("length_error ") + e.what();
      } catch (const reservoir::OsAllocationError& e) {
        return std::string("OsAllocationError ") + e.what();
      } catch (const std::system_error& e) {
        return std::string("system_error ") + e.what();
      }
      return std::string("nothing thrown");
    };
    const std::string prefix = "length_error reservoir::ConcurrentDynArray::";
    const std::string none =
        ": full at max_size() 0: a default-constructed or moved-from ConcurrentDynArray has no "
        "reservation; construct it with reservoir::max_elements(n) (or move-assign such an array "
        "into it)";
    const std::vector<int> one{9};
    const std::deque<int> one_deque{9};
    ConcurrentDynArray<int> empty;
    CHECK(message([&] { empty.push_back(9); }) == prefix + "push_back/emplace_back" + none);
    CHECK(message([&] { empty.emplace_back(9); }) == prefix + "push_back/emplace_back" + none);
    CHECK(message([&] {
            empty.emplace_back_with([](std::size_t i) noexcept { return static_cast<int>(i); });
          }) == prefix + "emplace_back_with" + none);
    CHECK(message([&] { empty.append_range(one); }) == prefix + "append_range" + none);
    CHECK(message([&] { empty.append_range(one_deque); }) == prefix + "append_range" + none);
    CHECK(message([&] {
            auto w = empty.writer();
            w.push_back(9);
          }) == prefix + "Writer::push_back/emplace_back" + none);
    ConcurrentDynArray<std::string> strings;  // a constructor that may throw: built aside first
    CHECK(message([&] { strings.emplace_back("s"); }) == prefix + "push_back/emplace_back" + none);
    ConcurrentDynArray<int> real{reservoir::max_elements(4)};
    ConcurrentDynArray<int> moved_from{reservoir::max_elements(4)};
    real = std::move(moved_from);
    CHECK(message([&] { moved_from.push_back(9); }) == prefix + "push_back/emplace_back" + none);

    ConcurrentDynArray<int> a{reservoir::max_elements(4)};
    a.append_range(std::vector<int>{0, 1});
    {
      auto w = a.writer();
      for (int i = 2; i < 6; ++i)
        w.push_back(i);
      CHECK(message([&] { (void)w.flush(); }) ==
            prefix +
                "Writer::flush: full at max_size() 4: appended 2 of 4 buffered elements at index "
                "2, the rest stay buffered");
      CHECK(message([&] { (void)w.flush(); }) == prefix + "Writer::flush: full at max_size() 4");
      CHECK(message([&] {
              w.push_back(6);
              w.push_back(7);
              w.push_back(8);  // the buffer of 4 is full: this one flushes
            }) == prefix + "Writer::push_back/emplace_back: full at max_size() 4");
      (void)w.take_buffered();
    }
    const std::string full = ": full at max_size() 4";
    CHECK(message([&] { a.push_back(9); }) == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] { a.emplace_back(9); }) == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] {
            a.emplace_back_with([](std::size_t i) noexcept { return static_cast<int>(i); });
          }) == prefix + "emplace_back_with" + full);
    CHECK(message([&] { a.append_range(one); }) == prefix + "append_range" + full);
    CHECK(message([&] { a.append_range(one_deque); }) == prefix + "append_range" + full);
    // From another thread (which ends solo mode where there is one), then shared: the same words.
    std::string from_other;
    std::thread other([&] { from_other = message([&] { a.push_back(9); }); });
    other.join();
    CHECK(from_other == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] { a.push_back(9); }) == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] { a.append_range(one); }) == prefix + "append_range" + full);
    CHECK(a.size() == 4);

    // A refused commit: the arena's own words (what, how much, where, the OS's reason).
    reservoir::ArenaOptions o;
    o.reuse_reservation = false;  // nothing committed: the first append commits
    ConcurrentDynArray<int> b{reservoir::max_elements(1000), o};
    {
      test::FaultGuard fault(pal::Op::commit, 0, 100);
      CHECK(message([&] { b.push_back(1); }).starts_with("OsAllocationError cannot commit "));
      CHECK(message([&] { b.append_range(one); }).starts_with("OsAllocationError cannot commit "));
    }
    // A refused barrier names the call of the second thread.
    if (pal::process_barrier_supported()) {
      ConcurrentDynArray<int> c{reservoir::max_elements(100)};
      c.push_back(1);  // this thread owns solo mode
      test::FaultGuard refuse(pal::Op::barrier, 0, 100);
      std::string barrier;
      std::thread second([&] { barrier = message([&] { c.append_range(one); }); });
      second.join();
      CHECK(
          barrier.starts_with("system_error reservoir::ConcurrentDynArray::append_range: a "
                              "second appending thread needs a process-wide memory barrier"));
    }
  }

  // std::ranges' algorithms where the standard library has them (libc++ gained them in 15); the
  // same checks through the range's iterators elsewhere.
#if defined(__cpp_lib_ranges)
  namespace range_algo = std::ranges;
#else
  namespace range_algo {
  template <class R, class V>
  auto count(R&& r, const V& v) {
    return std::count(std::begin(r), std::end(r), v);
  }
  template <class I, class V>
  auto count(I first, I last, const V& v) {
    return std::count(first, last, v);
  }
  template <class R, class V>
  auto find(R&& r, const V& v) {
    return std::find(std::begin(r), std::end(r), v);
  }
  template <class A, class B>
  bool equal(A&& a, B&& b) {
    return std::equal(std::begin(a), std::end(a), std::begin(b), std::end(b));
  }
  }  // namespace range_algo
#endif

  TEST_CASE("the array is a range over its published prefix: range-for, std::ranges algorithms") {
    static_assert(std::ranges::random_access_range<ConcurrentDynArray<int>>);
    static_assert(std::ranges::contiguous_range<const ConcurrentDynArray<int>>);
    ConcurrentDynArray<int> empty;  // no reservation: an empty range
    CHECK(empty.begin() == empty.end());
    CHECK(range_algo::count(empty, 0) == 0);
    ConcurrentDynArray<int> moved_from{reservoir::max_elements(4)};
    ConcurrentDynArray<int> target(std::move(moved_from));
    CHECK(moved_from.begin() == moved_from.end());

    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1'000'000)};
    const std::vector<std::uint64_t> same{1, 2, 3, 2, 1};  // std::vector: the same answers
    for (std::uint64_t v : same)
      a.push_back(v);
    std::uint64_t sum = 0;
    for (std::uint64_t v : a)
      sum += v;
    CHECK(sum == 9);
    CHECK(range_algo::count(a, 2u) == range_algo::count(same, 2u));
    CHECK(range_algo::find(a, 3u) - a.begin() == range_algo::find(same, 3u) - same.begin());
    CHECK(range_algo::find(a, 7u) == a.end());
    CHECK(range_algo::equal(a, same));

    // While 2 threads append: each snapshot holds only published, whole values, in order per
    // thread, and a value found is one that was appended.
    ConcurrentDynArray<std::uint64_t> b{reservoir::max_elements(1'000'000)};
    std::atomic<bool> stop{false};
    std::vector<std::thread> appenders;
    for (std::uint64_t t = 1; t <= 2; ++t) {
      appenders.emplace_back([&b, &stop, t] {
        for (std::uint64_t s = 1; s <= stress_scale(200'000) && !stop.load(); ++s)
          b.push_back(encode(t, s));
      });
    }
    for (int scan = 0; scan < 50; ++scan) {
      const auto first = b.begin(), last = b.end();
      CHECK(range_algo::count(first, last, std::uint64_t{0}) == 0);  // no hole in the snapshot
      const auto it = range_algo::find(b, encode(1, 1));
      CHECK((it == b.end() || *it == encode(1, 1)));
    }
    stop = true;
    for (auto& t : appenders)
      t.join();
    CHECK(static_cast<std::size_t>(std::distance(b.begin(), b.end())) == b.size());
    require_no_hole_no_duplicate(b);
  }

  TEST_CASE("plain push_back from 2 to 16 threads: one fetch_add each, no failed claim, no retry") {
    for (unsigned threads : {2u, 4u, 8u, 16u}) {
      const std::uint64_t each = stress_scale(100'000);
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(threads * each)};
      std::atomic<std::uint64_t> failed{0}, single{0}, past{0}, refused{0};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          const reservoir::detail::ClaimCounts before = reservoir::detail::claim_counts();
          for (std::uint64_t s = 1; s <= each; ++s)
            a.push_back(encode(t, s));
          const reservoir::detail::ClaimCounts& after = reservoir::detail::claim_counts();
          failed += after.failed_cas - before.failed_cas;
          single += after.single - before.single;
          past += after.past_capacity - before.past_capacity;
          refused += after.refused - before.refused;
        });
      }
      for (auto& t : pool)
        t.join();
      MESSAGE(threads << " threads: " << threads * each << " appends, " << single.load()
                      << " off the fast path (" << past.load() << " past capacity), "
                      << failed.load() << " failed claims");
      CHECK(failed == 0);   // a fetch_add never fails: no retry, whatever the contention
      CHECK(refused == 0);  // and none was undone
      CHECK(single < threads * each / 8);  // the rest took the fast path: one RMW, no branch out
      CHECK(a.size() == threads * each);
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE(
      "pacing: a thread cut into pauses, the turn changes hands, a pause that buys no run stops") {
    namespace d = reservoir::detail;
    // Two threads append in an exact order (a step counter hands over), so every cut is known.
    ConcurrentDynArray<int> a{reservoir::max_elements(10'000)};
    // The main thread's append, so that the workers' appends are shared; its pacing record is
    // cleared first, as an earlier test's array may have had this address.
    d::t_pace = d::PaceState{};
    a.push_back(-1);
    std::atomic<int> step{0};
    struct Seen {
      std::uint64_t paced = 0, turns = 0, unpaid = 0, owed = 0;
    };
    std::vector<Seen> seen_a, seen_b;  // each thread's counts after each of its turns
    const auto counts = [] {
      const d::ClaimCounts& c = d::claim_counts();
      return Seen{c.paced, c.turns, c.unpaid, d::t_pace.owed};
    };
    const auto worker = [&](int parity, const std::vector<int>& appends, std::vector<Seen>& seen) {
      const Seen base = counts();
      for (std::size_t k = 0; k < appends.size(); ++k) {
        const int my_step = static_cast<int>(2 * k) + parity;
        while (step.load(std::memory_order_acquire) != my_step)
          std::this_thread::yield();
        for (int e = 0; e < appends[k]; ++e)
          a.push_back(my_step);
        const Seen now = counts();
        seen.push_back(
            {now.paced - base.paced, now.turns - base.turns, now.unpaid - base.unpaid, now.owed});
        step.store(my_step + 1, std::memory_order_release);
      }
    };
    // A: 1, 1, then kRunPaid + 36 kPacedTurn times, then 1 five times. B: 1 each turn.
    const unsigned runs = reservoir::detail::kPacedTurn;
    std::vector<int> appends_a{1, 1};
    for (unsigned k = 0; k < runs; ++k)
      appends_a.push_back(static_cast<int>(d::kRunPaid) + 36);
    for (int k = 0; k < 5; ++k)
      appends_a.push_back(1);
    const std::vector<int> appends_b(appends_a.size(), 1);
    std::thread ta([&] { worker(0, appends_a, seen_a); });
    std::thread tb([&] { worker(1, appends_b, seen_b); });
    ta.join();
    tb.join();
    REQUIRE(seen_a.size() == appends_a.size());
    REQUIRE(seen_b.size() == appends_b.size());
    // Turn 1: each thread's first claim is no cut. Turn 2: A is cut into, nobody holds the turn:
    // A takes it; B, cut into by A, pauses.
    CHECK(seen_a[0].turns == 0);
    CHECK(seen_a[1].turns == 1);
    CHECK(seen_b[1].paced == 1);
    CHECK(seen_b[1].owed == d::kFirstBackoff);  // paid before B's next claim
    CHECK(seen_b[2].owed == 2 * d::kFirstBackoff);
    // While A (the turn holder) claims runs, B pauses after each of its claims, and after
    // kPacedTurn pauses in a row takes the turn.
    for (unsigned k = 2; k < 2 + runs - 1; ++k) {
      CHECK(seen_a[k].paced == 0);
      CHECK(seen_b[k].paced == k);
      CHECK(seen_b[k].turns == 0);
    }
    CHECK(seen_b[runs + 1].turns == 1);
    CHECK(seen_b[runs + 1].paced == runs);
    // Now A is cut into by B's turn: A pauses once; its next claim finds that B claimed one slot
    // meanwhile (no run: the pause bought nothing), so A takes the turn and lets the following
    // cuts pass. B, cut into by A, pauses once, finds no run either, and does the same.
    const std::size_t last = appends_a.size() - 1;
    CHECK(seen_a[runs + 2].paced == 1);
    CHECK(seen_a[runs + 3].unpaid == 1);
    CHECK(seen_a[runs + 3].turns == 2);
    CHECK(seen_b[runs + 3].paced == runs + 1);
    CHECK(seen_b[runs + 4].unpaid == 1);
    CHECK(seen_b[runs + 4].turns == 2);
    CHECK(seen_a[last].paced == 1);  // no more pauses on either side
    CHECK(seen_a[last].unpaid == 1);
    CHECK(seen_b[last].paced == runs + 1);
    CHECK(seen_b[last].unpaid == 1);
    CHECK(a.size() == 1 + std::accumulate(appends_a.begin(), appends_a.end(), std::size_t{0}) +
                          appends_b.size());
  }

  TEST_CASE("16 threads push_back past max_size(): exactly full, every refusal a length_error") {
    const std::size_t limit = valgrind_scale(50'000) + 7;
    for (int round = 0; round < 3; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(limit)};
      std::atomic<std::uint64_t> kept{0}, full{0};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < 16; ++t) {
        pool.emplace_back([&, t] {
          for (std::uint64_t s = 1; s <= limit / 4; ++s) {
            try {
              a.push_back(encode(t, s));
              ++kept;
            } catch (const std::length_error&) {
              ++full;
            }
          }
        });
      }
      for (auto& t : pool)
        t.join();
      CHECK(kept == limit);
      CHECK(a.size() == limit);
      CHECK(full == 16 * (limit / 4) - limit);
      CHECK_THROWS_AS(a.push_back(1), std::length_error);  // still full, claims reopened
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE("refused commits while 4 threads push_back: nothing added for a refusal, no hole") {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // many commits
    const std::uint64_t each = test::under_valgrind() ? 5'000 : 20'000;
    ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(kWriters * each * 2), o);
    a.push_back(encode(9, 1));
    std::thread([&] { a.push_back(encode(9, 2)); }).join();  // shared mode from here
    std::atomic<std::uint64_t> added{2}, refused{0};
    {
      test::FaultGuard fault(pal::Op::commit, 10, 40);  // the 11th..50th commits fail
      std::vector<std::thread> pool;
      for (int t = 0; t < kWriters; ++t) {
        pool.emplace_back([&, t] {
          for (std::uint64_t s = 1; s <= each; ++s) {
            try {
              a.push_back(encode(static_cast<std::uint64_t>(t), s));
              ++added;
            } catch (const reservoir::OsAllocationError&) {
              ++refused;  // this value was not added
            }
          }
        });
      }
      for (auto& t : pool)
        t.join();
    }
    CHECK(refused > 0);
    CHECK(a.size() == added);
    require_no_hole_no_duplicate(a);
    const std::size_t next = a.push_back(encode(9, 3));  // the claims reopened after the refusals
    CHECK(next == added);
    CHECK(a.size() == added + 1);
  }
}
