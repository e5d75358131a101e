// reservoir/detail/concurrent_solo.hpp - ConcurrentCore's solo mode, inline part: the sections
// that announce the owner's claims and publishes, its trivial append, claim and publish. Its end
// (the process-wide barrier) is in src/concurrent_solo.cpp.
//
// While only one thread (the owner) has appended, its claims and publishes are plain loads and
// stores: no other thread writes the counters or the marks. The owner announces each claim and
// each publish in solo_depth_ and then checks mode_ with only a compiler barrier between; the
// first other thread to append sets mode_ to kRevoking, issues a process-wide barrier (which
// orders the owner's accesses as a full fence would have), waits until no solo claim or publish is
// in progress, counts the claims solo mode made (solo_end_, where the shared claims start) and
// sets kShared for good. Either the owner sees kRevoking and goes on the shared way, or the other
// thread sees its claim or publish in progress and waits for it: never both at once.
// Constructions are outside these sections, so nobody waits for one. A trivial copy's append
// (append_solo) has no section: its claim is the announcement, and the owner waits instead.
//
// A child forked while a thread of its parent was in a solo section or ending solo mode has no
// such thread: solo_generation_ and mode_'s kRevoking carry the fork generation of the process
// that wrote them, so that the child's threads neither wait for it (a section of another
// generation is not in progress here) nor let a revocation of another generation hang (one of
// them takes it over).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <reservoir/detail/concurrent_core.hpp>
#include <reservoir/detail/process_identity.hpp>

namespace reservoir::detail {

// One claim or one publish: solo or shared, decided when it starts.
class ConcurrentCore::Section {
 public:
  // For a claim: a thread that is not the owner ends solo mode first (or waits while another
  // thread ends it). Throws std::system_error if the OS refuses the barrier that ends it.
  struct ForClaim {
    const char* call;  // for the message of a refused barrier
  };
  Section(ConcurrentCore& core, ForClaim claim) : core_(&core) {
    if (core.mode_.load(std::memory_order_acquire) == kShared) return;
    const void* const me = thread_token();
    while (core.mode_.load(std::memory_order_acquire) != kShared) {
      const void* owner = core.owner_.load(std::memory_order_relaxed);
      if (owner == nullptr &&
          core.owner_.compare_exchange_strong(owner, me, std::memory_order_relaxed))
        owner = me;
      if (owner == me) {
        if (enter_as_owner()) return;
        // Solo mode is ending: shared claims start where the thread ending it counts the solo
        // ones, once it has (or solo mode goes on, if its barrier was refused).
        (void)core.wait_while_revoking();
        continue;
      }
      core.end_solo(claim.call);
    }
  }
  // For a publish: a thread that is not the owner claimed in shared mode, which never ends.
  struct ForPublish {};
  Section(ConcurrentCore& core, ForPublish) noexcept : core_(&core) {
    if (core.mode_.load(std::memory_order_acquire) != kShared &&
        core.owner_.load(std::memory_order_relaxed) == thread_token())
      (void)enter_as_owner();  // a publish needs no wait: it does not touch the claims
  }
  ~Section() {
    if (solo_) core_->solo_depth_.store(depth_, std::memory_order_release);
  }
  Section(const Section&) = delete;
  Section& operator=(const Section&) = delete;
  bool solo() const noexcept { return solo_; }

 private:
  // True: in solo mode, announced. False: solo mode is ending or has ended.
  bool enter_as_owner() noexcept {
    unsigned depth = core_->solo_depth_.load(std::memory_order_relaxed);
    const std::uint32_t generation = fork_generation();
    if (core_->solo_generation_.load(std::memory_order_relaxed) != generation) {
      // Sections counted under another generation belong to threads of a parent process,
      // which do not exist here: none is in progress.
      core_->solo_generation_.store(generation, std::memory_order_relaxed);
      depth = 0;
    }
    core_->solo_depth_.store(depth + 1, std::memory_order_relaxed);
    // Paired with end_solo's process-wide barrier: a full fence between the store above and
    // the load below, paid by the thread that ends solo mode.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (core_->mode_.load(std::memory_order_relaxed) == kSolo) {
      solo_ = true;
      depth_ = depth;
      return true;
    }
    // Ending: go on the shared way. No other thread appends before it has seen this store.
    core_->solo_depth_.store(depth, std::memory_order_release);
    return false;
  }

  ConcurrentCore* core_;
  bool solo_ = false;
  unsigned depth_ = 0;
};

// No section: the claim itself announces the append. It is checked before it is made, as it
// cannot be taken back (the thread ending solo mode may have counted it), and solo mode is
// checked after it, with end_solo's barrier between the two: either that thread counts the claim,
// or the owner sees solo mode ending and waits for its decision (solo_claim_counted). Three
// stores: the claim, the element, published_. Declared `inline`, as an in-class definition would
// be: GCC weighs the keyword, and this is the owner's whole append, for the caller's loop.
template <class Construct>
inline ConcurrentCore::size_type ConcurrentCore::append_solo(Construct&& construct) noexcept {
  if (mode_.load(std::memory_order_relaxed) != kSolo ||
      owner_.load(std::memory_order_relaxed) != thread_token())
    return 0;
  const size_type i = solo_claimed_.load(std::memory_order_relaxed);
  if (published_.load(std::memory_order_relaxed) != i ||
      i >= capacity_.load(std::memory_order_relaxed))
    return 0;
  solo_claimed_.store(i + 1, std::memory_order_relaxed);
  // Paired with end_solo's process-wide barrier: a full fence between the store above and the
  // load below, paid by the thread that ends solo mode.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (mode_.load(std::memory_order_relaxed) != kSolo && !solo_claim_counted(i)) return 0;
  construct(i);
  // published_ is i, and only this thread moves it from there: readers move it over ready marks,
  // and index i has none. Every element below i was written by this thread, so a plain release
  // store publishes them all, in solo mode or after it.
  published_.store(i + 1, std::memory_order_release);
  wake_waiters();
  return i + 1;
}

// For append_solo, which has claimed index i and then seen solo mode ending: waits until it has
// ended (or the barrier was refused) and says whether the claim stands. If not, the thread that
// ended it did not count the claim, and the shared claims start at i.
inline bool ConcurrentCore::solo_claim_counted(size_type i) noexcept {
  // kSolo: the barrier was refused and no thread has counted the claims; a thread ending solo
  // mode from now on sees this one (stored before the load that saw kSolo).
  return wait_while_revoking() == kSolo || solo_end_ > i;
}

// The owner's claim in solo mode: as claim_shared, with a plain store of solo_claimed_.
inline ConcurrentCore::size_type ConcurrentCore::claim_solo(ClaimSite site, size_type n,
                                                            bool partial,
                                                            size_type* claimed_count) {
  const size_type i = solo_claimed_.load(std::memory_order_relaxed);
  size_type k = n;
  if (partial) {
    k = (std::min)(n, max_size_ - i);  // solo_claimed_ <= capacity_ <= max_size_
    if (k == 0) throw_full(site.call);
  }
  const size_type cap = capacity_.load(std::memory_order_relaxed);
  if (i > cap || k > cap - i) commit_for(site, i, k);  // throws, or capacity_ >= i + k
  solo_claimed_.store(i + k, std::memory_order_relaxed);
  if (claimed_count != nullptr) *claimed_count = k;
  return i;
}

// The owner's publish in solo mode: a release store of published_, past any ready block after it.
// A block is out of order only when an append nested in another one's construction (the owner
// appending from make() or from a constructor) finishes first; the outer one publishes it. The
// store cannot undo a reader's advance: readers move published_ only over ready marks, and the
// block that starts at published_ has none while its owner publishes it this way.
inline void ConcurrentCore::publish_solo(size_type i, size_type n, bool each) noexcept {
  if (published_.load(std::memory_order_relaxed) != i) {
    mark_ready(i, n, each);
  } else {
    published_.store(ready_end(i + n, solo_claimed_.load(std::memory_order_relaxed)),
                     std::memory_order_release);
  }
  wake_waiters();
}

}  // namespace reservoir::detail
