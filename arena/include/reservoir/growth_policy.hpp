// reservoir/growth_policy.hpp - the public face of how an Arena's committed prefix grows: the
// commit-step constants and whether huge pages are in effect (their mode is in settings.hpp). The
// policy itself, one function every commit asks, is the library's own (arena/src/growth.hpp); its
// rules are stated once in docs/big-arrays.md#commit-steps. Included by <reservoir/arena.hpp>.
#pragma once

#include <cstddef>

#include <reservoir/settings.hpp>

namespace reservoir {

namespace detail {
// The huge page: 2 MiB on x86-64 and arm64 with 4 KiB base pages, the one name of that size.
// Large reservations start on it, large pool slots are aligned to it and kept apart by it, and the
// quantities below that are 2 MiB because a huge page is derive from it. Quantities that are
// 2 MiB for reasons of their own keep their own names (kUnreadCommitBytes: a quarter of the
// least memory-limit margin; kFirstChunkBytes: a pool class's first chunk).
inline constexpr std::size_t kHugePageSize = std::size_t{2} << 20;
}  // namespace detail

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
// from here on a step is at least this large. It is also what a parked reservation keeps
// committed: the doubling steps a new arena then takes with no commit call.
inline constexpr std::size_t kDoublingStepLimit = std::size_t{64} * 1024;

// The largest commit step: 128 MiB (32768 granules of 4 KiB). With geometric steps a step
// commits as much as is already committed, so an array grows to 128 MiB in 16 commit calls and
// then in 128 MiB steps: 1e8 ints (381 MiB) in 18. Committing costs no RAM on Linux (pages are
// backed on first touch); on Windows it charges the commit limit, which this cap bounds.
inline constexpr std::size_t kDefaultMaxCommitStep = std::size_t{128} << 20;

// The most one commit step backs with RAM at once (the bounded policy's cap, and what
// Populate::first_step backs): one huge page, so the append that pays for a populated step waits
// for no more population than the first touch of a huge page costs.
inline constexpr std::size_t kPopulatedStepLimit = detail::kHugePageSize;

// The largest bounded step (the policy of populated steps: prefault on without huge pages, or a
// memory limit in force): 256 KiB, 64 pages of 4 KiB. Each such step is populated by the append
// that needs it, so this bounds what one append waits for to 64 pages' population, about what one
// page fault can cost where the host stalls; and a step fits in a core's L2 cache many times over,
// so the appends that follow write the lines the population has just zeroed.
inline constexpr std::size_t kBoundedStepLimit = std::size_t{256} << 10;
static_assert(kBoundedStepLimit >= kDoublingStepLimit && kBoundedStepLimit <= kPopulatedStepLimit);

// With huge_pages, the offset from which the reservation is advised for transparent huge pages.
// Below it an array uses 4 KiB pages only, so one that holds less than 4 MiB has the RSS it had
// without huge pages; past it RSS is round_up(size, 2 MiB) at most: at most 2 MiB, under 1/2 of
// the data at 4 MiB and under 1/16 from 32 MiB up.
inline constexpr std::size_t kHugePageThreshold = 2 * detail::kHugePageSize;

}  // namespace reservoir
