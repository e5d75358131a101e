// The slot pools' large classes: default arrays take slots of their address-space tier from
// shared chunks, recycle them with no OS call, keep guard pages around each slot, give their
// pages and empty chunks back on trim_pools(), and stay intact across threads and fork().
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "pool_support.hpp"
#include "support.hpp"

#if !defined(_WIN32)
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

using reservoir::Arena;
using reservoir::ArenaOptions;
using reservoir::DynArray;
namespace pal = reservoir::pal;

namespace {

using test::FreshPools;
using test::full_default_here;
using test::os_calls;

constexpr std::size_t kHugeAlign = std::size_t{2} << 20;

// One default array's life, as the many-arrays workloads live it.
int default_churn_once(int seed) {
  DynArray<int> a;
  for (int i = 0; i < 100; ++i)
    a.push_back(seed + i);
  return a[99];
}

// Under Wine, which keeps a byte per reserved page, hundreds of 64 GiB slots would cost GiBs of
// its memory, and ThreadSanitizer's fixed memory layout has no room for tens of TiB: there the
// tests with many default arrays live run under a budget of 256 GiB (default arrays then take
// the 1 GiB and 64 MiB tiers), natively under the automatic one.
struct SmallBudget {
  std::size_t saved = reservoir::address_space_budget();
  bool set = kThreadSanitizer || test::under_wine();
  SmallBudget() {
    if (set) reservoir::set_address_space_budget(std::size_t{256} << 30);
  }
  ~SmallBudget() {
    if (set) reservoir::set_address_space_budget(saved);
  }
  SmallBudget(const SmallBudget&) = delete;
  SmallBudget& operator=(const SmallBudget&) = delete;
};

}  // namespace

// The large-slot children run with the pools' chunks closed (names ending in ".closed", as the
// OS makes them) or open (the opt-in, set_open_pool_chunks(true): open where the OS makes them,
// Linux).
void large_slot_child_start(bool closed) {
  pal::testing::refuse_open_reservations(closed);
  reservoir::set_open_pool_chunks(!closed);
  reservoir::trim_pools();
}

int past_large_slot(bool closed) {
  large_slot_child_start(closed);
  DynArray<int> a;  // a 64 GiB slot; its neighbour above is carved next, committed too
  DynArray<int> b;
  a.push_back(1);
  b.push_back(2);
  test::expect_fault_here();
  // Just past a's reservation: the never-committed gap between slots (read-write in an open
  // chunk, where this returns).
  static_cast<volatile std::byte*>(a.arena().base())[a.arena().reserved()] = std::byte{1};
  return 0;
}

int below_large_slot(bool closed) {
  large_slot_child_start(closed);
  DynArray<int> a;
  DynArray<int> b;
  a.push_back(1);
  b.push_back(2);
  test::expect_fault_here();
  static_cast<volatile std::byte*>(b.arena().base())[-1] = std::byte{1};
  return 0;
}

// Past the committed prefix of a slot: faults in a closed chunk; in an open one reads zero and
// takes a write (returns 0), the next commit keeping what was written there, as any untouched
// memory would.
int past_large_commit(bool closed) {
  large_slot_child_start(closed);
  DynArray<int> a;
  a.push_back(1);
  auto* past = static_cast<volatile std::byte*>(a.arena().base()) + a.arena().committed();
  test::expect_fault_here();
  if (*past != std::byte{0}) return 3;
  *past = std::byte{1};
  return 0;
}

RESERVOIR_CHILD("pool.past_large_slot") {
  return past_large_slot(false);
}
RESERVOIR_CHILD("pool.past_large_slot.closed") {
  return past_large_slot(true);
}
RESERVOIR_CHILD("pool.below_large_slot") {
  return below_large_slot(false);
}
RESERVOIR_CHILD("pool.below_large_slot.closed") {
  return below_large_slot(true);
}
RESERVOIR_CHILD("pool.past_large_commit") {
  return past_large_commit(false);
}
RESERVOIR_CHILD("pool.past_large_commit.closed") {
  return past_large_commit(true);
}
// As a program that changes no setting finds them: closed chunks, so past the commit faults.
RESERVOIR_CHILD("pool.past_large_commit.default") {
  reservoir::trim_pools();
  DynArray<int> a;
  a.push_back(1);
  auto* past = static_cast<volatile std::byte*>(a.arena().base()) + a.arena().committed();
  test::expect_fault_here();
  *past = std::byte{1};
  return 0;
}

// The page past the last slot of an open chunk faults: the chunk's last page is its guard, and
// the gap between the slot's reservation and it reads. ".mprotect": guards made as on kernels
// before 6.13.
int past_open_chunk(bool by_mprotect) {
  large_slot_child_start(false);
  pal::testing::refuse_guard_install(by_mprotect);
  DynArray<int> a;  // the first chunk holds two slots: a and b, b the last
  DynArray<int> b;
  a.push_back(1);
  b.push_back(2);
  auto* end = static_cast<volatile std::byte*>(b.arena().base()) + b.arena().reserved();
  // The chunk ends within the 2 MiB past b's reservation; everything before its last page reads.
  std::size_t off = 0;
  test::expect_fault_here();
  for (; off < kHugeAlign + pal::page_size(); off += pal::page_size())
    (void)end[off];
  return 0;
}
RESERVOIR_CHILD("pool.past_open_chunk") {
  return past_open_chunk(false);
}
RESERVOIR_CHILD("pool.past_open_chunk.mprotect") {
  return past_open_chunk(true);
}
RESERVOIR_CHILD("pool.below_large_slot.mprotect") {
  pal::testing::refuse_guard_install(true);
  return below_large_slot(false);
}

TEST_SUITE("slot_pool") {
  TEST_CASE("default arrays take slots of their tier on 2 MiB boundaries from shared chunks") {
    FreshPools fresh;
    if (!full_default_here()) return;
    // Open chunks (where the OS makes them) start each slot a page past the boundary, the page
    // below it its guard; closed ones on it.
    for (bool closed : {false, true}) {
      if (closed && !test::open_reservations_here()) break;
      CAPTURE(closed);
      pal::testing::refuse_open_reservations(closed);
      struct Reopen {
        ~Reopen() { pal::testing::refuse_open_reservations(false); }
      } reopen;
      const test::PoolChunks chunks(!closed);  // open: the opt-in
      const std::size_t past_boundary =
          closed || !test::open_reservations_here() ? 0 : pal::page_size();
      reservoir::trim_pools();
      const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
      const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
      const std::uint64_t guards = pal::testing::calls(pal::Op::guard);
      std::vector<DynArray<int>> live(5);
      for (DynArray<int>& a : live)
        a.push_back(1);
      // Chunks of 2, then 4 slots (3 elsewhere than Linux): two reservations for five arrays. A
      // closed chunk's slot is opened by its first commit; an open one's costs a guard as it is
      // carved (and each open chunk one for its last page), no commit.
      CHECK(pal::testing::calls(pal::Op::reserve) - reserves == 2);
      CHECK(pal::testing::calls(pal::Op::commit) - commits == (past_boundary ? 0 : 5));
      CHECK(pal::testing::calls(pal::Op::guard) - guards == (past_boundary ? 7 : 0));
      std::set<std::byte*> bases;
      for (const DynArray<int>& a : live) {
        CHECK(a.max_size() == DynArray<int>::default_max_size());  // as granted without the pools
        CHECK(reinterpret_cast<std::uintptr_t>(a.arena().base()) % kHugeAlign == past_boundary);
        CHECK(a.arena().reserved() == reservoir::kDefaultReserveBytes);
        bases.insert(a.arena().base());
      }
      CHECK(bases.size() == live.size());
      // Slots of one chunk are one slot and one 2 MiB gap apart (three such pairs in the two
      // chunks); any two slots at least one slot and a guard page.
      std::size_t min_gap = SIZE_MAX;
      int in_chunk = 0;
      for (auto it = bases.begin(), next = std::next(it); next != bases.end(); ++it, ++next) {
        const auto gap = static_cast<std::size_t>(*next - *it);
        min_gap = std::min(min_gap, gap);
        if (gap == reservoir::kDefaultReserveBytes + kHugeAlign) ++in_chunk;
      }
      CHECK(min_gap >= reservoir::kDefaultReserveBytes + pal::page_size());
      CHECK(in_chunk >= 3);
      // Huge pages past kHugePageThreshold, as for an array of its own: growth past the
      // threshold works the same (and the contents stay where they are).
      DynArray<int>& big = live.front();
      const int* first = big.data();
      big.resize((std::size_t{16} << 20) / sizeof(int), 3);
      CHECK(big.data() == first);
      CHECK(big[big.size() - 1] == 3);
    }
  }

  TEST_CASE("a recycled default array costs no OS call: create, fill and destroy") {
    FreshPools fresh;
    if (!full_default_here()) return;
    CHECK(default_churn_once(0) == 99);  // warm: the slot is carved and its first page committed
    const std::uint64_t before = os_calls();
    long long sum = 0;
    for (int i = 0; i < 1000; ++i)
      sum += default_churn_once(i);
    CHECK(os_calls() == before);
    CHECK(sum == 1000LL * 99 + 999LL * 1000 / 2);
    SmallBudget small_budget;
    // 1,000 alive at once (past a quarter of the budget they get the 1 GiB tier), then all
    // destroyed, then built again: the second round costs no call either, and every array gets
    // the tier it got the first time.
    std::vector<DynArray<int>> live;
    std::vector<std::size_t> tiers[2];
    for (int round = 0; round < 2; ++round) {
      const std::uint64_t at_start = os_calls();
      for (int i = 0; i < 1000; ++i) {
        DynArray<int>& a = live.emplace_back();
        for (int j = 0; j < 100; ++j)
          a.push_back(i ^ j);
        tiers[round].push_back(a.max_size());
      }
      for (int i = 0; i < 1000; ++i)
        REQUIRE(live[static_cast<std::size_t>(i)][7] == (i ^ 7));
      live.clear();
      if (round == 1) CHECK(os_calls() == at_start);
    }
    CHECK(tiers[0] == tiers[1]);
#if defined(RESERVOIR_TEST_ASAN)
    // A parked slot is poisoned; the next array finds its elements' memory usable.
    std::byte* parked = nullptr;
    {
      DynArray<int> a;
      a.push_back(1);
      parked = a.arena().base();
    }
    CHECK(__asan_address_is_poisoned(parked));
    DynArray<int> b;
    b.push_back(2);
    CHECK(b.arena().base() == parked);
    CHECK(b[0] == 2);
#endif
  }

  TEST_CASE("the budget's tiers switch where they did with a mapping per default array") {
    FreshPools fresh;
    if (!full_default_here()) return;
    reservoir::clear_reservation_cache();
    struct BudgetGuard {
      std::size_t saved = reservoir::address_space_budget();
      // A quarter of it holds three 64 GiB arrays; the rest some 600 of 1 GiB.
      BudgetGuard() { reservoir::set_address_space_budget(std::size_t{800} << 30); }
      ~BudgetGuard() { reservoir::set_address_space_budget(saved); }
    } budget;
    // What the tiers were with a mapping of its own per array: Arenas laid out as a
    // DynArray<int>'s default reservation, reuse_reservation = false (never a pool slot).
    ArenaOptions own;
    own.reuse_reservation = false;
    std::vector<std::size_t> expected;
    {
      std::vector<Arena> arenas;
      while (expected.size() < 700) {
        const std::size_t bytes =
            reservoir::default_reservation_size(reservoir::kDefaultReserveBytes);
        REQUIRE(bytes != 0);
        arenas.emplace_back(bytes, own);
        expected.push_back(bytes / sizeof(int));
      }
    }
    std::vector<std::size_t> got;
    {
      std::vector<DynArray<int>> arrays(expected.size());
      for (DynArray<int>& a : arrays) {
        a.push_back(1);
        got.push_back(a.max_size());
      }
    }
    CHECK(got == expected);
    const auto count = [&](const std::vector<std::size_t>& v, std::size_t bytes) {
      return std::count(v.begin(), v.end(), bytes / sizeof(int));
    };
    CAPTURE(count(got, reservoir::kDefaultReserveBytes));
    CAPTURE(count(got, std::size_t{1} << 30));
    CHECK(count(got, reservoir::kDefaultReserveBytes) == 3);
    CHECK(count(got, std::size_t{1} << 30) > 500);
    CHECK(count(got, std::size_t{64} << 20) > 0);  // the third tier was reached too
    // Parked and never-carved slots do not count as live: the next default array gets 64 GiB.
    DynArray<int> next;
    next.push_back(1);
    CHECK(next.max_size() == DynArray<int>::default_max_size());
  }

  TEST_CASE("a default array made after a thread's ended is not given a smaller tier for it") {
    FreshPools fresh;
    if (!full_default_here()) return;
    reservoir::clear_reservation_cache();
    struct BudgetGuard {
      std::size_t saved = reservoir::address_space_budget();
      // A quarter of it (96 GiB) holds one 64 GiB array, not two.
      BudgetGuard() { reservoir::set_address_space_budget(std::size_t{384} << 30); }
      ~BudgetGuard() { reservoir::set_address_space_budget(saved); }
    } budget;
    // The thread's array goes back to its cache when destroyed, and the cache is retired with
    // the thread: nothing is alive, so the next default array must get the full reservation.
    std::thread([] {
      DynArray<char> a;
      a.push_back('t');
      CHECK(a.max_size() == DynArray<char>::default_max_size());
    }).join();
    DynArray<char> b;
    b.push_back('m');
    CHECK(b.max_size() == DynArray<char>::default_max_size());
  }

  TEST_CASE("a refused chunk: the default array reserves its own mapping, nothing is lost") {
    FreshPools fresh;
    if (!full_default_here()) return;
    reservoir::trim_pools();
    reservoir::clear_reservation_cache();
    std::vector<DynArray<int>> live(2);  // the first chunk's two slots
    for (std::size_t i = 0; i < live.size(); ++i)
      live[i].assign(100, static_cast<int>(i));
    const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
    {
      // The next chunk (4 slots, 3 elsewhere than Linux) and the smallest one (2) are refused.
      struct Disarm {
        ~Disarm() { pal::testing::clear(); }
      } disarm;
      pal::testing::fail(pal::Op::reserve, 0, 2, pal::testing::out_of_memory_error());
      DynArray<int>& a = live.emplace_back();
      a.assign(100, 2);
    }
    CHECK(pal::testing::calls(pal::Op::reserve) - reserves == 3);  // two chunks, then its own
    CHECK(live.back().max_size() == DynArray<int>::default_max_size());
    for (std::size_t i = 0; i < live.size(); ++i) {
      REQUIRE(live[i].size() == 100);
      CHECK(live[i][99] == static_cast<int>(i));
    }
    // The pools work again once the OS does.
    DynArray<int>& b = live.emplace_back();
    b.push_back(3);
    CHECK(pal::testing::calls(pal::Op::reserve) - reserves == 4);
    CHECK(b.max_size() == DynArray<int>::default_max_size());
  }

  TEST_CASE("guard pages fault before and after a large slot") {
    if (!full_default_here()) return;
    // Closed chunks (the default): below the base, past the reservation and past the commit all
    // fault.
    const bool open = test::open_reservations_here();
    for (const char* name : {"pool.below_large_slot.closed", "pool.past_large_slot.closed",
                             "pool.past_large_commit.closed", "pool.past_large_commit.default",
                             "pool.below_large_slot"}) {
      CAPTURE(name);
      test::ProcessResult r = test::run_child(name);
      CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
    }
    // Open chunks (the opt-in): the page below each slot and the chunk's last page fault; past the
    // commit and in the gap after the reservation the slot reads zeros and takes writes
    // (documented).
    for (const char* name : {"pool.past_large_slot", "pool.past_large_commit"}) {
      CAPTURE(name);
      test::ProcessResult r = test::run_child(name);
      if (open) {
        CHECK_MESSAGE((r.exited && r.exit_code == 0), test::describe(r));
      } else {
        CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
      }
    }
    if (open) {
      for (const char* name : {"pool.past_open_chunk", "pool.past_open_chunk.mprotect",
                               "pool.below_large_slot.mprotect"}) {
        CAPTURE(name);
        test::ProcessResult r = test::run_child(name);
        CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
      }
    }
  }

  TEST_CASE("trim_pools gives back the parked large slots' pages and their empty chunks") {
    FreshPools fresh;
    if (!full_default_here()) return;
    SmallBudget small_budget;
    reservoir::trim_pools();
    const std::size_t reserved_empty = reservoir::reserved_address_space();
    constexpr int kArrays = 400;  // 400 x 64 KiB kept = 25 MiB, under the default resident limit
    {
      std::vector<DynArray<int>> live(kArrays);
      for (DynArray<int>& a : live)
        for (int j = 0; j < 64 * 1024 / 4; ++j)
          a.push_back(j);
    }
    const std::size_t parked = reservoir::pool_resident_bytes();
    CHECK(parked >= std::size_t{kArrays} * 64 * 1024);
    CHECK(reservoir::reserved_address_space() > reserved_empty);  // the chunks stay for reuse
    const std::size_t rss_before = pal::current_rss();
    const std::uint64_t releases = pal::testing::calls(pal::Op::release);
    CHECK(reservoir::trim_pools() >= parked);
    CHECK(reservoir::pool_resident_bytes() == 0);
    CHECK(pal::testing::calls(pal::Op::release) > releases);
    CHECK(reservoir::reserved_address_space() == reserved_empty);  // every chunk went back
    if (const char* why = test::rss_unmeasurable()) {
      MESSAGE(why);
    } else {
      const std::size_t rss_after = pal::current_rss();
      CAPTURE(rss_before);
      CAPTURE(rss_after);
      CHECK(rss_before - rss_after >= parked * 3 / 4);
    }
    CHECK(default_churn_once(5) == 104);
  }

  TEST_CASE("threads churn default arrays while another trims; every array keeps its elements") {
    FreshPools fresh;
    if (!full_default_here()) return;
    SmallBudget small_budget;
    constexpr int kThreads = 4;
    std::atomic<int> bad{0};
    std::atomic<bool> done{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, &bad] {
        std::vector<DynArray<int>> mine;
        for (int round = 0; round < 150; ++round) {
          DynArray<int>& a = mine.emplace_back();
          const int n = round % 5 == 0 ? 30'000 : 60;  // some keep more than a slot's share
          for (int j = 0; j < n; ++j)
            a.push_back(t * 1'000'000 + round * 100 + j % 100);
          if (round % 3 == 0) mine.erase(mine.begin());
          for (const DynArray<int>& b : mine) {
            const int base = b[0];
            for (std::size_t j = 0; j < b.size(); j += 97)
              if (b[j] != base + static_cast<int>(j % 100)) bad.fetch_add(1);
          }
        }
      });
    }
    std::thread trimmer([&done] {
      while (!done.load()) {
        reservoir::trim_pools();
        reservoir::set_pool_resident_limit(
            reservoir::pool_resident_limit() == 0 ? reservoir::kDefaultPoolResidentLimit : 0);
        std::this_thread::yield();
      }
    });
    for (std::thread& th : threads)
      th.join();
    done.store(true);
    trimmer.join();
    CHECK(bad.load() == 0);
  }

#if !defined(_WIN32) && !defined(RESERVOIR_TEST_TSAN)
  TEST_CASE("a forked child creates and destroys default arrays; the parent's are intact in it") {
    FreshPools fresh;
    if (!full_default_here()) return;
    std::vector<DynArray<int>> live(100);
    for (std::size_t i = 0; i < live.size(); ++i)
      live[i].assign(100, static_cast<int>(i));
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      for (std::size_t i = 0; i < live.size(); ++i)
        if (live[i].size() != 100 || live[i][99] != static_cast<int>(i)) status = 3;
      for (int round = 0; round < 3; ++round) {
        std::vector<DynArray<int>> mine(300);
        for (std::size_t i = 0; i < mine.size(); ++i)
          mine[i].assign(100, -static_cast<int>(i));
        for (std::size_t i = 0; i < mine.size(); ++i)
          if (mine[i][50] != -static_cast<int>(i)) status = 4;
        live.erase(live.begin(), live.begin() + 20);
        reservoir::trim_pools();
      }
      ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    for (std::size_t i = 0; i < live.size(); ++i)
      REQUIRE(live[i][99] == static_cast<int>(i));
  }
#endif
}
