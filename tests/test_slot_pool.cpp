// The slot pools' small classes: small arenas share chunks, recycle their slots with the first
// pages still committed (no OS call on the recycled path), keep guard pages between slots, stay
// within the resident limit, fall back to a mapping of their own when a chunk is refused, and give
// RAM and address space back on trim_pools(). Default arrays' slots: test_slot_pool_large.cpp; the
// chunks (open or closed, huge pages, limits, core dumps): test_slot_pool_chunks.cpp.
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
using test::os_calls;

// Page-granular slots: arrays of at most 2 KiB would otherwise take a sub-page slot (the sub_page
// suite's subject), and this suite checks the page-granular pools.
ArenaOptions paged() {
  ArenaOptions o;
  o.sub_page_slot = false;
  return o;
}

// One small array's life, as the many-arrays workloads live it.
int churn_once(int seed) {
  DynArray<int> a(reservoir::max_elements(128), paged());
  for (int i = 0; i < 100; ++i)
    a.push_back(seed + i);
  return a[99];
}

}  // namespace

// ---- guard pages between slots: each access runs in a child that must die of it ---------------

RESERVOIR_CHILD("pool.past_full_slot") {
  reservoir::trim_pools();
  Arena a(16 * 1024);  // exactly one 16 KiB slot
  Arena b(16 * 1024);  // its neighbour, committed too: only the guard page lies between
  a.grow(a.reserved());
  b.grow(b.reserved());
  test::expect_fault_here();
  static_cast<volatile std::byte*>(a.base())[a.reserved()] = std::byte{1};
  return 0;
}

RESERVOIR_CHILD("pool.below_slot") {
  reservoir::trim_pools();
  Arena a(16 * 1024);
  Arena b(16 * 1024);
  a.grow(a.reserved());
  b.grow(b.reserved());
  test::expect_fault_here();
  static_cast<volatile std::byte*>(b.base())[-1] = std::byte{1};
  return 0;
}

RESERVOIR_CHILD("pool.past_small_reservation") {
  reservoir::trim_pools();
  Arena a(pal::page_size());  // one page in a larger slot: the rest of the slot is never committed
  a.grow(a.reserved());
  test::expect_fault_here();
  static_cast<volatile std::byte*>(a.base())[a.reserved()] = std::byte{1};
  return 0;
}

TEST_SUITE("slot_pool") {
  TEST_CASE("small arenas are carved from shared chunks, large ones reserve their own mapping") {
    FreshPools fresh;
    const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
    // The smallest class that holds a page: 16 KiB, or 64 KiB where pages are 64 KiB.
    const std::size_t page = pal::page_size();
    const std::size_t slot = page <= 16 * 1024 ? 16 * 1024 : 64 * 1024;
    {
      std::vector<Arena> small;
      for (int i = 0; i < 64; ++i)
        small.emplace_back(4096);
      // 64 slots: one chunk holds them all or nearly (the first spans about 2 MiB, at least 4).
      CHECK(pal::testing::calls(pal::Op::reserve) - reserves <= (page <= 16 * 1024 ? 2 : 3));
      std::set<std::byte*> bases;
      for (const Arena& a : small) {
        CHECK(a.reserved() >= 4096);
        CHECK(a.reserved() <= slot);
        bases.insert(a.base());
      }
      CHECK(bases.size() == small.size());
      // Neighbours are one slot and one guard page apart.
      std::size_t min_gap = SIZE_MAX;
      for (auto it = bases.begin(), next = std::next(it); next != bases.end(); ++it, ++next)
        min_gap = std::min<std::size_t>(min_gap, static_cast<std::size_t>(*next - *it));
      CHECK(min_gap == slot + page);
    }
    const std::uint64_t before_big = pal::testing::calls(pal::Op::reserve);
    reservoir::clear_reservation_cache();
    Arena big(reservoir::kLargestPoolSlot + 1);
    CHECK(pal::testing::calls(pal::Op::reserve) == before_big + 1);
  }

  TEST_CASE("a recycled small array costs no OS call: create, fill and destroy") {
    FreshPools fresh;
    CHECK(churn_once(0) == 99);  // warm: the slot is carved and its first page committed
    const std::uint64_t before = os_calls();
    long long sum = 0;
    for (int i = 0; i < 1000; ++i)
      sum += churn_once(i);
    CHECK(os_calls() == before);
    CHECK(sum == 1000LL * 99 + 999LL * 1000 / 2);
    // Many alive at once, then all destroyed, then built again: the second round is free too.
    std::vector<DynArray<int>> live;
    for (int round = 0; round < 2; ++round) {
      const std::uint64_t at_start = os_calls();
      for (int i = 0; i < 1000; ++i) {
        DynArray<int>& a = live.emplace_back(reservoir::max_elements(128), paged());
        for (int j = 0; j < 100; ++j)
          a.push_back(i ^ j);
      }
      for (int i = 0; i < 1000; ++i)
        REQUIRE(live[static_cast<std::size_t>(i)][7] == (i ^ 7));
      live.clear();
      if (round == 1) CHECK(os_calls() == at_start);
    }
  }

  TEST_CASE("a recycled slot keeps its pages (like malloc); reuse_reservation = false is fresh") {
    FreshPools fresh;
    std::byte* first = nullptr;
    {
      Arena a(8192);
      auto* p = static_cast<unsigned char*>(a.grow(100));
      std::memset(p, 0xAB, 100);
      first = a.base();
    }
    CHECK(reservoir::pool_resident_bytes() >= 4096);
    {
      Arena b(8192);  // the most recently freed slot of the class, its first page committed
      CHECK(b.base() == first);
      CHECK(b.committed() >= 4096);
      CHECK(b.size() == 0);
    }
    ArenaOptions fresh_pages;
    fresh_pages.reuse_reservation = false;
    Arena c(8192, fresh_pages);
    CHECK(c.base() != first);
    const auto* q = static_cast<const unsigned char*>(c.grow(100));
    for (int i = 0; i < 100; ++i)
      REQUIRE(q[i] == 0);
  }

  TEST_CASE("parked slots keep at most the resident limit committed") {
    FreshPools fresh;
    reservoir::set_pool_resident_limit(0);
    {
      Arena a(8192);
      a.grow(5000);
    }
    CHECK(reservoir::pool_resident_bytes() == 0);
    {
      Arena b(8192);  // the slot is reused, decommitted: nothing readable yet
      CHECK(b.committed() == 0);
      b.grow(10);
    }
    const std::size_t limit = 8 * pal::page_size();
    reservoir::set_pool_resident_limit(limit);
    {
      std::vector<Arena> many;
      for (int i = 0; i < 50; ++i) {
        many.emplace_back(3 * pal::page_size());
        many.back().grow(3 * pal::page_size());
      }
    }
    CHECK(reservoir::pool_resident_bytes() > 0);
    CHECK(reservoir::pool_resident_bytes() <= limit);
    // A slot that grew past kPoolKeepPerSlot keeps only that much.
    reservoir::set_pool_resident_limit(reservoir::kDefaultPoolResidentLimit);
    reservoir::trim_pools();
    {
      Arena big(reservoir::kLargestPoolSlot);
      big.grow(big.reserved());
    }
    CHECK(reservoir::pool_resident_bytes() ==
          reservoir::kPoolKeepPerSlot / pal::page_size() * pal::page_size());
  }

  TEST_CASE("trim_pools gives the parked pages and the empty chunks back to the OS") {
    FreshPools fresh;
    // 2000 x 16 KiB = 31 MiB, under the default resident limit. Valgrind, which cannot measure
    // the RSS drop, checks the same paths with fewer arrays.
    const int arrays = test::under_valgrind() ? 400 : 2000;
    // Populated steps, so that every parked byte is resident (left to faults, a step's pages
    // past the data, as with 64 KiB pages, are committed but never backed).
    reservoir::ArenaOptions populated;
    populated.prefault = true;
    {
      std::vector<DynArray<int>> live;
      live.reserve(arrays);
      for (int i = 0; i < arrays; ++i) {
        DynArray<int>& a = live.emplace_back(reservoir::max_elements(4096), populated);
        for (int j = 0; j < 4096; ++j)
          a.push_back(j);
      }
    }
    const std::size_t parked = reservoir::pool_resident_bytes();
    CHECK(parked >= static_cast<std::size_t>(arrays) * 16 * 1024);
    const std::size_t rss_before = pal::current_rss();
    const std::uint64_t releases = pal::testing::calls(pal::Op::release);
    const std::uint64_t decommits = pal::testing::calls(pal::Op::decommit);
    CHECK(reservoir::trim_pools() == parked);
    CHECK(reservoir::pool_resident_bytes() == 0);
    CHECK(pal::testing::calls(pal::Op::release) > releases);  // the chunks went back
    // No slot was in use, so the parked pages went with their chunks: none was decommitted first.
    CHECK(pal::testing::calls(pal::Op::decommit) == decommits);
    if (const char* why = test::rss_unmeasurable()) {
      MESSAGE(why);
    } else {
      const std::size_t rss_after = pal::current_rss();
      CAPTURE(rss_before);
      CAPTURE(rss_after);
      // The parked pages leave the resident set (allow a quarter for the rest of the process).
      CHECK(rss_before >= rss_after + parked * 3 / 4);
    }
    // The pools work as before after a trim.
    CHECK(churn_once(5) == 104);
  }

  TEST_CASE("a refused chunk first releases the parked reservations, as an own mapping does") {
    FreshPools fresh;  // no free slot and no chunk: the next small arena reserves one
    reservoir::clear_reservation_cache();
    {
      DynArray<int> big(reservoir::max_elements(std::size_t{1} << 20));  // 4 MiB: not pooled
      big.push_back(1);
    }
    REQUIRE(reservoir::reservation_cache_size() == 1);  // parked
    std::byte* base = nullptr;
    {
      // Armed by hand: a FaultGuard for reserve would empty the cache first.
      pal::testing::fail(pal::Op::reserve, 0, 1, pal::testing::out_of_memory_error());
      Arena a(64 * 1024);  // the chunk is refused once; the parked reservation goes; then it is had
      pal::testing::clear();
      base = a.base();
      CHECK(a.reserved() == 64 * 1024);
      CHECK(reservoir::reservation_cache_size() == 0);
    }
    Arena b(64 * 1024);  // a pool slot: the one just given back
    CHECK(b.base() == base);
  }

  TEST_CASE("threads create and destroy small arrays at once; every array keeps its elements") {
    FreshPools fresh;
    constexpr int kThreads = 4;
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, &bad] {
        std::vector<DynArray<int>> mine;
        for (int round = 0; round < 200; ++round) {
          mine.emplace_back(reservoir::max_elements(64 + round % 3 * 4000), paged());
          for (int j = 0; j < 60; ++j)
            mine.back().push_back(t * 100000 + round * 100 + j);
          if (round % 3 == 0) {
            mine.erase(mine.begin());
            if (t == 0) reservoir::trim_pools();
          }
          for (const DynArray<int>& a : mine) {
            const int base = a[0] - a[0] % 100;
            for (int j = 0; j < 60; ++j)
              if (a[static_cast<std::size_t>(j)] != base + j) bad.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& th : threads)
      th.join();
    CHECK(bad.load() == 0);
  }

  // Each thread keeps the last slot of each class it gave back for its own next array: another
  // thread does not get it (the pool's LIFO would hand it over), it comes back to its pool when
  // its thread has ended, and trim_pools() takes it from a thread that is still running.
  template <class Make>
  void check_thread_caches(Make make) {
    FreshPools fresh;
    const void* mine = nullptr;
    {
      auto a = make();
      mine = a.data();
    }
    const void* other = nullptr;
    std::thread([&] {
      auto b = make();
      other = b.data();
    }).join();
    CHECK(other != mine);  // still this thread's
    {
      auto a = make();
      CHECK(a.data() == mine);  // taken again
    }
    // The other thread has ended: its slot is in the pool again, and is the warmest there.
    {
      auto a = make();  // this thread's own cached slot
      auto b = make();  // from the pool: the ended thread's
      CHECK(a.data() == mine);
      CHECK(b.data() == other);
    }
    // A running thread's cached slot: counted while parked, and trim_pools() takes it.
    std::atomic<int> stage{0};
    std::thread t([&] {
      {
        auto c = make();
      }
      stage = 1;
      while (stage.load() != 2)
        std::this_thread::yield();
      auto d = make();  // its cache was emptied: the pool's
      d.push_back(7);
      CHECK(d.back() == 7);
    });
    while (stage.load() != 1)
      std::this_thread::yield();
    CHECK(reservoir::pool_resident_bytes() > 0);
    reservoir::trim_pools();
    CHECK(reservoir::pool_resident_bytes() == 0);
    stage = 2;
    t.join();
  }

  TEST_CASE("a thread's last slot of a class is its own next array's: not another thread's") {
    SUBCASE("page-granular slots") {
      check_thread_caches([] {
        DynArray<int> a(reservoir::max_elements(1000), paged());
        a.push_back(1);
        return a;
      });
    }
    SUBCASE("sub-page slots") {
      check_thread_caches([] {
        DynArray<int> a(reservoir::max_elements(128));
        a.push_back(1);
        return a;
      });
    }
    SUBCASE("large slots (a default array's tier, 64 MiB, asked for: whatever the budget)") {
      if (test::under_valgrind()) return;  // valgrind refuses the large chunks
      check_thread_caches([] {
        DynArray<int> a(reservoir::max_elements(std::size_t{16} << 20));
        a.push_back(1);
        return a;
      });
    }
  }

// Not under the sanitizers: they tear a thread down in its key destructors' rounds too (TSan
// reports a CHECK failure when a destructor of a later round runs instrumented code).
#if !defined(_WIN32) && !defined(RESERVOIR_TEST_TSAN) && !defined(RESERVOIR_TEST_ASAN)
  // Arrays made by a thread's own key destructors, after its slot was retired (rounds 1-3 of
  // glibc's 4; the sanitizers tear a thread down in the 4th): every pool slot they used must be
  // back in the pool at the next take, the one cached in a slot made during the exit (round 2,
  // after the marker was cleared; retired in round 3) included: none stranded in a cache.
  pthread_key_t g_exit_key;
  int g_exit_rounds = 0;
  const void* g_exit_last = nullptr;
  std::set<const void*> g_exit_slots;
  void exit_key_destructor(void*) {
    {
      DynArray<int> a(reservoir::max_elements(1000), paged());
      a.push_back(1);
      g_exit_last = a.data();
      g_exit_slots.insert(a.data());
    }
    if (++g_exit_rounds < 3) pthread_setspecific(g_exit_key, &g_exit_rounds);
  }

  TEST_CASE("arrays made while a thread ends, after its slot was retired, go straight back") {
    FreshPools fresh;
    REQUIRE(pthread_key_create(&g_exit_key, &exit_key_destructor) == 0);  // after the library's
    std::thread([] {
      {
        DynArray<int> a(reservoir::max_elements(1000), paged());
      }  // the thread has a slot
      pthread_setspecific(g_exit_key, &g_exit_rounds);
    }).join();
    CHECK(g_exit_rounds == 3);
    CHECK(g_exit_slots.count(g_exit_last) == 1);
    // As many arrays as the exit used slots, all alive: they take exactly those slots (the pool
    // hands out its free slots before it carves a new one).
    std::vector<DynArray<int>> again;
    std::set<const void*> taken;
    for (std::size_t i = 0; i < g_exit_slots.size(); ++i) {
      again.emplace_back(reservoir::max_elements(1000), paged()).push_back(1);
      taken.insert(again.back().data());
    }
    CHECK(taken == g_exit_slots);
    pthread_key_delete(g_exit_key);
  }
#endif

  TEST_CASE("guard pages fault between slots, before a slot and past a small reservation") {
    for (const char* name :
         {"pool.past_full_slot", "pool.below_slot", "pool.past_small_reservation"}) {
      CAPTURE(name);
      test::ProcessResult r = test::run_child(name);
      CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
    }
  }
}
