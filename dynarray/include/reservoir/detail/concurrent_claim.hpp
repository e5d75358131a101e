// reservoir/detail/concurrent_claim.hpp - ConcurrentCore's claims, inline part: claim() and the
// one-index shared claim (a fetch_add and its pacing), small enough for the caller's loop to
// inline. The claims past capacity and the block claims are in src/concurrent_claim.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <reservoir/detail/concurrent_core.hpp>
#include <reservoir/detail/concurrent_solo.hpp>

namespace reservoir::detail {

inline ConcurrentCore::size_type ConcurrentCore::claim(ClaimSite site, size_type n, bool partial,
                                                       size_type* claimed_count) {
  // A one-index claim in shared mode first, small enough for the caller's loop to inline (the
  // section below does nothing more in shared mode).
  if (n == 1 && mode_.load(std::memory_order_acquire) == kShared) {
    if (claimed_count != nullptr) *claimed_count = 1;
    return claim_one(site);
  }
  return claim_in_section(site, n, partial, claimed_count);
}

inline ConcurrentCore::size_type ConcurrentCore::claim_in_section(ClaimSite site, size_type n,
                                                                  bool partial,
                                                                  size_type* claimed_count) {
  const Section section(*this, Section::ForClaim{site.call});
  if (section.solo()) return claim_solo(site, n, partial, claimed_count);
  if (n == 1) {
    if (claimed_count != nullptr) *claimed_count = 1;
    return claim_one(site);
  }
  return claim_shared(site, n, partial, claimed_count);
}

// One index, shared mode: one fetch_add, which never fails, so threads that claim at once never
// retry (a lost compare-and-swap is a retry, and retries grow with the thread count). The
// capacity is checked after the claim, against a value loaded before it (the proof that such a
// claim is never undone is at claim_one_slow). Past capacity minus a headroom the claim takes the
// slow path, which commits ahead, waits for a commit or undoes the claim.
//
// Pacing: a ticket that is not the thread's previous one + 1 means another thread cut into its
// streak. Claims that interleave index by index trade the counter's, the elements' and the marks'
// cache lines for every append, so one thread, the one holding the turn (runner_), goes on while
// each other thread that was cut into pauses before its next claim (after publishing, so that
// nothing waits for it), and after kPacedTurn such claims in a row it takes the turn (the bounds
// are in spin.hpp; note_cut in src/concurrent_pacing.cpp). Streaks form, and no thread is held
// back for more than a bounded spin: no append waits for another thread to run.
inline ConcurrentCore::size_type ConcurrentCore::claim_one(ClaimSite site) {
  PaceState& pace = t_pace;
  const bool known = pace.core == this;
  if (known && pace.owed != 0) pay_pace(pace);
  const size_type cap = capacity_.load(std::memory_order_seq_cst);
  const std::uint64_t ticket = claimed_.fetch_add(1, std::memory_order_seq_cst);
  if (!known) {
    pace = PaceState{this, ticket};
  } else {
    if (ticket != pace.last + 1) {
      note_cut(pace, ticket);
    } else if (pace.paced != 0) {
      pace.paced = 0;  // a streak: nobody cut in
    }
    pace.last = ticket;
  }
  if (ticket < cap - (std::min)(cap >> kAheadShift, kAheadMost))
    return static_cast<size_type>(ticket);
  return claim_one_slow(site, ticket, cap);
}

}  // namespace reservoir::detail
