// reservoir/detail/concurrent_reports.hpp - what ConcurrentDynArray tells beyond its results: the
// message of a Writer's unreported loss, and the calling thread's counts of the claims that left
// the fast path (for tests and the bench).
#pragma once

#include <cstddef>
#include <cstdint>

namespace reservoir::detail {

// A Writer's destructor could not append `count` buffered elements that no flush() had reported,
// and its writer was not made to accept the loss: prints to stderr which array (its address), how
// many and why (`why`: the exception its final flush threw, or nullptr when the array is full at
// `max_size`), and aborts, in every build of the library. Whether to call it is decided inline,
// in the user's translation unit (ConcurrentDynArray::Writer::~Writer).
[[noreturn]] void writer_lost_abort(const void* array, std::size_t count, std::size_t max_size,
                                    const char* why) noexcept;

// What the calling thread's shared-mode claims did beyond their one atomic read-modify-write,
// counted on those slow paths only (the fast paths count nothing): for tests and the bench.
struct ClaimCounts {
  std::uint64_t single = 0;         // one-index claims that left the fast path (for the next)
  std::uint64_t failed_cas = 0;     // block claims' lost compare-and-swaps (each one a retry)
  std::uint64_t commits_ahead = 0;  // one-index claims that committed the next step ahead
  std::uint64_t past_capacity = 0;  // one-index claims that had to wait for or make a commit
  std::uint64_t refused = 0;        // one-index claims undone by a refused commit or a full array
  std::uint64_t paced = 0;          // one-index claims after which the thread paused (pacing)
  std::uint64_t turns = 0;          // times the thread took the turn to claim streaks (pacing)
  std::uint64_t unpaid = 0;         // pauses that bought no streak, so pacing stopped a while
};
ClaimCounts& claim_counts() noexcept;  // the calling thread's

}  // namespace reservoir::detail
