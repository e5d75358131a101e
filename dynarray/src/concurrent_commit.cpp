// Committing more of ConcurrentDynArray's memory, under the commit lock: the elements' and the
// ready marks' arenas together, ahead of need when no other thread is committing.
#include <reservoir/detail/concurrent_core.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "commit_lock.hpp"

namespace reservoir::detail {

// Commits the next step ahead if no other thread is committing (never waits, never throws).
void ConcurrentCore::commit_ahead(ClaimSite site, size_type cap_before) noexcept {
  if (capacity_.load(std::memory_order_relaxed) != cap_before ||
      commit_lock_.load(std::memory_order_relaxed) != 0 || cap_before >= max_size_ ||
      ahead_refused_at_.load(std::memory_order_relaxed) == cap_before)
    return;  // committed since, being committed, nothing left, or refused at this capacity
  const CommitLock lock(commit_lock_, CommitLock::TryOnly{});
  if (!lock.owned()) return;  // another thread is committing: it never waits for it
  ++claim_counts().commits_ahead;
  if (capacity_.load(std::memory_order_relaxed) != cap_before ||
      (claimed_.load(std::memory_order_seq_cst) & kClosed) != 0)
    return;
  try {
    commit_locked(site, cap_before + 1);  // the arenas commit a whole step
  } catch (...) {  // refused: the claim that needs it will meet the refusal itself
    ahead_refused_at_.store(cap_before, std::memory_order_relaxed);
  }
}

// Commits memory for indices [i, i + n): once, whichever thread gets here first. Throws what
// closed the claims if they are closed (nothing commits then: see claim_one_slow).
void ConcurrentCore::commit_for(ClaimSite site, size_type i, size_type n) {
  const CommitLock lock(commit_lock_);
  const size_type cap = capacity_.load(std::memory_order_relaxed);
  if (i <= cap && n <= cap - i) return;  // another thread did it
  if (i > max_size_ || n > max_size_ - i) throw_full(site.call);
  const std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  if ((word & kClosed) != 0) throw_closed(site, i);  // nothing commits while closed
  commit_locked(site, i + n);
}

// Commits indices up to `end` (> capacity_, <= max_size_, else std::length_error): the commit
// lock is held, the claims are open.
void ConcurrentCore::commit_locked(ClaimSite site, size_type end) {
  // Both arenas reach their step ends; the capacity is what both can hold. Ready bytes come
  // from fresh or decommitted memory, so they read as zero (not ready).
  if (end > max_size_) throw_full(site.call);
  // A refusal names the user's call (site.call), composed once from the arena's ArenaError.
  const auto commit = [&site](Arena& arena, std::size_t bytes, Arena::Populate populate) {
    if (ArenaError error; !arena.try_commit(bytes, populate, &error)) {
      error.raise(std::string("ConcurrentDynArray::") + site.call);
    }
  };
  // Strong guarantee on failure.
  commit(data_arena_, data_offset_ + end * site.element_size, Arena::Populate::all);
  const size_type data_cap =
      (std::min)((data_arena_.committed() - data_offset_) / site.element_size, max_size_);
  // The marks are written only when blocks finish out of order, so while one thread appends
  // alone their pages are never touched and cost no RAM and no faults: commit them without
  // prefault. Once a block has finished out of order, more marks will be written, and the new
  // pages are backed here in one call rather than by a page fault in an appending thread.
  const auto populate =
      out_of_order_.load(std::memory_order_relaxed) ? Arena::Populate::all : Arena::Populate::none;
  // On failure data_arena_ keeps a step: harmless, unclaimed.
  commit(ready_arena_, data_cap, populate);
  const size_type flags = (std::min)(ready_arena_.committed(), max_size_);
  // No thread reads a mark at or above the old capacity before the release store below
  // publishes it.
  capacity_.store((std::min)(data_cap, flags), std::memory_order_seq_cst);
}

}  // namespace reservoir::detail
