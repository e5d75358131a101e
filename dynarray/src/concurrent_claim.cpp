// ConcurrentDynArray's claims past the fast path: the block claims' compare-and-swap and the
// one-index claims past the headroom, which commit ahead, wait for a commit or are undone by a
// closing (concurrent_closing.cpp). The fast path is inline in detail/concurrent_claim.hpp.
#include <reservoir/detail/concurrent_claim.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <system_error>

#include <reservoir/detail/spin.hpp>
#include <reservoir/pal.hpp>

#include "commit_lock.hpp"

namespace reservoir::detail {

// Claims a block with one CAS (see claim()), committing more memory first if needed. A lost CAS
// means another thread is appending right now: it backs off (spinning for exponentially more CPU
// pauses, up to kMaxSpin, then yielding the CPU), so that the winner goes on appending with the
// counter's cache line in its own cache rather than the two trading the line for every element.
ConcurrentCore::size_type ConcurrentCore::claim_shared(ClaimSite site, size_type n, bool partial,
                                                       size_type* claimed_count) {
  for (;;) {
    std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
    size_type k = n;
    unsigned spins = kFirstBackoff;
    for (;;) {
      // Closed: one-index claims are being undone after a refused commit or a full array; a
      // block claims nothing meanwhile and reports what closed them.
      if ((word & kClosed) != 0) {
        if (reopen_inherited()) {
          word = claimed_.load(std::memory_order_seq_cst);
          continue;
        }
        throw_closed(site, static_cast<size_type>(word & kCountMask));
      }
      const auto i = static_cast<size_type>(word);
      if (partial) {
        k = i < max_size_ ? (std::min)(n, max_size_ - i) : 0;
        if (k == 0) throw_full(site.call);
      }
      const size_type cap = capacity_.load(std::memory_order_seq_cst);
      if (i > cap || k > cap - i) break;
      // Strong: a failure means another thread claimed. The marks and published_ carry the
      // elements; seq_cst orders the claim with the capacity loaded (see claim_one_slow).
      if (claimed_.compare_exchange_strong(word, word + k, std::memory_order_seq_cst)) {
        if (claimed_count != nullptr) *claimed_count = k;
        return i;
      }
      ++claim_counts().failed_cas;
      if (spins > kMaxSpin) {
        pal::yield_thread();
      } else {
        for (unsigned spin = 0; spin < spins; ++spin)
          cpu_pause();
        spins *= 2;
      }
      word = claimed_.load(std::memory_order_seq_cst);  // fresh after the wait
    }
    // throws, or capacity_ >= i + k (or another thread did it)
    commit_for(site, static_cast<size_type>(word), k);
  }
}

// One-index claims past the fast path. Why a claim is never undone once it is below capacity:
// the claims close (kClosed set in claimed_) only under the commit lock, at C = capacity_ then,
// and while they are closed nothing commits (every commit checks kClosed under the lock). A
// closing undoes exactly the one-index claims at or past C: those made before it whose index is
// at or past C, and every claim made while closed (it sees kClosed in its own ticket). Each such
// claim leaves (takes 1 off the count), and the last one to leave sets claimed_ back to C, open:
// so the claims reopen only after every undone claim has seen that it was. Blocks never claim
// past capacity (their compare-and-swap checks it first), so no block is at or past C.
// A claim with ticket t < C is kept. For the fast path's check t < cap_before to imply t < C,
// cap_before (loaded before the fetch_add) must not exceed C: capacity_ only grows, its stores
// are seq_cst and made under the lock, and a store after the closing follows it in the single
// total order, which the ticket's fetch_add precedes (it was not closed).
ConcurrentCore::size_type ConcurrentCore::claim_one_slow(ClaimSite site, std::uint64_t ticket,
                                                         size_type cap_before) {
  ClaimCounts& counts = claim_counts();
  ++counts.single;
  if ((ticket & kClosed) != 0) {  // claimed while closed: undone at once
    // Closed by a thread of a parent process: reopened, and this claim was discarded.
    if (reopen_inherited()) return claim_one(site);
    ++counts.refused;
    const auto i = static_cast<size_type>(ticket & kCountMask);
    try {
      throw_closed(site, i);
    } catch (...) {
      leave_closed(ticket & kEpochMask);  // after reading why: the claims may close again then
      throw;
    }
  }
  const auto i = static_cast<size_type>(ticket);
  if (i < cap_before) {  // in the headroom: kept; commit the next step before it is needed
    commit_ahead(site, cap_before);
    return i;
  }
  ++counts.past_capacity;
  // Kept once capacity_ covers it; undone if the claims are closed while it is past capacity_
  // (then its own closing has not reopened, as it has not left). claimed_ is loaded before
  // capacity_, so that a closing seen is not newer than the capacity compared with.
  std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  if (i < capacity_.load(std::memory_order_seq_cst)) return i;
  if ((word & kClosed) == 0) {
    const CommitLock lock(commit_lock_);  // asleep while another thread commits
    word = claimed_.load(std::memory_order_seq_cst);
    const size_type cap = capacity_.load(std::memory_order_seq_cst);
    if (i < cap) return i;
    if ((word & kClosed) == 0) {
      // Open and past capacity: commit for every one-index claim handed out (up to max_size()),
      // or close the claims if that is refused or this index is past max_size().
      const size_type want = static_cast<size_type>((std::min)(
          static_cast<std::uint64_t>(max_size_), (std::max)(std::uint64_t{i} + 1, word)));
      unsigned char reason = kClosedFull;
      std::error_code error;
      if (want > cap) {
        try {
          commit_locked(site, want);
        } catch (const OsAllocationError& e) {
          reason = kClosedRefused;
          error = e.code();
        } catch (...) {  // std::bad_alloc from a message: refused too
          reason = kClosedRefused;
          error = std::make_error_code(std::errc::not_enough_memory);
        }
      }
      if (i < capacity_.load(std::memory_order_seq_cst)) return i;
      word = close_claims(reason, error);
    }
  }
  ++counts.refused;
  try {
    throw_closed(site, i);
  } catch (...) {
    leave_closed(word & kEpochMask);  // the closing seen (or made) while past capacity_
    throw;
  }
}

std::optional<ConcurrentCore::size_type> ConcurrentCore::try_claim(ClaimSite site) noexcept {
  try {
    return claim(site);
  } catch (...) {  // length_error, OsAllocationError or a refused barrier: all are "no"
    return std::nullopt;
  }
}

}  // namespace reservoir::detail
