// Sub-page slots: arenas of at most kLargestSubPageSlot bytes share committed runs, take and give
// back a slot with no OS call, never move, refuse growth past their slot and keep their memory,
// recycle slots unzeroed, give runs back on trim_pools() and under the resident limit, stay
// intact under threads, fork and injected failures, and are poisoned for AddressSanitizer.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "pool_support.hpp"
#include "support.hpp"

#if !defined(_WIN32)
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

// An array of 100 ints under a bound of 128, the many-arrays workload's array.
DynArray<int> hundred(int seed) {
  DynArray<int> a(reservoir::max_elements(128));
  for (int i = 0; i < 100; ++i)
    a.push_back(seed + i);
  return a;
}

bool holds_hundred(const DynArray<int>& a, int seed) {
  if (a.size() != 100) return false;
  for (int i = 0; i < 100; ++i)
    if (a[static_cast<std::size_t>(i)] != seed + i) return false;
  return true;
}

}  // namespace

TEST_SUITE("sub_page") {
  TEST_CASE("a tiny arena takes a whole, committed sub-page slot and never calls the OS again") {
    FreshPools fresh;
    Arena a(500);
    CHECK(a.reserved() == 512);
    CHECK(a.committed() == 512);
    CHECK(reinterpret_cast<std::uintptr_t>(a.base()) % reservoir::kSubPageSlotAlignment == 0);
    CHECK(a.options().sub_page_slot);
    CHECK_FALSE(a.options().guard_pages);
    const std::uint64_t before = os_calls();
    std::byte* const p = static_cast<std::byte*>(a.grow(512));
    CHECK(p == a.base());
    std::memset(p, 0x5A, 512);
    // Past the slot: the documented error, nothing changed.
    CHECK_THROWS_AS(a.grow(1), std::length_error);
    CHECK(a.try_grow(1) == nullptr);
    CHECK_THROWS_AS(a.commit(513), std::length_error);
    CHECK(a.size() == 512);
    // Shrinking keeps the memory (the slot's pages are shared) and the bytes below the length.
    CHECK_FALSE(a.shrink(10));
    CHECK(a.committed() == 512);
    CHECK_FALSE(a.reset());
    CHECK_FALSE(a.trim());
    CHECK(a.committed() == 512);
    CHECK(a.base() == p);
    a.grow(512);
    CHECK(static_cast<unsigned char>(p[511]) == 0x5A);
    CHECK(os_calls() == before);
    // The classes: 256 B up to 2 KiB; one byte more is page-granular with guard pages.
    CHECK(Arena(1).reserved() == 256);
    CHECK(Arena(257).reserved() == 512);
    CHECK(Arena(1024).reserved() == 1024);
    CHECK(Arena(reservoir::kLargestSubPageSlot).reserved() == reservoir::kLargestSubPageSlot);
    Arena page_granular(reservoir::kLargestSubPageSlot + 1);
    CHECK(page_granular.reserved() >= pal::page_size());
    CHECK_FALSE(page_granular.options().sub_page_slot);
    CHECK(page_granular.options().guard_pages);
  }

  TEST_CASE("a DynArray fills its bound without moving, then refuses with nothing lost") {
    FreshPools fresh;
    DynArray<int> a(reservoir::max_elements(128));
    CHECK(a.max_size() == 128);
    CHECK(a.capacity() == 128);  // the whole slot is committed from the start
    const int* const at = a.data();
    std::vector<const int*> addresses;
    for (int i = 0; i < 128; ++i) {
      a.push_back(i);
      addresses.push_back(&a.back());
    }
    CHECK(a.data() == at);
    for (int i = 0; i < 128; ++i)
      REQUIRE(addresses[static_cast<std::size_t>(i)] == at + i);
    CHECK_THROWS_AS(a.push_back(128), std::length_error);
    CHECK_FALSE(a.try_push_back(128));
    CHECK_THROWS_AS(a.reserve(129), std::length_error);
    const int more[] = {1, 2};
    CHECK_THROWS_AS(a.insert(a.begin(), std::begin(more), std::end(more)), std::length_error);
    REQUIRE(a.size() == 128);
    for (int i = 0; i < 128; ++i)
      REQUIRE(a[static_cast<std::size_t>(i)] == i);
    // shrink_to_fit keeps the slot: nothing to give back below a page.
    a.resize(3);
    a.shrink_to_fit();
    CHECK(a.capacity() == 128);
    CHECK(a.data() == at);
    // A bound below the class: max_size() is the bound, the capacity stops there too.
    DynArray<int> b(reservoir::max_elements(100));
    CHECK(b.max_size() == 100);
    CHECK(b.capacity() == 100);
    for (int i = 0; i < 100; ++i)
      b.push_back(i);
    CHECK_THROWS_AS(b.push_back(100), std::length_error);
    CHECK(b.size() == 100);
  }

  TEST_CASE("moved-from, swapped, copied and default arrays behave as any DynArray") {
    FreshPools fresh;
    DynArray<int> a = hundred(7);
    const int* const at = a.data();
    DynArray<int> b(std::move(a));
    CHECK(b.data() == at);
    CHECK(holds_hundred(b, 7));
    CHECK(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    CHECK(a.capacity() == 0);
    a.push_back(1);  // a moved-from array grows on the default reservation
    CHECK(a[0] == 1);
    DynArray<int> c = hundred(1000);
    swap(b, c);
    CHECK(holds_hundred(b, 1000));
    CHECK(holds_hundred(c, 7));
    CHECK(c.data() == at);
    DynArray<int> copy(c);
    CHECK(copy.data() != c.data());
    CHECK(copy.max_size() == 128);
    CHECK(copy.capacity() == 128);
    CHECK(holds_hundred(copy, 7));
    c = std::move(copy);
    CHECK(holds_hundred(c, 7));
    DynArray<int> d;
    CHECK(d.empty());
    d = std::move(c);
    CHECK(holds_hundred(d, 7));
  }

  TEST_CASE("thousands of arrays share runs: far fewer OS calls than arrays, none when recycled") {
    FreshPools fresh;
    constexpr int kArrays = 10000;
    std::vector<DynArray<int>> live;
    live.reserve(kArrays);
    const std::uint64_t cold = os_calls();
    for (int i = 0; i < kArrays; ++i)
      live.push_back(hundred(i));
    // 512-byte slots, 128 to a 64 KiB run (fewer where the ASan red zones or larger pages take
    // room): a run costs three calls (reserve, commit, populate).
    const std::uint64_t cold_calls = os_calls() - cold;
    CAPTURE(cold_calls);
    CHECK(cold_calls <= 3 * (kArrays / 64 + 2));
    std::set<const int*> bases;
    for (const DynArray<int>& a : live)
      bases.insert(a.data());
    CHECK(bases.size() == live.size());
    for (auto it = bases.begin(), next = std::next(it); next != bases.end(); ++it, ++next)
      REQUIRE(*next - *it >= 128);  // no two slots overlap
    for (int i = 0; i < kArrays; ++i)
      REQUIRE(holds_hundred(live[static_cast<std::size_t>(i)], i));
    // Destroyed and built again: the recycled path makes no call at all.
    const std::uint64_t warm = os_calls();
    live.clear();
    for (int i = 0; i < kArrays; ++i)
      live.push_back(hundred(-i));
    for (int round = 0; round < 1000; ++round)
      (void)hundred(round);
    live.clear();
    CHECK(os_calls() == warm);
  }

  TEST_CASE("a recycled slot keeps its bytes (like malloc); fresh runs, reuse = false: zeros") {
    FreshPools fresh;
    std::byte* first = nullptr;
    {
      Arena a(512);
      const auto* zero = static_cast<const unsigned char*>(a.grow(512));
      for (int i = 0; i < 512; ++i)
        REQUIRE(zero[i] == 0);  // a fresh run reads as zeros
      std::memset(a.base(), 0xAB, 512);
      first = a.base();
    }
    {
      Arena b(400);  // the most recently freed slot of the class
      CHECK(b.base() == first);
      CHECK(b.size() == 0);
      const auto* old = static_cast<const unsigned char*>(b.grow(400));
      CHECK(old[0] == 0xAB);
      CHECK(old[399] == 0xAB);
    }
    ArenaOptions zeroed;
    zeroed.reuse_reservation = false;
    Arena c(512, zeroed);
    CHECK_FALSE(c.options().sub_page_slot);
    CHECK(c.base() != first);
    const auto* q = static_cast<const unsigned char*>(c.grow(512));
    for (int i = 0; i < 512; ++i)
      REQUIRE(q[i] == 0);
  }

  TEST_CASE("sub_page_slot = false and over-aligned elements keep a page-granular reservation") {
    FreshPools fresh;
    ArenaOptions guarded;
    guarded.sub_page_slot = false;
    Arena a(100, guarded);
    CHECK(a.reserved() >= pal::page_size());
    CHECK(a.committed() == 0);
    CHECK_FALSE(a.options().sub_page_slot);
    CHECK(a.options().guard_pages);
    DynArray<int> b(reservoir::max_elements(16), guarded);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % pal::page_size() == 0);
    DynArray<int> copy(b);  // the copy keeps the choice
    CHECK(reinterpret_cast<std::uintptr_t>(copy.data()) % pal::page_size() == 0);
    struct alignas(128) Wide {
      char c;
    };
    DynArray<Wide> w(reservoir::max_elements(4));
    w.push_back(Wide{'x'});
    CHECK(reinterpret_cast<std::uintptr_t>(w.data()) % 128 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(w.data()) % pal::page_size() == 0);
  }

  TEST_CASE("trim_pools releases idle runs: RSS drops and address space goes back") {
    FreshPools fresh;
    constexpr int kArrays = 6000;  // 6000 x 2 KiB = 12 MiB, under the default resident limit
    {
      std::vector<DynArray<int>> live;
      live.reserve(kArrays);
      for (int i = 0; i < kArrays; ++i) {
        DynArray<int>& a = live.emplace_back(reservoir::max_elements(512));
        for (int j = 0; j < 512; ++j)
          a.push_back(i + j);
      }
    }
    const std::size_t parked = reservoir::pool_resident_bytes();
    CHECK(parked >= std::size_t{kArrays} * 2048);
    const std::size_t rss_before = pal::current_rss();
    const std::size_t reserved_before = reservoir::reserved_address_space();
    const std::uint64_t releases = pal::testing::calls(pal::Op::release);
    CHECK(reservoir::trim_pools() >= parked);
    CHECK(reservoir::pool_resident_bytes() == 0);
    CHECK(pal::testing::calls(pal::Op::release) - releases >= std::uint64_t{kArrays} * 2048 >> 16);
    CHECK(reservoir::reserved_address_space() + parked <= reserved_before);
    if (const char* why = test::rss_unmeasurable()) {
      MESSAGE(why);
    } else {
      const std::size_t rss_after = pal::current_rss();
      CAPTURE(rss_before);
      CAPTURE(rss_after);
      CHECK(rss_before >= rss_after + parked * 3 / 4);
    }
    DynArray<int> again = hundred(3);  // a new run after the trim
    CHECK(holds_hundred(again, 3));
  }

  TEST_CASE("idle runs go back at once beyond the resident limit; live arrays keep theirs") {
    FreshPools fresh;
    std::vector<DynArray<int>> keep;
    for (int i = 0; i < 10; ++i)
      keep.push_back(hundred(i));
    reservoir::set_pool_resident_limit(0);
    const std::uint64_t releases = pal::testing::calls(pal::Op::release);
    {
      std::vector<DynArray<int>> burst;
      for (int i = 0; i < 2000; ++i)
        burst.push_back(hundred(i));
    }
    // Every run but the ones that still hold a kept array is gone.
    CHECK(pal::testing::calls(pal::Op::release) - releases >= 2000 / 128 - 1);
    CHECK(reservoir::pool_resident_bytes() <= 2 * (std::size_t{64} << 10));
    for (int i = 0; i < 10; ++i)
      REQUIRE(holds_hundred(keep[static_cast<std::size_t>(i)], i));
  }

  TEST_CASE("beyond the resident limit, a tiny array churned in a loop makes no OS call") {
    FreshPools fresh;
    reservoir::set_pool_resident_limit(0);
    CHECK(holds_hundred(hundred(1), 1));  // the class's first run
    const std::uint64_t before = test::os_calls();
    for (int i = 0; i < 1000; ++i)
      REQUIRE(holds_hundred(hundred(i), i));
    CHECK(test::os_calls() == before);
  }

  TEST_CASE("threads create and destroy tiny arrays at once; every array keeps its elements") {
    FreshPools fresh;
    constexpr int kThreads = 4;
    // Under valgrind, which runs one thread at a time, fewer rounds through the same paths.
    const int rounds = test::under_valgrind() ? 600 : 2000;
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, rounds, &bad] {
        std::vector<DynArray<int>> mine;
        std::vector<int> seeds;  // mine[k] holds seeds[k] + j: a slot handed out twice breaks it
        for (int round = 0; round < rounds; ++round) {
          const int seed = t * 1000000 + round * 100;
          DynArray<int>& a = mine.emplace_back(reservoir::max_elements(16 + round % 4 * 128));
          seeds.push_back(seed);
          for (int j = 0; j < 16; ++j)
            a.push_back(seed + j);
          if (round % 3 == 0) {
            const auto k = round % static_cast<int>(mine.size());
            mine.erase(mine.begin() + k);
            seeds.erase(seeds.begin() + k);
          }
          if (t == 0 && round % 100 == 0) reservoir::trim_pools();
          // The resident limit alternates between 1 and 0 four times a run.
          if (t == 1 && round % (rounds / 4) == 0)
            reservoir::set_pool_resident_limit(round / (rounds / 4) % 2 ? 0 : 1);
          if (round % 50 != 49) continue;
          for (std::size_t k = 0; k < mine.size(); ++k) {
            for (int j = 0; j < 16; ++j)
              if (mine[k][static_cast<std::size_t>(j)] != seeds[k] + j) bad.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& th : threads)
      th.join();
    CHECK(bad.load() == 0);
  }

#if !defined(_WIN32) && !defined(RESERVOIR_TEST_TSAN)
  TEST_CASE("a forked child creates and destroys tiny arrays; the parent's are intact in it") {
    FreshPools fresh;
    std::vector<DynArray<int>> live;
    for (int i = 0; i < 300; ++i)
      live.push_back(hundred(i));
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      for (int i = 0; i < 300; ++i)
        if (!holds_hundred(live[static_cast<std::size_t>(i)], i)) status = 3;
      for (int round = 0; round < 3; ++round) {
        std::vector<DynArray<int>> mine;
        for (int i = 0; i < 500; ++i)
          mine.push_back(hundred(-i));
        for (int i = 0; i < 500; ++i)
          if (!holds_hundred(mine[static_cast<std::size_t>(i)], -i)) status = 4;
        live.erase(live.begin(), live.begin() + 50);
        reservoir::trim_pools();
      }
      ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    for (int i = 0; i < 300; ++i)
      REQUIRE(holds_hundred(live[static_cast<std::size_t>(i)], i));
  }
#endif

  TEST_CASE("injected failures while a run is made: the arena goes page-granular, none is lost") {
    FreshPools fresh;
    std::vector<DynArray<int>> live;
    std::vector<int> seeds;
    for (int i = 0; i < 20; ++i) {
      live.push_back(hundred(i));
      seeds.push_back(i);
    }
    for (pal::Op op : {pal::Op::reserve, pal::Op::commit, pal::Op::prefault}) {
      for (std::uint64_t skip = 0; skip < 4; ++skip) {
        CAPTURE(static_cast<unsigned>(op));
        CAPTURE(skip);
        std::vector<DynArray<int>> made;
        int refused = 0;
        const std::uint64_t prefaults = pal::testing::calls(pal::Op::prefault);
        {
          test::FaultGuard guard(op, skip, 1000000);
          for (int i = 0; i < 400; ++i) {
            try {
              made.push_back(hundred(i));
            } catch (const std::bad_alloc&) {
              ++refused;  // the page-granular fallback was refused too
            }
          }
        }
        for (std::size_t i = 0; i < made.size(); ++i)
          REQUIRE(made[i].size() == 100);
        CHECK(made.size() + static_cast<std::size_t>(refused) == 400);
        if (op == pal::Op::prefault) {
          // Only a new run is populated: the page-granular fallback commits one page without
          // populating it, so no array is refused, and once a run was refused (a populate past
          // the skipped ones) some arrays are page-granular, as their options say.
          CHECK(refused == 0);
          if (pal::testing::calls(pal::Op::prefault) - prefaults > skip) {
            CHECK(std::any_of(made.begin(), made.end(), [](const DynArray<int>& a) {
              return !a.arena().options().sub_page_slot;
            }));
          }
        }
        for (std::size_t i = 0; i < live.size(); ++i)
          REQUIRE(holds_hundred(live[i], seeds[i]));
        made.clear();
        live.erase(live.begin());
        seeds.erase(seeds.begin());
        live.push_back(hundred(100 + static_cast<int>(skip)));
        seeds.push_back(100 + static_cast<int>(skip));
      }
    }
    reservoir::trim_pools();
    for (std::size_t i = 0; i < live.size(); ++i)
      REQUIRE(holds_hundred(live[i], seeds[i]));
    CHECK(holds_hundred(hundred(9), 9));
  }

#if defined(RESERVOIR_TEST_ASAN)
  TEST_CASE("AddressSanitizer sees past a slot, before it, and into a free slot") {
    FreshPools fresh;
    Arena a(512);
    Arena b(512);  // the neighbour, in use
    a.grow(512);
    b.grow(512);
    CHECK_FALSE(__asan_address_is_poisoned(a.base()));
    CHECK_FALSE(__asan_address_is_poisoned(a.base() + 511));
    CHECK(__asan_address_is_poisoned(a.base() + 512));
    CHECK(__asan_address_is_poisoned(a.base() - 1));
    CHECK(__asan_address_is_poisoned(b.base() + 512));
    std::byte* freed = nullptr;
    {
      Arena c(512);
      freed = c.base();
    }
    CHECK(__asan_address_is_poisoned(freed));
    CHECK(__asan_address_is_poisoned(freed + 300));
    // A DynArray's spare capacity inside its slot is reported too (container annotations).
    DynArray<int> d(reservoir::max_elements(128));
    d.push_back(1);
    CHECK_FALSE(__asan_address_is_poisoned(d.data()));
    CHECK(__asan_address_is_poisoned(d.data() + 1));
    CHECK(__asan_address_is_poisoned(d.data() + 128));
  }
#endif
}

// Destroying many tiny arrays in a row past the resident limit releases each run as it empties:
// each release must cost about its own run's slots, not a scan of every free slot of the class
// (which made destroying 5e4 arrays of 2 KiB slots take longer than building them, many times
// over). Timed against the build of the same arrays, which maps, commits and populates the same
// runs: a quadratic destroy is seconds where the build is a tenth of one.
TEST_SUITE("sub_page") {
  TEST_CASE(
      "destroying many tiny arrays past the resident limit costs no more than building them") {
    if (test::under_valgrind()) {
      MESSAGE("skipped under valgrind: its timing says nothing of the library's");
      return;
    }
    FreshPools fresh;
    // A quarter of what the arrays hold: the first quarter destroyed is parked (a long free list),
    // then each run goes back to the OS as it empties.
    reservoir::set_pool_resident_limit(std::size_t{20} << 20);
    using Clock = std::chrono::steady_clock;
    constexpr std::size_t kArrays = 40'000;
    std::vector<DynArray<int>> arrays;
    arrays.reserve(kArrays);
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < kArrays; ++i) {
      arrays.emplace_back(reservoir::max_elements(512));  // a 2 KiB slot: 32 to a run
      arrays.back().push_back(static_cast<int>(i));
    }
    const auto t1 = Clock::now();
    arrays.clear();
    const auto t2 = Clock::now();
    const double build = std::chrono::duration<double>(t1 - t0).count();
    const double destroy = std::chrono::duration<double>(t2 - t1).count();
    MESSAGE("build " << build * 1e3 << " ms, destroy " << destroy * 1e3 << " ms");
    CHECK(destroy < 2 * build + 0.05);
    CHECK(reservoir::pool_resident_bytes() <= (std::size_t{21} << 20));
  }
}
