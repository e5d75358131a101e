// Tests of <reservoir/arena.hpp>: page-granular commit, errors that change nothing, shrinking,
// alignment, moves and guard pages.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <reservoir/arena.hpp>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "arena_testing.hpp"
#include "support.hpp"

using reservoir::Arena;
using reservoir::ArenaOptions;
using reservoir::OsAllocationError;
namespace pal = reservoir::pal;

namespace {

using test::kMiB;

std::size_t round_up(std::size_t v, std::size_t unit) {
  return (v + unit - 1) / unit * unit;
}

// A snapshot of everything observable, to prove an operation changed nothing.
struct State {
  std::byte* base;
  std::size_t size, committed, reserved;
  std::vector<unsigned char> bytes;
  explicit State(const Arena& a)
      : base(a.base()),
        size(a.size()),
        committed(a.committed()),
        reserved(a.reserved()),
        bytes(reinterpret_cast<unsigned char*>(a.base()),
              reinterpret_cast<unsigned char*>(a.base()) + a.size()) {}
  bool operator==(const State&) const = default;
};

void fill_pattern(void* p, std::size_t n, std::size_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<unsigned char>((i + seed) * 131u);
}

}  // namespace

static_assert(!std::is_copy_constructible_v<Arena>);
static_assert(std::is_nothrow_move_constructible_v<Arena>);
static_assert(std::is_nothrow_move_assignable_v<Arena>);
static_assert(std::is_base_of_v<std::bad_alloc, OsAllocationError>);

TEST_SUITE("arena") {
  TEST_CASE("construction reserves and commits nothing") {
    reservoir::clear_reservation_cache();
    Arena a(10 * kMiB);
    CHECK(a.base() != nullptr);
    CHECK(a.size() == 0);
    CHECK(a.committed() == 0);
    CHECK(a.reserved() >= 10 * kMiB);
    // One page: 4 KiB, or the page size where pages are larger.
    CHECK(a.commit_granule() == std::max(reservoir::kDefaultCommitGranule, pal::page_size()));
    CHECK(reinterpret_cast<std::uintptr_t>(a.base()) % pal::page_size() == 0);
  }

  TEST_CASE("the first steps double from one granule to kDoublingStepLimit, then stay above it") {
    reservoir::clear_reservation_cache();
    Arena a(10 * kMiB + 4096);  // a size no other test uses: a fresh reservation
    REQUIRE(a.committed() == 0);
    const std::size_t granule = a.commit_granule();
    const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
    a.grow(1);
    CHECK(a.committed() == granule);  // a new array costs one page
    std::size_t calls = 1;
    while (a.committed() < reservoir::kDoublingStepLimit) {
      const std::size_t before = a.committed();
      a.grow(a.committed() - a.size() + 1);
      ++calls;
      CHECK(a.committed() == 2 * before);
    }
    CHECK(a.committed() == std::max(granule, reservoir::kDoublingStepLimit));
    CHECK(pal::testing::calls(pal::Op::commit) - commits == calls);
    // 4 KiB pages: 4, 8, 16, 32, 64 KiB.
    if (granule == 4096) CHECK(calls == 5);
  }

  TEST_CASE(
      "the default steps: populated and bounded on Linux, geometric and unpopulated elsewhere; "
      "under a memory limit bounded, populated") {
    namespace d = reservoir::detail;
    d::GrowthState s;
    s.committed = kMiB;
    s.reserved = std::size_t{1} << 30;
    s.granule = 4096;
    s.max_step = reservoir::kDefaultMaxCommitStep;
    s.prefault = reservoir::ArenaOptions{}.prefault;
#if defined(__linux__)
    // Linux: each step populated ahead (a populated page costs less than a fault), at most
    // kBoundedStepLimit at a time, so no append waits for more.
    CHECK(s.prefault);
    const d::PlannedStep populated =
        d::plan_growth(s, s.committed + 1, reservoir::Populate::all).step;
    CHECK_FALSE(populated.geometric);
    CHECK(populated.target - s.committed <= reservoir::kBoundedStepLimit);
    CHECK(populated.populated == populated.target - s.committed);
#else
    CHECK_FALSE(s.prefault);
#endif
    s.prefault = false;
    // Without prefault (the default elsewhere) and no limit: a doubling permission change; the
    // pages are backed by the appends' first writes.
    const d::PlannedStep free_step =
        d::plan_growth(s, s.committed + 1, reservoir::Populate::all).step;
    CHECK(free_step.geometric);
    CHECK(free_step.target == 2 * kMiB);
    CHECK(free_step.populated == 0);
    // A limit in force: a bounded step, populated as it is charged, so that the next reading of
    // the usage sees it (an unpopulated charged step would be invisible to it).
    s.limit_in_force = true;
    const d::PlannedStep limited =
        d::plan_growth(s, s.committed + 1, reservoir::Populate::all).step;
    CHECK_FALSE(limited.geometric);
    CHECK(limited.target - s.committed <= reservoir::kPopulatedStepLimit);
    CHECK(limited.target - s.committed <= reservoir::kBoundedStepLimit);
    CHECK(limited.populated == limited.target - s.committed);
    CHECK(limited.charge == limited.populated);
  }

  TEST_CASE("one plan a growth: huge pages asked about once, only where the answer can matter") {
    namespace d = reservoir::detail;
    static int asked = 0;
    asked = 0;
    d::GrowthState s;
    s.reserved = std::size_t{1} << 30;
    s.granule = 4096;
    s.max_step = reservoir::kDefaultMaxCommitStep;
    s.huge_pages = true;
    s.huge_pages_in_effect = []() noexcept {
      ++asked;
      return true;
    };
    // Without prefault: not asked for a step that stays below kHugePageThreshold, nor where
    // there is nothing to commit; asked once for the step that reaches past it, which advises.
    s.prefault = false;
    s.committed = kMiB;
    d::GrowthPlan plan = d::plan_growth(s, kMiB + 1, reservoir::Populate::all);
    CHECK(asked == 0);
    CHECK(plan.step.target == 2 * kMiB);
    CHECK_FALSE(plan.huge_pages);
    (void)d::plan_growth(s, kMiB, reservoir::Populate::all);
    CHECK(asked == 0);
    s.committed = reservoir::kHugePageThreshold;
    plan = d::plan_growth(s, s.committed + 1, reservoir::Populate::all);
    CHECK(asked == 1);
    CHECK(plan.huge_pages);
    CHECK(plan.step.advise_huge);
    CHECK(plan.step.populated == 0);
    // With prefault: not asked below kDoublingStepLimit (both policies double there); from it on
    // asked once, for the step and its retry together.
    s.prefault = true;
    s.committed = reservoir::kDoublingStepLimit / 4;
    plan = d::plan_growth(s, s.committed + 1, reservoir::Populate::all);
    CHECK(asked == 1);
    CHECK(plan.step.target == reservoir::kDoublingStepLimit / 2);
    s.committed = 64 * kMiB;
    plan = d::plan_growth(s, s.committed + 1, reservoir::Populate::all);
    CHECK(asked == 2);
    CHECK(plan.step.geometric);
    CHECK(plan.step.target == 128 * kMiB);
    // The retry: the smallest step that holds the request, planned with the step.
    CHECK(plan.retry.target == 64 * kMiB + 4096);
    CHECK(plan.retry.geometric);
    // A retry that would save less than kPopulatedStepLimit is none.
    s.committed = kMiB;
    plan = d::plan_growth(s, s.committed + 1, reservoir::Populate::all);
    CHECK(asked == 3);
    CHECK(plan.step.target == 2 * kMiB);
    CHECK(plan.retry.target == 0);
    // Without the option nothing is asked.
    s.huge_pages = false;
    plan = d::plan_growth(s, s.committed + 1, reservoir::Populate::all);
    CHECK(asked == 3);
    CHECK_FALSE(plan.step.geometric);
  }

  TEST_CASE("the policy's other rules: what a parked reservation keeps, which ranges get a call") {
    namespace d = reservoir::detail;
    // The doubling steps, whole granules, at least one, at most one max_commit_step.
    CHECK(d::parked_keep(4096, reservoir::kDefaultMaxCommitStep) == reservoir::kDoublingStepLimit);
    CHECK(d::parked_keep(4096, 8192) == 8192);
    CHECK(d::parked_keep(24576, reservoir::kDefaultMaxCommitStep) == 49152);
    CHECK(d::parked_keep(std::size_t{1} << 20, std::size_t{1} << 20) == std::size_t{1} << 20);
    CHECK_FALSE(d::populate_by_call(reservoir::kDoublingStepLimit - 4096));
    CHECK(d::populate_by_call(reservoir::kDoublingStepLimit));
    // The 2 MiB quantities that derive from the huge page.
    static_assert(reservoir::kPopulatedStepLimit == d::kHugePageSize);
    static_assert(reservoir::kHugePageThreshold == 2 * d::kHugePageSize);
  }

  TEST_CASE("bounded steps: at least kDoublingStepLimit and committed/8, at most 2 MiB") {
    // Without huge pages, prefault populates every step at once, so steps stay bounded.
    pal::testing::set_transparent_huge_pages(0);
    reservoir::clear_reservation_cache();
    ArenaOptions populated;
    populated.prefault = true;
    Arena a(10 * kMiB + 4096, populated);
    const std::size_t granule = a.commit_granule();
    a.grow(reservoir::kDoublingStepLimit);
    while (a.committed() < 4 * kMiB) {
      const std::size_t before = a.committed();
      a.grow(a.committed() - a.size() + 1);
      CHECK(a.committed() - before >= reservoir::kDoublingStepLimit);
      CHECK(a.committed() - before >= before / 8 / granule * granule / 2);
      CHECK(a.committed() - before <= std::max(reservoir::kDoublingStepLimit, before / 8));
      CHECK(a.committed() - before <= std::max(granule, reservoir::kPopulatedStepLimit));
    }
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("geometric steps double the committed prefix up to max_commit_step") {
    // With huge pages in effect (forced here) and no memory limit checked, every step doubles.
    pal::testing::set_transparent_huge_pages(1);
    reservoir::clear_reservation_cache();
    ArenaOptions o;
    o.respect_memory_limit = false;
    o.max_commit_step = 32 * kMiB;
    Arena a(256 * kMiB, o);
    const std::size_t cap = a.options().max_commit_step;
    a.grow(1);
    while (a.committed() < 128 * kMiB) {
      const std::size_t before = a.committed();
      a.grow(a.committed() - a.size() + 1);
      CHECK(a.committed() == before + std::min(before, cap));
    }
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("committed() is exactly round_up(size, granule) while growing") {
    for (std::size_t granule : {pal::page_size(), 16 * pal::page_size(), 3 * kMiB}) {
      CAPTURE(granule);
      reservoir::clear_reservation_cache();  // a parked reservation arrives with pages committed
      ArenaOptions opt;
      opt.commit_granule = granule;
      opt.max_commit_step = granule;  // fixed steps
      Arena a(64 * kMiB, opt);
      std::byte* const base = a.base();
      std::size_t expected_size = 0;
      for (std::size_t step : {1u, 7u, 4095u, 1u, 65536u, 100000u, 3u, 1000000u, 5000000u}) {
        void* p = a.grow(step);
        CHECK(p == base + expected_size);  // contiguous, and the base never moves
        expected_size += step;
        REQUIRE(a.size() == expected_size);
        REQUIRE(a.committed() == round_up(expected_size, granule));
        std::memset(p, 0x5A, step);  // all of it is writable
      }
      CHECK(a.base() == base);
    }
  }

  TEST_CASE(
      "bounded steps grow with the arena up to kBoundedStepLimit; large arenas are 2 MiB aligned") {
    pal::testing::set_transparent_huge_pages(0);
    ArenaOptions populated;
    populated.prefault = true;
    Arena a(256 * kMiB, populated);
    CHECK(reinterpret_cast<std::uintptr_t>(a.base()) % (2 * kMiB) == 0);
    const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
    std::size_t steps_seen = 0, last_step = 0;
    while (a.size() < 100 * kMiB) {
      const std::size_t step = a.commit_step();
      CHECK(step >= a.commit_granule());
      CHECK(step <= reservoir::kPopulatedStepLimit);
      CHECK(step <= reservoir::kBoundedStepLimit);
      CHECK((step & (step - 1)) == 0);
      if (step != last_step) ++steps_seen, last_step = step;
      a.grow(4096);
      // Never more than one step committed ahead of what is used.
      REQUIRE(a.committed() >= a.size());
      REQUIRE(a.committed() - a.size() < a.commit_step());
    }
    CHECK(a.commit_step() == reservoir::kBoundedStepLimit);
    CHECK(steps_seen >= 3);  // 64, 128, 256 KiB
    // The contract: one commit a step, each step at most kBoundedStepLimit (what one append may
    // wait to populate). 100 MiB took 400 steps of 256 KiB plus ~16 while the step ramped up (8
    // per doubling from 64 KiB), not the 1600 calls of fixed 64 KiB granules.
    CHECK(pal::testing::calls(pal::Op::commit) - commits <
          100 * kMiB / reservoir::kBoundedStepLimit + 40);
    // Small arenas are not over-aligned.
    Arena small(kMiB);
    CHECK(small.reserved() < 2 * kMiB);
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("geometric steps reach 1e8 ints in O(log n) OS calls, one huge-page advice") {
    // Growing 4 bytes at a time to n bytes takes log2(n / 4 KiB) doubling commits up to
    // max_commit_step and one per max_commit_step after it; populate calls only below
    // kHugePageThreshold, for steps of at least kDoublingStepLimit; one advice.
    pal::testing::set_transparent_huge_pages(1);
    reservoir::clear_reservation_cache();
    ArenaOptions o;
    o.respect_memory_limit = false;
    for (const std::size_t n : {std::size_t{40} << 20, std::size_t{400'000'000}}) {
      CAPTURE(n);
      const auto calls = [] {
        return pal::testing::calls(pal::Op::reserve) + pal::testing::calls(pal::Op::commit) +
               pal::testing::calls(pal::Op::prefault) + pal::testing::calls(pal::Op::advise) +
               pal::testing::calls(pal::Op::decommit) + pal::testing::calls(pal::Op::release);
      };
      const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
      const std::uint64_t advice = pal::testing::calls(pal::Op::advise);
      const std::uint64_t before = calls();
      {
        Arena a(std::size_t{1} << 30, o);
        if (a.commit_granule() != 4096) break;  // the counts below are for 4 KiB pages
        std::size_t grown = 0;
        while (grown < n) {
          const std::size_t chunk = std::min<std::size_t>(a.committed() - a.size() + 4, n - grown);
          a.grow(chunk);
          grown += chunk;
        }
        CHECK(a.committed() - a.size() < std::max(a.size(), a.options().max_commit_step));
        CHECK(pal::testing::calls(pal::Op::advise) - advice == 1);
      }
      const std::uint64_t log2_pages = std::bit_width(n / 4096);
      const std::uint64_t capped = n / reservoir::kDefaultMaxCommitStep;
      CHECK(pal::testing::calls(pal::Op::commit) - commits <= log2_pages + capped + 1);
      // reserve, commits, 6 populates (64 KiB..2 MiB), the advice, then decommit + release or
      // park.
      CHECK(calls() - before <= log2_pages + capped + 1 + 6 + 1 + 1 + 2);
      if (n == 400'000'000) CHECK(calls() - before <= 32);
    }
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("huge pages are advised past kHugePageThreshold only, and only when THP is on") {
    reservoir::clear_reservation_cache();
    ArenaOptions o;
    o.respect_memory_limit = false;
    o.prefault = true;  // bounded steps where huge pages are not in effect
    for (const int thp : {0, 1}) {
      CAPTURE(thp);
      pal::testing::set_transparent_huge_pages(thp);
      const std::uint64_t advice = pal::testing::calls(pal::Op::advise);
      Arena a(64 * kMiB, o);
      a.grow(reservoir::kHugePageThreshold);  // up to it: 4 KiB pages only
      CHECK(pal::testing::calls(pal::Op::advise) == advice);
      a.grow(1);
      CHECK(pal::testing::calls(pal::Op::advise) == advice + static_cast<std::uint64_t>(thp));
      // Without THP the step stays bounded (populated at once); with it, it doubles.
      CHECK(a.committed() == (thp ? 2 * reservoir::kHugePageThreshold
                                  : reservoir::kHugePageThreshold + a.commit_step()));
      auto* p = reinterpret_cast<unsigned char*>(a.base());
      fill_pattern(p, a.size(), 3);
      CHECK(p[a.size() - 1] == static_cast<unsigned char>((a.size() - 1 + 3) * 131u));
    }
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("lowering the reservation cache's limit releases what is parked past it") {
    reservoir::clear_reservation_cache();
    const std::size_t saved = 16;  // the default limit (reservations.hpp)
    {
      std::vector<Arena> arenas;
      for (int i = 0; i < 10; ++i)
        arenas.emplace_back(10u << 20);
    }  // all ten parked
    CHECK(reservoir::reservation_cache_size() == 10);
    const std::uint64_t releases = pal::testing::calls(pal::Op::release);
    reservoir::set_reservation_cache_limit(2);
    CHECK(reservoir::reservation_cache_size() == 2);
    CHECK(pal::testing::calls(pal::Op::release) == releases + 8);
    Arena again(10u << 20);  // one of the two comes back
    CHECK(reservoir::reservation_cache_size() == 1);
    reservoir::set_reservation_cache_limit(saved);
  }

  TEST_CASE("set_huge_pages decides between the two policies") {
    reservoir::clear_reservation_cache();
    ArenaOptions o;
    o.respect_memory_limit = false;
    o.prefault = true;  // bounded steps where huge pages are not in effect
    pal::testing::set_transparent_huge_pages(1);  // THP honoured, no host reclaiming free blocks
    CHECK(reservoir::huge_pages() == reservoir::HugePages::automatic);
    for (const auto mode :
         {reservoir::HugePages::automatic, reservoir::HugePages::on, reservoir::HugePages::off}) {
      CAPTURE(static_cast<int>(mode));
      reservoir::set_huge_pages(mode);
      const bool huge = mode != reservoir::HugePages::off;
      CHECK(reservoir::huge_pages_in_effect() == huge);
      Arena a(64 * kMiB, o);
      a.grow(8 * kMiB);
      // Geometric: 8 MiB is committed exactly (a doubling step); bounded: at most one 2 MiB step
      // past it.
      if (huge) CHECK(a.committed() == 8 * kMiB);
      if (huge) {
        CHECK(a.commit_step() == 8 * kMiB);
      } else {
        CHECK(a.commit_step() <= reservoir::kPopulatedStepLimit);
      }
    }
    // Where THP ignores MADV_HUGEPAGE, even `on` cannot have them.
    pal::testing::set_transparent_huge_pages(0);
    reservoir::set_huge_pages(reservoir::HugePages::on);
    CHECK_FALSE(reservoir::huge_pages_in_effect());
    reservoir::set_huge_pages(reservoir::HugePages::automatic);
    pal::testing::set_transparent_huge_pages(-1);
    // Unforced, automatic means: THP honoured and no host taking free 2 MiB blocks back.
    CHECK(reservoir::huge_pages_in_effect() ==
          (pal::transparent_huge_pages() && !pal::host_reclaims_free_pages()));
  }

#if defined(__linux__)
  TEST_CASE("geometric steps below the huge-page threshold keep RSS within 1.5x of the data") {
    // A doubling step backs at most half of itself beyond the request; the rest is backed only
    // when written. mincore() counts the arena's resident pages exactly.
    pal::testing::set_transparent_huge_pages(1);
    reservoir::clear_reservation_cache();
    ArenaOptions o;
    o.respect_memory_limit = false;
    for (const std::size_t n :
         {std::size_t{70} << 10, std::size_t{100} << 10, std::size_t{300} << 10,
          std::size_t{1060} << 10, std::size_t{2100} << 10, std::size_t{3900} << 10}) {
      CAPTURE(n);
      Arena a(64 * kMiB, o);
      if (a.commit_granule() != 4096) break;
      while (a.size() < n) {
        const std::size_t chunk = std::min<std::size_t>(a.committed() - a.size() + 4, n - a.size());
        std::memset(a.grow(chunk), 1, chunk);  // written, as appends write
      }
      std::vector<unsigned char> pages(a.committed() / 4096);
      REQUIRE(::mincore(a.base(), a.committed(), pages.data()) == 0);
      std::size_t resident = 0;
      for (unsigned char r : pages)
        resident += (r & 1) * std::size_t{4096};
      CHECK(resident >= n / 4096 * 4096);
      CHECK(resident <= n + n / 2 + 4096);
    }
    pal::testing::set_transparent_huge_pages(-1);
  }
#endif

  TEST_CASE("a refused geometric step is retried as the smallest step that holds the request") {
    pal::testing::set_transparent_huge_pages(1);
    reservoir::clear_reservation_cache();
    ArenaOptions o;
    o.respect_memory_limit = false;
    Arena a(256 * kMiB, o);
    a.grow(32 * kMiB);
    REQUIRE(a.committed() == 32 * kMiB);
    const std::size_t g = a.commit_granule();
    // One refusal: the 32 MiB doubling step fails, the retry commits only what is needed.
    pal::testing::fail(pal::Op::commit, 0, 1, pal::testing::out_of_memory_error());
    a.grow(1);
    CHECK(a.committed() == 32 * kMiB + g);
    // Two refusals: the growth fails and changes nothing.
    a.grow(a.committed() - a.size());
    const State before(a);
    pal::testing::fail(pal::Op::commit, 0, 2, pal::testing::out_of_memory_error());
    CHECK_THROWS_AS(a.grow(1), OsAllocationError);
    CHECK(State(a) == before);
    pal::testing::clear();
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("under a memory limit, steps stay bounded whatever THP says") {
    pal::testing::set_transparent_huge_pages(1);
    reservoir::set_memory_limit(std::size_t{1} << 40);  // far above any usage: nothing refused
    {
      Arena a(256 * kMiB);
      a.grow(16 * kMiB);
      CHECK(a.commit_step() <= reservoir::kPopulatedStepLimit);
      CHECK(a.committed() - a.size() <= reservoir::kPopulatedStepLimit);
    }
    reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("destroyed arenas park their reservation; the next one takes it with no OS call") {
    reservoir::clear_reservation_cache();
    std::byte* base = nullptr;
    {
      Arena a(5 * kMiB + 4096);  // a size no other test uses
      fill_pattern(a.grow(3 * kMiB), 3 * kMiB, 9);
      base = a.base();
    }
    CHECK(reservoir::reservation_cache_size() == 1);
    const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
    {
      Arena b(5 * kMiB + 4096);
      CHECK(pal::testing::calls(pal::Op::reserve) == reserves);  // no system call
      CHECK(b.base() == base);
      CHECK(b.size() == 0);
      // Up to 64 KiB stayed committed (in whole granules): the next arena's first pages need no
      // commit call and no page fault.
      const std::size_t g = b.commit_granule();
      CHECK(b.committed() == std::max(g, reservoir::kDoublingStepLimit / g * g));
      const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
      b.grow(b.committed());
      CHECK(pal::testing::calls(pal::Op::commit) == commits);
      CHECK(!b.shrink(0));
      CHECK(b.grow(2 * kMiB) == base);
      CHECK(reservoir::reservation_cache_size() == 0);
      Arena other(7 * kMiB);  // another size: a fresh reservation
      CHECK(pal::testing::calls(pal::Op::reserve) == reserves + 1);
    }
    CHECK(reservoir::reservation_cache_size() == 2);
    ArenaOptions no_reuse;
    no_reuse.reuse_reservation = false;
    {
      Arena c(5 * kMiB + 4096, no_reuse);
    }  // options differ: not taken, not parked
    CHECK(reservoir::reservation_cache_size() == 2);
    reservoir::set_reservation_cache_limit(0);
    CHECK(reservoir::reservation_cache_size() == 0);
    {
      Arena d(3 * kMiB);  // above kLargestPoolSlot: small arenas go to the slot pools instead
    }
    CHECK(reservoir::reservation_cache_size() == 0);
    reservoir::set_reservation_cache_limit(16);
    {
      Arena e(3 * kMiB);
    }
    CHECK(reservoir::reservation_cache_size() == 1);
    reservoir::clear_reservation_cache();
    CHECK(reservoir::reservation_cache_size() == 0);
  }

  TEST_CASE("a refused decommit while parking releases the reservation instead") {
    reservoir::clear_reservation_cache();
    const std::uint64_t releases = pal::testing::calls(pal::Op::release);
    std::optional<Arena> a(std::in_place, 3 * kMiB);
    a->grow(kMiB);
    {
      test::FaultGuard fault(pal::Op::decommit);
      a.reset();  // destroyed inside the fault: trimming to the first step fails
    }
    CHECK(reservoir::reservation_cache_size() == 0);
    CHECK(pal::testing::calls(pal::Op::release) == releases + 1);
  }

  TEST_CASE("growing past the reservation is length_error and changes nothing") {
    Arena a(1 * kMiB);
    fill_pattern(a.grow(a.reserved() - 10), a.reserved() - 10, 1);
    const State before(a);
    CHECK_THROWS_AS(a.grow(11), std::length_error);
    CHECK(State(a) == before);
    CHECK(a.try_grow(11) == nullptr);
    CHECK(a.try_grow(std::numeric_limits<std::size_t>::max()) == nullptr);
    CHECK_THROWS_AS(a.grow(std::numeric_limits<std::size_t>::max()), std::length_error);
    CHECK(State(a) == before);
    CHECK(a.grow(10) != nullptr);  // exactly to the end is fine
    CHECK(a.size() == a.reserved());
  }

  TEST_CASE("a refused commit is OsAllocationError naming size, address and OS error") {
    reservoir::clear_reservation_cache();  // a fresh reservation: nothing committed yet
    Arena a(16 * kMiB);
    fill_pattern(a.grow(1000), 1000, 2);
    a.grow(a.committed() - a.size());  // committed prefix exactly full
    const State before(a);
    {
      test::FaultGuard fault(pal::Op::commit);
      try {
        a.grow(1);
        FAIL("grow should have thrown");
      } catch (const OsAllocationError& e) {
        const std::string what = e.what();
        // The second step of a fresh arena: one page, "4 KiB" with 4 KiB pages.
        CHECK(what.find("cannot commit " + reservoir::format_bytes(a.commit_step()) + " at 0x") ==
              0);
        if (pal::page_size() == 4096) CHECK(what.find("cannot commit 4 KiB at 0x") == 0);
        CHECK(e.code() == pal::testing::out_of_memory_error());
        CHECK(what.find(pal::describe(pal::testing::out_of_memory_error())) != std::string::npos);
      }
      CHECK(State(a) == before);
    }
    {
      test::FaultGuard fault(pal::Op::commit);
      CHECK(a.try_grow(1) == nullptr);
      CHECK(State(a) == before);
    }
    {
      test::FaultGuard fault(pal::Op::commit, 0, 2);
      CHECK_THROWS_AS(a.commit(a.committed() + 1), std::bad_alloc);
      CHECK_FALSE(a.try_commit(a.committed() + 1));
      CHECK(State(a) == before);
    }
    CHECK(a.grow(1) != nullptr);  // usable afterwards
  }

  TEST_CASE("bad sizes are rejected before any OS call") {
    const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
    CHECK_THROWS_AS((void)Arena(0), std::invalid_argument);
    CHECK_THROWS_AS((void)Arena(std::numeric_limits<std::size_t>::max()), std::length_error);
    if constexpr (sizeof(void*) >= 8) {
      CHECK_THROWS_AS((void)Arena(std::size_t{1} << 50), std::length_error);  // > 128 TiB
    }
    ArenaOptions silly;
    silly.commit_granule = std::numeric_limits<std::size_t>::max();
    CHECK_THROWS_AS((void)Arena(kMiB, silly), std::invalid_argument);
    ArenaOptions no_cap;  // a cap of SIZE_MAX cannot round up to whole pages (docs/api.md)
    no_cap.max_commit_step = std::numeric_limits<std::size_t>::max();
    CHECK_THROWS_WITH_AS((void)Arena(kMiB, no_cap), doctest::Contains("max_commit_step"),
                         std::invalid_argument);
    // A page-aligned cap that overflows when rounded up to whole granules of 19 pages (19 divides
    // no 2^k - 1 for k = 48, 50, 52: the cap is no whole number of granules at 4, 16 or 64 KiB).
    ArenaOptions odd;
    odd.commit_granule = 19 * pal::page_size();
    odd.max_commit_step =
        std::numeric_limits<std::size_t>::max() / pal::page_size() * pal::page_size();
    REQUIRE(odd.max_commit_step % odd.commit_granule != 0);
    CHECK_THROWS_WITH_AS((void)Arena(kMiB, odd), doctest::Contains("max_commit_step"),
                         std::invalid_argument);
    std::error_code ec;
    CHECK_FALSE(Arena::create(0, {}, &ec).has_value());
    CHECK(ec == std::errc::invalid_argument);
    CHECK(pal::testing::calls(pal::Op::reserve) == reserves);
  }

  TEST_CASE("five words: granule and step are packed, rounded and capped, and options() says so") {
    if constexpr (sizeof(void*) == 8) CHECK(sizeof(Arena) == 40);
    ArenaOptions o;
    o.commit_granule = pal::page_size() + 1;   // rounds up to two pages
    o.max_commit_step = std::size_t{1} << 40;  // capped at 65535 granules
    o.huge_pages = true;
    o.guard_pages = false;
    Arena a(64 * kMiB, o);
    const ArenaOptions in_force = a.options();
    CHECK(in_force.commit_granule == 2 * pal::page_size());
    CHECK(in_force.max_commit_step == 65535 * in_force.commit_granule);
    CHECK(in_force.huge_pages);
    CHECK_FALSE(in_force.guard_pages);
    CHECK(in_force.prefault == o.prefault);
    CHECK(in_force.reuse_reservation == o.reuse_reservation);
    CHECK(in_force.respect_memory_limit == o.respect_memory_limit);
    CHECK(a.commit_granule() == in_force.commit_granule);
    // Any granule is rounded up to whole pages, never refused for it (docs/api.md): 3 is a page.
    ArenaOptions three;
    three.commit_granule = 3;
    CHECK(Arena(kMiB, three).commit_granule() == pal::page_size());
    // A granule of more than 2^32 units of 4 KiB does not fit the packed word.
    if constexpr (sizeof(void*) == 8) {
      ArenaOptions huge;
      huge.commit_granule = std::size_t{1} << 45;
      CHECK_THROWS_AS((void)Arena(std::size_t{1} << 46, huge), std::invalid_argument);
    }
    // A default-constructed arena reports the default options, and so does a moved-from one.
    CHECK(Arena().options() == ArenaOptions{});
    Arena b(std::move(a));
    CHECK(a.options() == ArenaOptions{});  // NOLINT(bugprone-use-after-move): the empty state
    CHECK(b.options() == in_force);
  }

  TEST_CASE("a refused reservation is OsAllocationError; create() reports it without throwing") {
    {
      test::FaultGuard fault(pal::Op::reserve);
      try {
        Arena a(kMiB);
        FAIL("should have thrown");
      } catch (const OsAllocationError& e) {
        CHECK(std::string(e.what()).find("cannot reserve") == 0);
        CHECK(std::string(e.what()).find("of address space") != std::string::npos);
      }
    }
    test::FaultGuard fault(pal::Op::reserve);
    std::error_code ec;
    CHECK_FALSE(Arena::create(kMiB, {}, &ec).has_value());
    CHECK(ec == pal::testing::out_of_memory_error());
  }

  // What Arena refuses reaches a container as a value: the kind and the figures, and raise()
  // throws what the Arena would, naming the caller's call.
  TEST_CASE("refusals as values: ArenaError's kind and figures, and raise() names the call") {
    using Kind = reservoir::ArenaError::Kind;
    reservoir::ArenaError error;
    CHECK_FALSE(error);
    CHECK_FALSE(Arena::create(0, {}, &error).has_value());
    CHECK(error.kind == Kind::zero_size);
    CHECK_THROWS_WITH_AS(error.raise("Caller"),
                         "reservoir::Caller: max_bytes must be greater than 0",
                         std::invalid_argument);
    ArenaOptions no_cap;
    no_cap.max_commit_step = std::numeric_limits<std::size_t>::max();
    CHECK_FALSE(Arena::create(kMiB, no_cap, &error).has_value());
    CHECK(error.kind == Kind::bad_options);
    CHECK_THROWS_WITH_AS(error.raise("Caller"),
                         doctest::Contains("reservoir::Caller: commit_granule or max_commit_step"),
                         std::invalid_argument);
    const std::size_t too_large = std::numeric_limits<std::size_t>::max() / 2;
    CHECK_FALSE(Arena::create(too_large, {}, &error).has_value());
    CHECK(error.kind == Kind::too_large);
    CHECK(error.bytes == too_large);
    CHECK(error.limit > 0);
    CHECK(error.limit < too_large);
    CHECK_THROWS_WITH_AS(
        error.raise("Caller"),
        ("reservoir::Caller: cannot reserve " + reservoir::format_bytes(too_large) +
         ": more than the address space can hold (limit " + reservoir::format_bytes(error.limit) +
         ")")
            .c_str(),
        std::length_error);
    // The error_code form says the same, as an errc.
    std::error_code ec;
    CHECK_FALSE(Arena::create(too_large, {}, &ec).has_value());
    CHECK(ec == std::errc::value_too_large);
    {
      test::FaultGuard fault(pal::Op::reserve);
      CHECK_FALSE(Arena::create(kMiB, {}, &error).has_value());
      CHECK(error.kind == Kind::reserve_refused);
      CHECK(error.bytes >= kMiB);
      CHECK(error.address == nullptr);
      CHECK(error.error == pal::testing::out_of_memory_error());
      CHECK_THROWS_WITH_AS(error.raise("Caller"), doctest::Contains("cannot reserve "),
                           OsAllocationError);
    }
    ArenaOptions own;  // a mapping of its own, nothing committed: the commit calls the OS
    own.reuse_reservation = false;
    own.sub_page_slot = false;
    Arena a(kMiB, own);
    REQUIRE(a.committed() == 0);
    CHECK_FALSE(a.try_commit(2 * kMiB, Arena::Populate::all, &error));
    CHECK(error.kind == Kind::reservation_full);
    CHECK(error.bytes == 2 * kMiB);
    CHECK(error.limit == a.reserved());
    CHECK_THROWS_WITH_AS(error.raise("Caller"),
                         ("reservoir::Caller: cannot grow to 2 MiB: the reservation holds " +
                          reservoir::format_bytes(a.reserved()))
                             .c_str(),
                         std::length_error);
    {
      test::FaultGuard fault(pal::Op::commit, 0, 2);
      CHECK_FALSE(a.try_commit(1, Arena::Populate::all, &error));
      CHECK(error.kind == Kind::commit_refused);
      CHECK(error.address == a.base());
      CHECK(error.bytes >= pal::page_size());
      CHECK(error.error == pal::testing::out_of_memory_error());
      CHECK_THROWS_WITH_AS(error.raise("Caller"), doctest::Contains("cannot commit "),
                           OsAllocationError);
      CHECK(a.committed() == 0);
    }
    CHECK(a.try_commit(1, Arena::Populate::all, &error));
    CHECK_FALSE(error);
    CHECK(a.committed() > 0);
    CHECK_THROWS_AS(reservoir::ArenaError{}.raise("Caller"), std::logic_error);
  }

  TEST_CASE("allocate aligns, and rejects alignments that are not powers of two") {
    Arena a(kMiB);
    a.grow(1);
    for (std::size_t align : {1u, 2u, 8u, 16u, 64u, 256u, 4096u}) {
      void* p = a.allocate(3, align);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
      CHECK(a.contains(p, 3));
    }
    const State before(a);
    CHECK_THROWS_AS(a.allocate(1, 3), std::invalid_argument);
    CHECK_THROWS_AS(a.allocate(1, 0), std::invalid_argument);
    CHECK_THROWS_AS(a.allocate(1, pal::page_size() * 2), std::invalid_argument);
    CHECK(a.try_allocate(1, 3) == nullptr);
    CHECK_THROWS_AS(a.allocate(2 * kMiB, 8), std::length_error);
    CHECK(a.try_allocate(std::numeric_limits<std::size_t>::max(), 64) == nullptr);
    CHECK(State(a) == before);
  }

  TEST_CASE("shrink keeps the live bytes, decommits the rest, and regrowth reads zeros") {
    Arena a(32 * kMiB);
    const std::size_t n = 10 * kMiB + 123;
    fill_pattern(a.grow(n), n, 3);
    const std::size_t keep = 3 * kMiB + 5;
    CHECK_FALSE(a.shrink(keep));
    CHECK(a.size() == keep);
    CHECK(a.committed() == round_up(keep, a.commit_granule()));
    std::vector<unsigned char> expect(keep);
    fill_pattern(expect.data(), keep, 3);
    CHECK(std::memcmp(a.base(), expect.data(), keep) == 0);
    // The bytes after `keep` in the last kept granule are still there (not decommitted) ...
    auto* bytes = reinterpret_cast<unsigned char*>(a.base());
    CHECK(bytes[keep] == static_cast<unsigned char>((keep + 3) * 131u));
    // ... but every decommitted granule reads as zero when committed again.
    a.grow(n - keep);
    const std::size_t first_decommitted = a.commit_granule() * (keep / a.commit_granule() + 1);
    CHECK(
        std::all_of(bytes + first_decommitted, bytes + n, [](unsigned char c) { return c == 0; }));
    CHECK_THROWS_AS(a.shrink(n + 1), std::invalid_argument);
    CHECK_FALSE(a.reset());
    CHECK(a.size() == 0);
    CHECK(a.committed() == 0);
    CHECK(a.grow(5) == a.base());  // reusable
  }

  TEST_CASE("a refused decommit loses nothing and committed() tells the truth") {
    Arena a(8 * kMiB);
    fill_pattern(a.grow(4 * kMiB), 4 * kMiB, 4);
    const std::size_t committed = a.committed();
    test::FaultGuard fault(pal::Op::decommit);
    CHECK(a.shrink(kMiB) == pal::testing::out_of_memory_error());
    CHECK(a.size() == kMiB);
    CHECK(a.committed() == committed);
    std::vector<unsigned char> expect(kMiB);
    fill_pattern(expect.data(), kMiB, 4);
    CHECK(std::memcmp(a.base(), expect.data(), kMiB) == 0);
  }

  TEST_CASE("mark and rewind reuse committed memory with no system call") {
    Arena a(8 * kMiB);
    a.grow(100);
    const std::size_t mark = a.mark();
    void* frame = a.grow(3 * kMiB);
    const std::size_t committed = a.committed();
    const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
    const std::uint64_t decommits = pal::testing::calls(pal::Op::decommit);
    a.rewind(mark);
    CHECK(a.size() == mark);
    CHECK(a.committed() == committed);  // kept for the next frame
    CHECK(a.grow(3 * kMiB) == frame);   // which reuses it
    CHECK(pal::testing::calls(pal::Op::commit) == commits);
    CHECK(pal::testing::calls(pal::Op::decommit) == decommits);
    CHECK_THROWS_AS(a.rewind(a.size() + 1), std::invalid_argument);
  }

  TEST_CASE("commit commits ahead; trim gives it back") {
    Arena a(8 * kMiB);
    a.commit(3 * kMiB);
    CHECK(a.committed() == round_up(3 * kMiB, a.commit_granule()));
    CHECK(a.size() == 0);
    CHECK_THROWS_AS(a.commit(a.reserved() + 1), std::length_error);
    CHECK_FALSE(a.trim(kMiB));
    CHECK(a.committed() == kMiB);
    CHECK_FALSE(a.trim());
    CHECK(a.committed() == 0);
  }
  TEST_CASE("the deprecated reserve/try_reserve still commit, as commit/try_commit do") {
    Arena a(8 * kMiB);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#elif defined(_MSC_VER)
#pragma warning(push)
#pragma warning(disable : 4996)
#endif
    a.reserve(kMiB);
    CHECK(a.committed() == round_up(kMiB, a.commit_granule()));
    CHECK(a.try_reserve(2 * kMiB));
    CHECK_FALSE(a.try_reserve(a.reserved() + 1));
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#elif defined(_MSC_VER)
#pragma warning(pop)
#endif
    CHECK(a.committed() == round_up(2 * kMiB, a.commit_granule()));
    CHECK(a.size() == 0);
  }

  TEST_CASE("reserve backs what Populate asks for: all, the first step, or nothing") {
    if (const char* why = test::rss_unmeasurable()) {
      MESSAGE(why);
      return;
    }
    // With prefault on, each mode backs a different share of a 64 MiB commit; the
    // rest is committed all the same and reads as zero when touched. (pal::current_rss: the
    // working set on Windows, which is what a store per page there makes resident.)
    constexpr std::size_t kCommit = 64 * kMiB;
    struct Case {
      Arena::Populate populate;
      std::size_t min_kib, max_kib;
    };
    // Under huge pages (geometric steps), `all` populates below kHugePageThreshold only: past it
    // each 2 MiB page is backed by its first touch.
    const bool huge_faults = pal::transparent_huge_pages() &&
                             reservoir::memory_limit_headroom() == reservoir::kMemoryLimitOff;
    const std::size_t all_min = huge_faults ? 3 * 1024 : 60 * 1024;
    for (const Case c : {Case{Arena::Populate::all, all_min, 80 * 1024},
                         Case{Arena::Populate::first_step, 0, 8 * 1024},
                         Case{Arena::Populate::none, 0, 4 * 1024}}) {
      ArenaOptions populated;
      populated.prefault = true;
      Arena a(128 * kMiB, populated);
      REQUIRE(a.options().prefault);
      const std::size_t before = pal::current_rss() / 1024;
      a.commit(kCommit, c.populate);
      const std::size_t after = pal::current_rss() / 1024;
      const std::size_t grew = after > before ? after - before : 0;
      INFO("populate " << static_cast<int>(c.populate) << ": RSS grew by " << grew << " KiB");
      CHECK(a.committed() >= kCommit);
      CHECK(grew >= c.min_kib);
      CHECK(grew <= c.max_kib);
      auto* p = static_cast<volatile unsigned char*>(static_cast<void*>(a.base()));
      CHECK(p[kCommit - 1] == 0);
      p[kCommit - 1] = 7;  // committed: writable
      CHECK(p[kCommit - 1] == 7);
    }
  }

  TEST_CASE("prefault and huge-page options give the same arena") {
    ArenaOptions opt;
    opt.prefault = true;
    opt.huge_pages = true;
    opt.commit_granule = 2 * kMiB;
    Arena a(16 * kMiB, opt);
    auto* p = static_cast<unsigned char*>(a.grow(5 * kMiB));
    CHECK(a.committed() == 6 * kMiB);
    CHECK(p[5 * kMiB - 1] == 0);
    fill_pattern(p, 5 * kMiB, 5);
    CHECK(p[77] == static_cast<unsigned char>((77 + 5) * 131u));
  }

  TEST_CASE("a move transfers the reservation; the moved-from arena is empty and reusable") {
    Arena a(kMiB);
    fill_pattern(a.grow(100), 100, 6);
    std::byte* base = a.base();
    Arena b(std::move(a));
    CHECK(b.base() == base);
    CHECK(b.size() == 100);
    CHECK(a.base() == nullptr);
    CHECK(a.reserved() == 0);
    CHECK(a.size() == 0);
    CHECK_THROWS_AS(a.grow(1), std::length_error);
    CHECK(a.try_grow(1) == nullptr);
    a = Arena(2 * kMiB);
    CHECK(a.reserved() >= 2 * kMiB);
    a = std::move(b);
    CHECK(a.base() == base);
    CHECK(b.base() == nullptr);
    swap(a, b);
    CHECK(b.base() == base);
  }

  TEST_CASE("every member is defined on a default-constructed and on a moved-from arena") {
    Arena donor(kMiB);
    donor.grow(10);
    Arena moved_to(std::move(donor));
    Arena fresh;
    for (Arena* a : {&fresh, &donor}) {
      CHECK(a->base() == nullptr);
      CHECK(a->size() == 0);
      CHECK(a->committed() == 0);
      CHECK(a->reserved() == 0);
      CHECK(a->commit_step() == 0);
      CHECK_FALSE(a->reset());
      CHECK_FALSE(a->trim());
      CHECK_FALSE(a->trim(100));
      CHECK_FALSE(a->shrink(0));
      CHECK_THROWS_AS(a->shrink(1), std::invalid_argument);
      a->rewind(a->mark());
      CHECK_NOTHROW(a->commit(0));
      CHECK(a->try_commit(0));
      CHECK_THROWS_AS(a->commit(1), std::length_error);
      CHECK_FALSE(a->try_commit(1));
      CHECK_THROWS_AS(a->grow(1), std::length_error);
      CHECK(a->try_grow(1) == nullptr);
      CHECK(a->try_allocate(8, 8) == nullptr);
      CHECK_FALSE(a->contains(a->base(), 0));
      Arena other;
      swap(*a, other);
      *a = std::move(other);
      CHECK(a->reserved() == 0);
    }
    CHECK(moved_to.size() == 10);
  }

  TEST_CASE("move-assigning an arena that lives inside the target's own memory") {
    // `outer` holds an Arena object in its committed memory; assigning that inner arena to
    // `outer` must take the inner reservation before releasing outer's (which holds the source).
    ArenaOptions no_cache;
    no_cache.reuse_reservation = false;  // released for real: a later read of it faults
    Arena outer(kMiB, no_cache);
    auto* inner =
        std::construct_at(static_cast<Arena*>(outer.allocate(sizeof(Arena), alignof(Arena))), kMiB);
    fill_pattern(inner->grow(100), 100, 9);
    std::byte* inner_base = inner->base();
    outer = std::move(*inner);  // inner's storage is released here; it must not be read after
    CHECK(outer.base() == inner_base);
    CHECK(outer.size() == 100);
    std::vector<unsigned char> expected(100);
    fill_pattern(expected.data(), expected.size(), 9);
    CHECK(std::memcmp(outer.base(), expected.data(), expected.size()) == 0);
  }
}

// ---- guard pages: each access runs in a child process that must die of it --------------------

RESERVOIR_CHILD("arena.below_base") {
  Arena a(kMiB);
  a.grow(10);
  test::expect_fault_here();
  static_cast<volatile std::byte*>(a.base())[-1] = std::byte{1};
  return 0;
}

RESERVOIR_CHILD("arena.past_reservation") {
  Arena a(kMiB);
  a.grow(a.reserved());  // everything committed: only the guard page follows
  test::expect_fault_here();
  static_cast<volatile std::byte*>(a.base())[a.reserved()] = std::byte{1};
  return 0;
}

RESERVOIR_CHILD("arena.past_committed") {
  Arena a(kMiB);
  a.grow(100);
  test::expect_fault_here();
  static_cast<volatile std::byte*>(a.base())[a.committed()] = std::byte{1};
  return 0;
}

RESERVOIR_CHILD("arena.inside_committed") {
  Arena a(kMiB);
  a.grow(100);
  static_cast<volatile std::byte*>(a.base())[a.committed() - 1] = std::byte{1};
  return 0;  // control: the last committed byte is fine
}

TEST_SUITE("arena") {
  TEST_CASE("guard pages fault below the base, past the reservation and past the commit") {
    for (const char* name :
         {"arena.below_base", "arena.past_reservation", "arena.past_committed"}) {
      CAPTURE(name);
      test::ProcessResult r = test::run_child(name);
      CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
    }
    test::ProcessResult ok = test::run_child("arena.inside_committed");
    CHECK(ok.exited);
    CHECK(ok.exit_code == 0);
  }
}
