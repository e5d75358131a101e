// Tests of <reservoir/arena_resource.hpp>: std::pmr containers living in an arena.
#include <doctest/doctest.h>

#include <reservoir/arena_resource.hpp>

#if RESERVOIR_HAS_ARENA_RESOURCE
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <reservoir/arena_resource.hpp>

#include "support.hpp"

using reservoir::Arena;
using reservoir::ArenaResource;
namespace pal = reservoir::pal;

TEST_SUITE("arena_resource") {
  TEST_CASE("pmr vector, string and unordered_map live in the arena") {
    ArenaResource res(64u << 20);
    std::pmr::vector<int> v(&res);
    for (int i = 0; i < 100'000; ++i)
      v.push_back(i);
    std::pmr::string s("a string long enough to leave the small buffer behind", &res);
    std::pmr::unordered_map<int, std::pmr::string> m(&res);
    for (int i = 0; i < 1000; ++i)
      m.emplace(i, std::pmr::string(40, char('a' + i % 26)));
    CHECK(res.arena().contains(v.data(), v.size() * sizeof(int)));
    CHECK(res.arena().contains(s.data(), s.size()));
    CHECK(res.arena().contains(m.at(999).data(), 40));
    CHECK(v[99'999] == 99'999);
    CHECK(std::string_view(m.at(27)) == std::string(40, 'b'));
  }

  TEST_CASE("allocations are aligned, including past the page size") {
    ArenaResource res(16u << 20);
    for (std::size_t align : {1u, 2u, 8u, 16u, 64u, 4096u, 8192u, 65536u}) {
      CAPTURE(align);
      void* p = res.allocate(3, align);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
      CHECK(res.arena().contains(p, 3));
    }
  }

  TEST_CASE("deallocating the last block reclaims it; others wait for release()") {
    ArenaResource res(1u << 20);
    void* a = res.allocate(100, 8);
    const std::size_t after_a = res.arena().size();
    void* b = res.allocate(200, 8);
    res.deallocate(a, 100, 8);  // not the last: nothing to reclaim
    CHECK(res.arena().size() > after_a);
    res.deallocate(b, 200, 8);  // the last: its bytes come back (not the alignment padding)
    CHECK(res.arena().size() ==
          static_cast<std::size_t>(static_cast<std::byte*>(b) - res.arena().base()));
    CHECK(res.arena().size() < after_a + 8);
    void* c = res.allocate(200, 8);
    CHECK(c == b);  // and are reused
    res.release();
    CHECK(res.arena().size() == 0);
    CHECK(res.arena().committed() == 0);
  }

  TEST_CASE("over-aligned blocks deallocated in turn give their bytes back, as any other") {
    // Each block ends at the arena's end (the padding comes before it), so a steady
    // allocate/deallocate loop stays in place instead of running out of the reservation.
    ArenaResource res(64u << 20);
    for (std::size_t align : {std::size_t{8192}, std::size_t{65536}, std::size_t{1} << 20}) {
      CAPTURE(align);
      for (int i = 0; i < 20'000; ++i) {
        void* p = res.allocate(100, align);
        REQUIRE(reinterpret_cast<std::uintptr_t>(p) % align == 0);
        res.deallocate(p, 100, align);
        REQUIRE(res.arena().size() < align + 100);
      }
    }
  }

  TEST_CASE("a full arena is bad_alloc and the container keeps its contents") {
    ArenaResource res(1u << 20);
    std::pmr::vector<std::uint64_t> v(&res);
    bool threw = false;
    try {
      for (std::uint64_t i = 0;; ++i)
        v.push_back(i);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    CHECK(threw);
    REQUIRE(!v.empty());
    for (std::size_t i = 0; i < v.size(); ++i)
      REQUIRE(v[i] == i);
    CHECK_THROWS_AS((void)res.allocate(std::size_t{1} << 40, 8), std::bad_alloc);
  }

  TEST_CASE("a refused commit is OsAllocationError, a std::bad_alloc") {
    test::no_parked_reservations();  // else its arena may start with a page committed
    ArenaResource res(4u << 20);
    test::FaultGuard fault(pal::Op::commit);
    CHECK_THROWS_AS((void)res.allocate(100, 8), reservoir::OsAllocationError);
    CHECK(res.arena().size() == 0);
  }

  // The message names the call the resource's users make, on either path (an alignment up to a
  // page, and past it), for an owned arena and a caller's one; the arena is unchanged.
  TEST_CASE("a refused commit names ArenaResource::allocate, not the arena's call") {
    const auto refusal = [](ArenaResource& res, std::size_t alignment) {
      test::FaultGuard fault(pal::Op::commit);
      try {
        (void)res.allocate(100, alignment);
      } catch (const reservoir::OsAllocationError& e) {
        return std::string(e.what());
      }
      return std::string("not refused");
    };
    const auto names = [](const std::string& what) {
      return what.starts_with("cannot commit ") &&
             what.ends_with("). reservoir::ArenaResource::allocate needed it");
    };
    test::no_parked_reservations();  // else an arena may start with a page committed
    ArenaResource owned(4u << 20);
    Arena callers(4u << 20);
    ArenaResource over_callers(callers);
    for (ArenaResource* res : {&owned, &over_callers}) {
      for (const std::size_t alignment : {std::size_t{8}, 4 * pal::page_size()}) {
        CAPTURE(alignment);
        const std::string what = refusal(*res, alignment);
        CHECK_MESSAGE(names(what), what);
        CHECK(res->arena().size() == 0);
        CHECK(res->arena().committed() == 0);
      }
      CHECK(res->allocate(100, 8) != nullptr);  // usable once the OS agrees again
    }
    // An alignment that is not a power of two (a pmr precondition) is refused by name. Read at
    // run time: a constant one is a compile-time warning (the allocate's alloc_align attribute).
    volatile std::size_t odd = 24;
    CHECK_THROWS_WITH_AS((void)owned.allocate(100, odd),
                         "reservoir::ArenaResource::allocate: alignment 24 is not a power of two",
                         std::invalid_argument);
    // The arena's own call still names itself.
    test::FaultGuard fault(pal::Op::commit);
    Arena plain(4u << 20);
    try {
      (void)plain.allocate(100);
      FAIL("not refused");
    } catch (const reservoir::OsAllocationError& e) {
      CHECK(std::string_view(e.what()).ends_with("). reservoir::Arena::allocate needed it"));
    }
  }

  TEST_CASE("mark/rewind: the scratch pattern through pmr reuses committed pages") {
    ArenaResource res(64u << 20);
    std::pmr::vector<int> kept({1, 2, 3}, &res);  // lives across the batches, below the mark
    const std::size_t mark = res.mark();
    CHECK(mark == res.arena().size());
    const int* first_batch_data = nullptr;
    std::size_t committed_after_first = 0;
    std::uint64_t commits_after_first = 0;
    for (int batch = 0; batch < 5; ++batch) {
      {
        std::pmr::vector<int> scratch(&res);
        std::pmr::unordered_map<int, std::pmr::string> names(&res);
        for (int i = 0; i < 100'000; ++i)
          scratch.push_back(i + batch);
        for (int i = 0; i < 100; ++i)
          names.emplace(i, std::pmr::string(40, char('a' + i % 26)));
        CHECK(scratch[99'999] == 99'999 + batch);
        if (batch == 0) {
          first_batch_data = scratch.data();
        } else {
          CHECK(scratch.data() == first_batch_data);  // the same bytes again
        }
      }
      res.rewind(mark);
      CHECK(res.arena().size() == mark);
      if (batch == 0) {
        committed_after_first = res.arena().committed();
        commits_after_first = pal::testing::calls(pal::Op::commit);
      }
      // The memory stays committed: no batch after the first commits or decommits.
      CHECK(res.arena().committed() == committed_after_first);
    }
    CHECK(pal::testing::calls(pal::Op::commit) == commits_after_first);
    CHECK(committed_after_first > (100'000 * sizeof(int)));
    CHECK(kept == std::pmr::vector<int>({1, 2, 3}));

    // release() is the other end: it decommits everything, kept blocks included.
    kept = std::pmr::vector<int>(&res);
    res.release();
    CHECK(res.arena().committed() == 0);
    // A mark from before the release is past the end: std::invalid_argument, nothing changed.
    CHECK_THROWS_AS(res.rewind(mark), std::invalid_argument);
    CHECK(res.arena().size() == 0);
  }

  TEST_CASE("scope() rewinds on exit, also by an exception") {
    ArenaResource res(1u << 20);
    void* before = res.allocate(10, 8);
    const std::size_t mark = res.mark();
    {
      auto scope = res.scope();
      CHECK(scope.mark() == mark);
      std::pmr::string s(1000, 'x', &res);
      CHECK(res.arena().size() > mark);
    }
    CHECK(res.arena().size() == mark);
    try {
      auto scope = res.scope();
      std::pmr::vector<int> v(1000, 7, &res);
      throw std::runtime_error("batch failed");
    } catch (const std::runtime_error&) {
    }
    CHECK(res.arena().size() == mark);
    CHECK(res.arena().contains(before, 10));
    {
      auto scope = res.scope();
      (void)res.allocate(100, 8);
      res.release();  // shorter than the mark at the scope's end: left as it is
    }
    CHECK(res.arena().size() == 0);
  }

  TEST_CASE("mark/rewind on a resource over a caller's arena, empty or moved-from") {
    Arena arena(1u << 20);
    (void)arena.allocate(64, 8);  // the caller's bytes, below the resource's first mark
    ArenaResource res(arena);
    const std::size_t mark = res.mark();
    CHECK(mark == 64);
    (void)res.allocate(100, 8);
    res.rewind(mark);
    CHECK(arena.size() == 64);
    Arena empty;
    ArenaResource none(empty);
    CHECK(none.mark() == 0);
    none.rewind(0);
    CHECK_THROWS_AS(none.rewind(1), std::invalid_argument);
  }

  TEST_CASE("release and rewind of a resource over a caller's arena keep the caller's bytes") {
    Arena arena(1u << 20);
    auto* mine = static_cast<unsigned char*>(arena.allocate(100, 8));
    std::memset(mine, 0xAB, 100);
    ArenaResource res(arena);
    {
      std::pmr::vector<int> v(&res);
      v.resize(100'000, 7);  // commits well past the caller's page
      CHECK(arena.size() > 400'000);
      CHECK_THROWS_AS(res.rewind(50), std::invalid_argument);  // below the caller's length
      CHECK(arena.size() > 400'000);                           // nothing changed
      CHECK(v.back() == 7);
    }  // the vector's block was the last: its bytes come back
    CHECK(arena.size() == 100);
    CHECK(arena.committed() > 400'000);
    res.release();
    CHECK(arena.size() == 100);
    CHECK(arena.committed() < 400'000);  // the resource's pages went back to the OS
    for (int i = 0; i < 100; ++i)
      REQUIRE(mine[i] == 0xAB);  // still committed and intact
    {
      auto scope = res.scope();
      CHECK(scope.mark() == 100);
      CHECK(static_cast<unsigned char*>(res.allocate(10, 1)) == mine + 100);
    }
    CHECK(arena.size() == 100);
    void* next = arena.allocate(8, 8);  // the caller's next allocation comes after its own
    CHECK(static_cast<unsigned char*>(next) >= mine + 100);
  }

  TEST_CASE("a resource over a caller's arena; equality is identity") {
    Arena arena(1u << 20);
    ArenaResource a(arena), b(arena);
    void* p = a.allocate(10, 1);
    CHECK(p == arena.base());
    CHECK(a == a);
    CHECK_FALSE(a == b);
  }

  TEST_CASE("a resource over an empty or moved-from arena: release, allocate, deallocate") {
    Arena empty;
    Arena donor(1u << 20);
    Arena taker(std::move(donor));
    for (Arena* a : {&empty, &donor}) {
      ArenaResource res(*a);
      res.release();
      CHECK_THROWS_AS((void)res.allocate(8, 8), std::bad_alloc);
      int local = 0;
      res.deallocate(&local, sizeof local, alignof(int));  // not ours: ignored
      res.release();
      CHECK(a->size() == 0);
    }
  }
}

#endif  // RESERVOIR_HAS_ARENA_RESOURCE
