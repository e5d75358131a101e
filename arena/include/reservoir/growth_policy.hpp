// reservoir/growth_policy.hpp - how an Arena's committed prefix grows: the commit-step constants,
// whether huge pages are in effect (their mode is in settings.hpp), and the policy itself, one
// function (detail::plan_step) that every commit of an Arena asks. Included by
// <reservoir/arena.hpp>.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>

#include <reservoir/settings.hpp>

namespace reservoir {

// How much of a commit to back with RAM at once when ArenaOptions::prefault is on
// (Arena::Populate).
enum class Populate {
  // All of it: for bytes about to be written (an append of known length).
  all,
  // Only the next kPopulatedStepLimit (2 MiB) past the committed prefix; the rest is committed
  // but backed on first touch, as std::vector::reserve is under overcommit. For an upper bound
  // that may never be reached: DynArray::reserve(1e9 ints) costs 2 MiB of RSS, not 4 GB.
  first_step,
  // None of it: committed, backed on first touch, as if prefault were off for this call. For
  // memory that may never be written.
  none,
};

// The huge-page mode is a setting: HugePages, set_huge_pages() and huge_pages() (settings.hpp).

// True if an arena with ArenaOptions::huge_pages gets huge pages here under the current mode.
bool huge_pages_in_effect() noexcept;

// The first commit step: one page (4 KiB, or the page size where pages are larger). A new array
// pays for its first step in page faults and RAM (with prefault, every page of it at once), so a
// program with thousands of small arrays pays one page for each, not 16; doubling steps
// (kDoublingStepLimit) still reach 64 KiB in five commit calls.
inline constexpr std::size_t kDefaultCommitGranule = 4096;

// Below this many committed bytes a commit step doubles the committed prefix under either policy;
// from here on a step is at least this large. It is also the smallest step worth a populate call
// (MADV_POPULATE_WRITE): smaller steps are backed by one store per page alone, a few page faults
// that cost less than the call.
inline constexpr std::size_t kDoublingStepLimit = std::size_t{64} * 1024;

// The largest commit step: 128 MiB (32768 granules of 4 KiB). With geometric steps a step
// commits as much as is already committed, so an array grows to 128 MiB in 16 commit calls and
// then in 128 MiB steps: 1e8 ints (381 MiB) in 18. Committing costs no RAM on Linux (pages are
// backed on first touch); on Windows it charges the commit limit, which this cap bounds.
inline constexpr std::size_t kDefaultMaxCommitStep = std::size_t{128} << 20;

// The most one commit step backs with RAM at once (the bounded policy's cap, and what
// Populate::first_step backs): 2 MiB, the x86-64 and arm64 huge-page size, so the append that
// pays for a step waits for at most 2 MiB of page population.
inline constexpr std::size_t kPopulatedStepLimit = std::size_t{2} << 20;

// With huge_pages, the offset from which the reservation is advised for transparent huge pages.
// Below it an array uses 4 KiB pages only, so one that holds less than 4 MiB has the RSS it had
// without huge pages; past it RSS is round_up(size, 2 MiB) at most: at most 2 MiB, under 1/2 of
// the data at 4 MiB and under 1/16 from 32 MiB up.
inline constexpr std::size_t kHugePageThreshold = std::size_t{4} << 20;

namespace detail {

// What the growth policy knows of an arena when it commits.
struct GrowthState {
  std::size_t committed = 0;
  std::size_t reserved = 0;
  std::size_t granule = 0;   // the first step (0: an empty arena, which has no step)
  std::size_t max_step = 0;  // the largest step, whole granules
  bool prefault = true;
  bool huge_pages = false;      // ArenaOptions::huge_pages, and huge_pages_in_effect()
  bool limit_in_force = false;  // respect_memory_limit, and a memory limit in force
};

// One commit step as the policy plans it.
struct PlannedStep {
  std::size_t step = 0;       // the step size (Arena::commit_step())
  std::size_t target = 0;     // the committed length after it (<= committed: nothing to commit)
  std::size_t populated = 0;  // bytes of it populated now
  std::size_t charge = 0;     // bytes of it charged against the memory limit and the machine
  std::size_t must_back = 0;  // bytes of it the machine must back: populated now or written next
  bool geometric = false;     // the geometric policy (a refused step may be retried smaller)
  bool advise_huge = false;   // it reaches past kHugePageThreshold first: advise huge pages
};

// The growth policy: the step that commits past `bytes` (a request of `populate`). With
// `retry`, the smallest step that holds the request, to try once a geometric step was refused:
// target 0 where that saves less than kPopulatedStepLimit. ArenaOptions::max_commit_step
// describes the two policies:
//   - geometric where committing is a permission change only (prefault off, or huge pages in
//     effect) and no memory limit is in force: each step doubles the committed prefix;
//   - bounded otherwise: doubling up to kDoublingStepLimit, then at least that and at least
//     committed/8, never more than kPopulatedStepLimit.
constexpr PlannedStep plan_step(const GrowthState& s, std::size_t bytes, Populate populate,
                                bool retry = false) noexcept {
  PlannedStep p;
  const std::size_t g = s.granule;
  if (g == 0) return p;
  p.geometric = !s.limit_in_force && (!s.prefault || s.huge_pages);
  // 1. The step: a power-of-two number of granules, at most max_step.
  const std::size_t held = s.committed / g;
  if (p.geometric) {
    p.step = (std::min)(g * std::bit_floor((std::max<std::size_t>)(held, 1)), s.max_step);
  } else {
    std::size_t step = g;  // at least one granule; small arenas double; large ones take 1/8
    if (held > 1)
      step = (std::max)(step, g * std::bit_floor((std::min)(
                                      held, (std::max)(kDoublingStepLimit / g, std::size_t{1}))));
    if (const std::size_t eighth = s.committed / 8 / g; eighth > 1)
      step = (std::max)(step, g * std::bit_floor(eighth));
    const std::size_t cap = (std::max)(g, kPopulatedStepLimit - kPopulatedStepLimit % g);
    p.step = (std::min)({step, cap, s.max_step});
  }
  // 2. The target: whole steps (whole granules for a retry) past `bytes`, capped at the end.
  const auto target_in = [&](std::size_t unit) {
    const std::size_t rem = bytes % unit;
    if (rem == 0) return bytes < s.reserved ? bytes : s.reserved;
    if (bytes > static_cast<std::size_t>(-1) - (unit - rem)) return s.reserved;
    return (std::min)(bytes + (unit - rem), s.reserved);
  };
  p.target = target_in(p.step);
  if (retry) {
    const std::size_t least = target_in(g);
    p.target = least < p.target && p.target - least >= kPopulatedStepLimit ? least : 0;
  }
  if (p.target <= s.committed) return p;
  // 3. What to populate now: all of the step, its first kPopulatedStepLimit, or nothing. Under huge
  //    pages nothing past kHugePageThreshold (first touches map 2 MiB pages there, one fault
  //    each), and below it a doubling step backs at most half of itself beyond what was asked
  //    for, so RSS stays within 1.5x of the bytes in use. (Below kDoublingStepLimit an arena
  //    does not ask whether huge pages are in effect, so its steps are populated whole, as
  //    without them.)
  const std::size_t len = p.target - s.committed;
  const std::size_t asked = (std::min)(len, bytes > s.committed ? bytes - s.committed : 0);
  const std::size_t first = (std::min)(len, kPopulatedStepLimit);
  p.populated = populate == Populate::all ? len : populate == Populate::none ? 0 : first;
  const bool huge = s.huge_pages && s.reserved > kHugePageThreshold;
  if (huge && p.geometric) {
    const std::size_t below = s.committed < kHugePageThreshold
                                  ? (std::min)(p.target, kHugePageThreshold) - s.committed
                                  : 0;
    p.populated = (std::min)({p.populated, below, (std::max)(asked, len / 2)});
  }
  // Without prefault nothing is populated ahead, except under a memory limit: there every step
  // is populated as it is charged, so that the next reading of the usage sees it.
  if (!s.prefault && !s.limit_in_force) p.populated = 0;
  // 4. What to charge: what is populated now or (all) written next; untouched pages cost
  //    nothing. A geometric step is taken only where no limit is in force, and there the charge
  //    is the machine check alone, of the bytes asked for.
  p.charge = p.geometric  ? (std::max)(p.populated, populate == Populate::all ? asked : 0)
             : s.prefault ? p.populated
             : populate == Populate::none ? 0
             : populate == Populate::all  ? len
                                          : first;
  // 5. What the machine must back for it: all of a step being filled (appends, Populate::all),
  //    what a reserve populates (Populate::first_step), nothing for Populate::none.
  p.must_back = (std::max)(p.charge, populate == Populate::all    ? len
                                     : populate == Populate::none ? std::size_t{0}
                                                                  : first);
  p.advise_huge = huge && s.committed <= kHugePageThreshold && p.target > kHugePageThreshold;
  return p;
}

}  // namespace detail
}  // namespace reservoir
