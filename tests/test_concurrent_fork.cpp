// ConcurrentDynArray across fork(): a child never waits for a thread of its parent (children run
// by test::run_child, each forking while threads append).
#include "concurrent_support.hpp"

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
// (one-index claims past capacity undone) and reopening; the main thread forks, and each child
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

TEST_SUITE("concurrent") {
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
}
