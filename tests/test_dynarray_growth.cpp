// Tests of <reservoir/dynarray.hpp>, growth: elements never move and keep their addresses, the
// reservation and its fallbacks, commits that follow the size, the OS calls growth costs.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <ranges>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

using reservoir::DynArray;
using test::Tracked;
namespace pal = reservoir::pal;

namespace {

// How many reservations a default array's first growth asks for before its own 64 GiB mapping:
// the slot pool's chunk of 64 GiB slots where one may be reserved (1), none where the address
// space is too small for one (valgrind: 0). With only the first reservation refused, the array
// still gets the full default if what was refused was the chunk.
std::uint64_t chunk_reserves() {
  test::FaultGuard first(pal::Op::reserve, 0, 1);
  DynArray<int> a;
  a.push_back(1);
  return a.max_size() == DynArray<int>::default_max_size() ? 1 : 0;
}

}  // namespace

TEST_SUITE("dynarray") {
  TEST_CASE("pointers and string_views stay valid across a million appends") {
    DynArray<char> text;
    std::vector<std::string_view> views;
    std::vector<std::string> expected;
    std::mt19937 rng(42);
    std::size_t appended = 0;
    while (appended < 1'000'000) {
      std::string word(1 + rng() % 40, 'a');
      for (char& c : word)
        c = static_cast<char>('a' + rng() % 26);
      const std::size_t start = text.size();
      text.append_range(word);
      views.emplace_back(text.data() + start, word.size());
      expected.push_back(std::move(word));
      appended += views.back().size();
    }
    // Growth crossed many commit steps ...
    CHECK(text.arena().committed() / text.arena().commit_granule() > 10);
    // ... and every view taken along the way still reads its word.
    for (std::size_t i = 0; i < views.size(); ++i)
      REQUIRE(views[i] == expected[i]);
    CHECK(views.front().data() == text.data());
  }

  TEST_CASE("element addresses never change during growth") {
    DynArray<std::uint64_t> a;
    std::vector<const std::uint64_t*> addresses;
    for (std::uint64_t i = 0; i < 300'000; ++i) {
      a.push_back(i);
      if (i % 1000 == 0) addresses.push_back(&a.back());
    }
    a.reserve(a.size() + 1'000'000);
    a.resize(a.size() + 10);
    for (std::size_t k = 0; k < addresses.size(); ++k) {
      REQUIRE(addresses[k] == a.data() + k * 1000);
      REQUIRE(*addresses[k] == k * 1000);
    }
  }

  TEST_CASE("growth constructs in place: no element is moved or copied, each destroyed once") {
    Tracked::reset();
    {
      DynArray<Tracked> a;
      for (int i = 0; i < 200'000; ++i)
        a.emplace_back(i);
      a.resize(250'000);
      a.reserve(400'000);
      CHECK(Tracked::copies == 0);
      CHECK(Tracked::moves == 0);
      CHECK(Tracked::value_constructions == 250'000);
      CHECK(a[123'456].value == 123'456);
      a.resize(100);
      CHECK(Tracked::destructions == 250'000 - 100);
    }
    CHECK(Tracked::live() == 0);
  }

  TEST_CASE("a refused default reservation falls back to a smaller one") {
    // The pool's chunk of 64 GiB slots, where one is tried (FaultGuard trims the pools: none is
    // free or uncarved), then 64 GiB of its own and the chunk of 1 GiB slots are refused: the
    // array takes the next default tier (1 GiB) in a mapping of its own, not a size of no tier.
    const std::uint64_t chunks = chunk_reserves();
    test::FaultGuard fault(pal::Op::reserve, 0, chunks + 2);
    DynArray<int> a;
    CHECK(a.max_size() == DynArray<int>::default_max_size());
    a.push_back(1);
    CHECK(a.max_size() == reservoir::kDefaultTierReduced / sizeof(int));
    CHECK(a.arena().reserved() >= reservoir::kDefaultTierReduced);
    CHECK(a.max_size() < reservoir::kDefaultReserveBytes / 4 / sizeof(int));
    CHECK(a[0] == 1);
  }

  TEST_CASE("a default reservation refused at every tier but the least takes the least") {
    // Refused: the 64 GiB chunk (where tried), 64 GiB, the 1 GiB chunk (where tried: as the
    // 64 GiB one) and 1 GiB. Next is kMinDefaultReserveBytes, the least tier, never a half.
    if (test::under_valgrind()) {
      // It refuses the 64 GiB tier itself, so the refusals counted here fall on smaller ones.
      MESSAGE("skipped under valgrind, which refuses the largest tier itself");
      return;
    }
    const std::uint64_t chunks = chunk_reserves();
    test::FaultGuard fault(pal::Op::reserve, 0, 2 * chunks + 2);
    DynArray<int> a;
    a.push_back(1);
    CHECK(a.max_size() == reservoir::kMinDefaultReserveBytes / sizeof(int));
    CHECK(a[0] == 1);
  }

  TEST_CASE("a new small array commits one page; a parked one comes back with 64 KiB") {
    test::no_parked_reservations();  // a pool's free slot keeps its first pages committed too
    const std::size_t page = std::max(reservoir::kDefaultCommitGranule, pal::page_size());
    bool default_refused = false;
    {
      DynArray<int> a;
      a.push_back(1);
      CHECK(a.arena().committed() == page);  // not 64 KiB: thousands of small arrays stay small
      CHECK(a.capacity() == page / sizeof(int));
      for (int i = 0; i < 100'000; ++i)
        a.push_back(i);
      default_refused = a.max_size() < DynArray<int>::default_max_size();
    }  // parked, with its first 64 KiB (whole pages) still committed
    const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
    const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
    const std::size_t a_reserved = reservoir::reserved_address_space();  // a's, parked
    DynArray<int> b;
    b.push_back(2);
    CHECK(reservoir::reserved_address_space() == a_reserved);
    CHECK(b[0] == 2);
    if (default_refused) {
      // The OS refused the default size to a (valgrind, a small RLIMIT_AS) and so refuses it to b:
      // a refused reservation first releases what is parked, and b starts on a fresh, smaller
      // one, or on a's slot of that smaller tier's pool, with the pages a parked slot keeps.
      MESSAGE("default reservation refused here: b starts on a smaller tier, as a did");
      CHECK(pal::testing::calls(pal::Op::reserve) > reserves);
      const std::size_t kept = std::max(page, reservoir::kDoublingStepLimit / page * page);
      CHECK((b.arena().committed() == page || b.arena().committed() == kept));
      return;
    }
    CHECK(pal::testing::calls(pal::Op::reserve) == reserves);  // a's reservation, reused
    CHECK(b.arena().committed() == std::max(page, reservoir::kDoublingStepLimit / page * page));
    b.resize(b.capacity(), 3);  // fills the kept pages with no commit call
    CHECK(pal::testing::calls(pal::Op::commit) == commits);
    CHECK(b.back() == 3);
  }

  TEST_CASE("push_back to 1e7 ints with huge pages: O(log n) OS calls, nothing moves") {
    // Geometric steps (huge pages forced on, no memory limit checked): about log2(40 MB / 4 KiB)
    // = 14 commits, populate calls for the steps from 64 KiB to 2 MiB, one huge-page advice.
    pal::testing::set_transparent_huge_pages(1);
    reservoir::clear_reservation_cache();
    reservoir::ArenaOptions o;
    o.respect_memory_limit = false;
    constexpr int kN = 10'000'000;
    const auto calls = [] {
      return pal::testing::calls(pal::Op::reserve) + pal::testing::calls(pal::Op::commit) +
             pal::testing::calls(pal::Op::prefault) + pal::testing::calls(pal::Op::advise);
    };
    const std::uint64_t before = calls();
    {
      DynArray<int> a(reservoir::max_elements(std::size_t{1} << 28), o);
      a.push_back(0);
      const int* const first = a.data();
      for (int i = 1; i < kN; ++i)
        a.push_back(i);
      CHECK(a.data() == first);
      CHECK(a[kN / 2] == kN / 2);
      CHECK(a.back() == kN - 1);
      CHECK(a.arena().committed() < 2 * a.size() * sizeof(int));
      if (a.arena().commit_granule() == 4096) CHECK(calls() - before <= 1 + 15 + 6 + 1);
    }
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("push_back to 1e8 ints, population left to faults: at most 32 mmap/mprotect/madvise") {
    // An array of the default reservation with prefault off (the default off Linux): every step
    // is a permission change only, and steps double the committed prefix (up to
    // max_commit_step), so the calls grow with log n. Under a
    // memory limit steps are bounded (each is charged as it is written): where the process has
    // one, the count is taken with the check off.
    const bool limited = reservoir::memory_limit_headroom() != reservoir::kMemoryLimitOff;
    if (limited) {
      MESSAGE("a memory limit is in force here: counted with set_memory_limit(kMemoryLimitOff)");
      reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
    }
    reservoir::clear_reservation_cache();
    const auto calls = [] {
      std::uint64_t n = 0;  // every pal call that is an mmap, mprotect or madvise
      for (const pal::Op op : {pal::Op::reserve, pal::Op::commit, pal::Op::decommit,
                               pal::Op::prefault, pal::Op::advise, pal::Op::guard})
        n += pal::testing::calls(op);
      return n;
    };
    // Under valgrind 1e7 (the bound holds a fortiori; 1e8 appends there take minutes).
    const std::size_t kN = test::under_valgrind() ? 10'000'000 : 100'000'000;
    reservoir::ArenaOptions faults;
    faults.prefault = false;
    CHECK_FALSE(faults.prefault);  // the policy counted: population left to faults
    const std::uint64_t before = calls();
    // On the heap rather than in a std::optional: GCC's -O3 flow analysis takes the optional's
    // unengaged storage for read (-Wmaybe-uninitialized).
    std::unique_ptr<DynArray<int>> made;
    try {
      made = std::make_unique<DynArray<int>>(
          reservoir::max_elements(DynArray<int>::default_max_size()), faults);
    } catch (const reservoir::OsAllocationError& e) {
      MESSAGE("the default reservation is refused here (" << e.what() << "): skipped");
    }
    if (made) {
      DynArray<int>& a = *made;
      a.push_back(0);
      const int* const first = a.data();  // a default array reserves at its first element
      for (std::size_t i = 1; i < kN; ++i)
        a.push_back(static_cast<int>(i));
      const std::uint64_t n = calls() - before;
      MESSAGE(n << " mmap/mprotect/madvise calls for " << kN << " ints");
      CHECK(n <= 32);
      CHECK(a.data() == first);
      CHECK(a[kN / 3] == static_cast<int>(kN / 3));
      CHECK(a.back() == static_cast<int>(kN - 1));
      made.reset();
    }
    if (limited) reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  }

  TEST_CASE("push_back to 1e8 ints, the default population: two calls a bounded step at most") {
    // A default array. On Linux (prefault on) the contract is: populating steps costs two calls a
    // step (the commit and the populate), each step at most kBoundedStepLimit; elsewhere (prefault
    // off) the geometric steps' log n bound of the test above. Under a memory limit steps are
    // bounded whatever the option says: where the process has one, the count is taken with the
    // check off, so that it is the default policy's.
    const bool limited = reservoir::memory_limit_headroom() != reservoir::kMemoryLimitOff;
    if (limited) {
      MESSAGE("a memory limit is in force here: counted with set_memory_limit(kMemoryLimitOff)");
      reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
    }
    reservoir::clear_reservation_cache();
    const auto calls = [] {
      std::uint64_t n = 0;  // every pal call that is an mmap, mprotect or madvise
      for (const pal::Op op : {pal::Op::reserve, pal::Op::commit, pal::Op::decommit,
                               pal::Op::prefault, pal::Op::advise, pal::Op::guard})
        n += pal::testing::calls(op);
      return n;
    };
    // Under valgrind 1e7 (the bound holds a fortiori; 1e8 appends there take minutes).
    const std::size_t kN = test::under_valgrind() ? 10'000'000 : 100'000'000;
    const std::uint64_t before = calls();
    std::unique_ptr<DynArray<int>> made;  // not a std::optional: as above
    try {
      made = std::make_unique<DynArray<int>>();
    } catch (const reservoir::OsAllocationError& e) {
      MESSAGE("the default reservation is refused here (" << e.what() << "): skipped");
    }
    if (made) {
      DynArray<int>& a = *made;
      a.push_back(0);
      const int* const first = a.data();  // a default array reserves at its first element
      for (std::size_t i = 1; i < kN; ++i)
        a.push_back(static_cast<int>(i));
      const std::uint64_t n = calls() - before;
      MESSAGE(n << " mmap/mprotect/madvise calls for " << kN << " ints");
      const std::size_t steps = kN * sizeof(int) / reservoir::kBoundedStepLimit;
      if (reservoir::ArenaOptions{}.prefault) {
        CHECK(n >= steps);             // every bounded step is a call at least ...
        CHECK(n <= 2 * (steps + 40));  // ... and two at most (+ the ramp and the reservation)
      } else {
        CHECK(n <= 32);
      }
      CHECK(a.data() == first);
      CHECK(a[kN / 3] == static_cast<int>(kN / 3));
      CHECK(a.back() == static_cast<int>(kN - 1));
      made.reset();
    }
    if (limited) reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  }

  TEST_CASE("capacity follows committed memory; shrink_to_fit returns it to the OS") {
    DynArray<int> a(reservoir::max_elements(10'000'000));
    const std::size_t granule = a.arena().commit_granule();
    for (int i = 0; i < 1'000'000; ++i)
      a.push_back(i);
    CHECK(a.arena().committed() >= a.size() * sizeof(int));
    CHECK(a.arena().committed() - a.size() * sizeof(int) < a.arena().commit_step());
    CHECK(a.capacity() == a.arena().committed() / sizeof(int));
    const int* data = a.data();
    a.resize(1000);
    CHECK(a.arena().committed() > granule);  // resize down keeps memory, like std::vector
    a.shrink_to_fit();
    CHECK(a.arena().committed() == granule);
    CHECK(a.data() == data);
    CHECK(a[999] == 999);
    a.reserve(5'000'000);
    CHECK(a.capacity() >= 5'000'000);
    CHECK(a.data() == data);
    a.clear();
    a.shrink_to_fit();
    CHECK(a.arena().committed() == 0);
    CHECK(a.capacity() == 0);
  }

  TEST_CASE("reserve backs at most one commit step with RAM; the rest is backed on first touch") {
    if (test::under_valgrind()) {
      MESSAGE("skipped under valgrind, whose own memory grows with what the program maps");
      return;
    }
    // An upper bound that is never reached costs no resident memory, as std::vector::reserve does
    // under Linux overcommit; appends into it work as before.
    constexpr std::size_t kInts = std::size_t{1} << 28;  // 1 GiB
    DynArray<int> a{reservoir::max_elements(kInts)};  // whatever the default reservation would be
    a.push_back(1);
    const std::size_t before = test::proc_status_kib("VmRSS");
    a.reserve(kInts);
    const std::size_t after = test::proc_status_kib("VmRSS");
    CHECK(a.capacity() >= kInts);
    if (before == 0) {
      MESSAGE("no /proc/self/status here: VmRSS not checked");
    } else {
      INFO("VmRSS before " << before << " KiB, after " << after << " KiB");
      // Under AddressSanitizer the annotations poison [size(), capacity()): shadow memory of an
      // eighth of the commit, backed with RAM as it is written.
      const std::size_t shadow_kib =
          reservoir::detail::kAnnotateContainers ? a.capacity() * sizeof(int) / 8 / 1024 : 0;
      CHECK(after < before + 128 * 1024 + shadow_kib);
    }
    const int* data = a.data();
    for (int i = 1; i < 3'000'000; ++i)  // 12 MB: past the populated step
      a.push_back(i);
    CHECK(a.data() == data);
    CHECK(a[2'999'999] == 2'999'999);
    if constexpr (!reservoir::detail::kAnnotateContainers) {
      // The far end of the commit is writable too (past size(): what the sanitizer annotations
      // report, so only without them).
      volatile int* far = a.data() + (kInts - 1);
      *far = 7;
      CHECK(*far == 7);
    }
  }

  TEST_CASE("max_elements and max_bytes reserve exactly; they are not counts") {
    DynArray<int> a(reservoir::max_elements(1000));
    CHECK(a.empty());
    CHECK(a.max_size() == 1000);
    DynArray<std::uint64_t> b(reservoir::max_bytes(1001));
    CHECK(b.empty());
    CHECK(b.max_size() == 125);  // whole elements only
    reservoir::ArenaOptions o;
    o.commit_granule = 128 << 10;
    DynArray<int> c(reservoir::max_bytes(1 << 20), o);
    c.push_back(1);
    CHECK(c.arena().commit_granule() == 128 << 10);
    CHECK(c.max_size() == (1 << 20) / sizeof(int));
    CHECK_THROWS_AS(DynArray<int>(reservoir::max_bytes(3)), std::invalid_argument);  // 0 elements
    static_assert(!std::is_constructible_v<DynArray<int>, std::size_t, reservoir::ArenaOptions>);
  }

  TEST_CASE("reserve(n) after a smaller-than-default first reservation: bad_alloc, not less") {
    // The OS refuses 64 GiB and 32 GiB: the first reservation falls back to 16 GiB. Running out of
    // a default reservation made small for lack of address space is out of memory, as for
    // std::vector (OsAllocationError, a bad_alloc), not a length the caller chose. (The first
    // refusal is the pool's chunk of 64 GiB slots, where one is tried.)
    const std::uint64_t chunks = chunk_reserves();
    test::FaultGuard fault(pal::Op::reserve, 0, chunks + 2);
    DynArray<int> a;
    const std::size_t n = reservoir::kDefaultReserveBytes / 2 / sizeof(int);  // 32 GiB of ints
    REQUIRE(n <= a.max_size());  // allowed by the max_size() reported before reserving
    try {
      a.reserve(n);
      FAIL("reserve past the fallback reservation did not throw");
    } catch (const reservoir::OsAllocationError& e) {
      CHECK((e.code() == reservoir::Refusal::default_reservation_full));
    }
    CHECK(a.max_size() < n);
    CHECK(a.capacity() <= a.max_size());
    a.push_back(1);  // still usable, on the reservation it got
    CHECK(a.size() == 1);
  }

  TEST_CASE("with fixed steps, committed memory is exactly round_up(bytes, granule)") {
    reservoir::ArenaOptions opt;
    opt.commit_granule = pal::page_size();
    opt.max_commit_step = pal::page_size();  // fixed steps
    DynArray<double> a(reservoir::max_elements(1'000'000), opt);
    for (int i = 0; i < 100'000; ++i) {
      a.push_back(i);
      const std::size_t bytes = a.size() * sizeof(double);
      REQUIRE(a.arena().committed() ==
              (bytes + pal::page_size() - 1) / pal::page_size() * pal::page_size());
    }
  }
}
