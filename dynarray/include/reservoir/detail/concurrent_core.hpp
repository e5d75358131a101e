// reservoir/detail/concurrent_core.hpp - what ConcurrentDynArray<T> does that does not depend on T:
// the two reservations (slots and ready marks), the claim and publish protocol, solo mode and the
// commit of more slots. The element type's size is passed in where memory is committed. Hot paths
// (a claim or a publish in solo mode, an uncontended shared one) are inline; everything else is
// compiled once into the library (concurrent_core.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>

#include <reservoir/arena.hpp>
#include <reservoir/detail/spin.hpp>

namespace reservoir::detail {

// A Writer's destructor destroyed `count` buffered elements that no flush() had reported (the
// array's max_size() is given for the message). A library built without NDEBUG prints that to
// stderr and aborts; a release library returns (the loss is counted in dropped()).
void writer_dropped_unreported(std::size_t count, std::size_t max_size) noexcept;
// Whether writer_dropped_unreported aborts in this build of the library.
bool writer_loss_aborts() noexcept;

// What the calling thread's shared-mode claims did beyond their one atomic read-modify-write,
// counted on those slow paths only (the fast paths count nothing): for tests and the bench.
struct ClaimCounts {
  std::uint64_t single = 0;         // one-slot claims that left the fast path (for the next)
  std::uint64_t failed_cas = 0;     // block claims' lost compare-and-swaps (each one a retry)
  std::uint64_t commits_ahead = 0;  // one-slot claims that committed the next step ahead
  std::uint64_t past_capacity = 0;  // one-slot claims that had to wait for or make a commit
  std::uint64_t refused = 0;        // one-slot claims undone by a refused commit or a full array
  std::uint64_t paced = 0;          // one-slot claims after which the thread paused (pacing)
  std::uint64_t turns = 0;          // times the thread took the turn to claim runs (pacing)
  std::uint64_t unpaid = 0;         // pauses that bought no run, so pacing stopped a while
};
ClaimCounts& claim_counts() noexcept;  // the calling thread's

// Atomic access to a plain byte (ConcurrentDynArray's ready marks): loads acquire, stores release.
#if defined(__cpp_lib_atomic_ref)
inline constexpr bool kByteAtomicsLockFree =
    std::atomic_ref<unsigned char>::is_always_lock_free &&
    std::atomic_ref<unsigned char>::required_alignment == 1;
inline unsigned char load_byte_acquire(unsigned char* p) noexcept {
  return std::atomic_ref<unsigned char>(*p).load(std::memory_order_acquire);
}
inline void store_byte_release(unsigned char* p, unsigned char v) noexcept {
  std::atomic_ref<unsigned char>(*p).store(v, std::memory_order_release);
}
#else  // standard libraries without std::atomic_ref (libc++ before 19): the GCC/Clang builtins
inline constexpr bool kByteAtomicsLockFree = __atomic_always_lock_free(1, 0);
inline unsigned char load_byte_acquire(unsigned char* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline void store_byte_release(unsigned char* p, unsigned char v) noexcept {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
#endif

// The number of forks this process descends from: bumped in each child (a pthread_atfork
// handler, registered by the first ConcurrentCore). A state word that records the count of the
// process that wrote it tells a child a thread of its parent (which does not exist in the child)
// from a thread of its own. Counts wrap after 2^30 nested forks, which is taken as never.
extern std::atomic<std::uint32_t> g_fork_generation;
inline std::uint32_t fork_generation() noexcept {
  return g_fork_generation.load(std::memory_order_relaxed);
}

// What the calling thread knows of its last one-slot shared claim, for pacing (see
// ConcurrentCore::claim_one): a hint, never a correctness condition (a core made later at the
// same address may inherit one pause and a count). Constant-initialized and trivially
// destructible, so reaching it costs no call where TLS is native (ELF, Mach-O: one where the
// compiler emulates TLS, as MinGW's GCC does).
struct PaceState {
  const void* core = nullptr;  // the ConcurrentCore of the last claim
  std::uint64_t last = 0;      // its ticket
  std::uint32_t owed = 0;      // CPU pauses to spin before the next claim on that core
  std::uint32_t paced = 0;     // claims in a row after which this thread paused
  std::uint32_t unpaced = 0;   // cuts to let pass without a pause (pausing did not pay)
};
inline constinit thread_local PaceState t_pace{};

// An address unique to the calling thread while it runs (a thread started after it ended may get
// the same one). Constant-initialized, so reaching it costs no call.
inline const void* thread_token() noexcept {
  static thread_local const char token = 0;
  return &token;
}

// The counters are alignas(64) so that each has its own cache line; MSVC warns (C4324) that the
// class is padded for it, which is the point.
#if defined(_MSC_VER)
#pragma warning(push)
#pragma warning(disable : 4324)
#endif

// The slots of a ConcurrentDynArray: claims hand out consecutive indices, publishes make them
// part of the published prefix (see the contract in concurrent_dynarray.hpp). Construction,
// moves and destruction are not concurrent operations.
//
// The published prefix is published_ extended by the run of ready marks that starts there:
// size() computes it and stores what it found back into published_, so the next call starts
// further on. An append publishes with plain stores (no read-modify-write; claimed_ is the one
// counter appenders contend on): it moves published_ past its block when the block is next, and
// marks it ready otherwise. So no appender hands
// another the prefix or waits for one, and once the appends in progress have returned, size()
// counts them all.
class ConcurrentCore {
 public:
  using size_type = std::size_t;

  // No reservation, max_size() 0: every claim throws std::length_error.
  ConcurrentCore() noexcept = default;
  // Reserves max_size slots of element_size bytes each, the first aligned to `alignment` (a power
  // of two up to kMaxElementAlignment), and a ready byte per slot. Throws std::invalid_argument for
  // max_size 0, std::length_error when the slots overflow the address space, and what Arena's
  // constructor throws; every message names `call`, the constructor the user called.
  ConcurrentCore(size_type max_size, size_type element_size, size_type alignment,
                 ArenaOptions options, const char* call = "ConcurrentDynArray(max_elements)");
  ConcurrentCore(const ConcurrentCore&) = delete;
  ConcurrentCore& operator=(const ConcurrentCore&) = delete;
  ~ConcurrentCore() = default;

  // Takes other's state, leaving other as if default-constructed. The caller has destroyed the
  // elements this core held.
  void take(ConcurrentCore& other) noexcept;

  // The first slot; nullptr without a reservation.
  void* data() const noexcept {
    std::byte* const base = data_arena_.base();
    return base == nullptr ? nullptr : base + data_offset_;
  }
  size_type max_size() const noexcept { return max_size_; }
  // The published prefix: published_ and the run of ready marks that starts there, which it
  // stores back into published_ (a reader writes, but never waits: see advance_published).
  // Reads the marks only below capacity_ (committed; the marks of unclaimed slots are 0).
  size_type size() const noexcept {
    const size_type p = published_.load(std::memory_order_acquire);
    if (p == capacity_.load(std::memory_order_acquire) || load_mark(p) == 0) return p;
    return advance_published(p);
  }
  size_type capacity() const noexcept { return capacity_.load(std::memory_order_acquire); }

  // Claims the next n (>= 1) consecutive slots and returns the first, committing memory for them
  // first if needed (slots of element_size bytes). With `partial`, claims as many of them as fit
  // below max_size() instead (at least one) and stores that count in *claimed_count. Throws
  // std::length_error when full, OsAllocationError when the OS refuses to commit,
  // std::system_error when it refuses the barrier that ends solo mode; nothing is claimed then.
  size_type claim(size_type element_size, size_type n = 1, bool partial = false,
                  size_type* claimed_count = nullptr) {
    // A one-slot claim in shared mode first, small enough for the caller's loop to inline (the
    // section below does nothing more in shared mode).
    if (n == 1 && mode_.load(std::memory_order_acquire) == kShared) {
      if (claimed_count != nullptr) *claimed_count = 1;
      return claim_one(element_size);
    }
    return claim_in_section(element_size, n, partial, claimed_count);
  }
  // The owner's whole append of one slot in solo mode, for an element whose construction runs
  // none of the user's code (a trivial copy: it cannot throw, append nor wait). Calls
  // construct(i) for the next slot i and returns i + 1; returns 0 having added nothing when this
  // is not that case: not solo mode or not its owner, an append of the owner's unpublished (this
  // one is nested in its construction), no committed slot left, or a claim that the thread ending
  // solo mode did not count. The caller then appends the general way (claim(), construct,
  // publish()).
  //
  // No section: the claim itself announces the append. It is checked before it is made, as it
  // cannot be taken back (the thread ending solo mode may have counted it), and solo mode is
  // checked after it, with end_solo's barrier between the two: either that thread counts the
  // claim, or the owner sees solo mode ending and waits for its decision (solo_claim_counted).
  // Three stores: the claim, the element, published_.
  template <class Construct>
  size_type append_solo(Construct&& construct) noexcept {
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
    // published_ is i, and only this thread moves it from there: readers move it over ready
    // marks, and slot i has none. Every element below i was written by this thread, so a plain
    // release store publishes them all, in solo mode or after it.
    published_.store(i + 1, std::memory_order_release);
    return i + 1;
  }

  // As claim(element_size), but std::nullopt instead of throwing.
  std::optional<size_type> try_claim(size_type element_size) noexcept;

  // Publishes the constructed slots [i, i + n) (n >= 1).
  void publish(size_type i, size_type n = 1) noexcept {
    const Section section(*this, Section::ForPublish{});
    if (section.solo()) {
      publish_solo(i, n);
    } else {
      publish_shared(i, n);
    }
  }

  [[noreturn]] void throw_full() const;

  // Elements Writers destroyed unappended (see ConcurrentDynArray::dropped()).
  size_type dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  void count_dropped(size_type n) noexcept { dropped_.fetch_add(n, std::memory_order_relaxed); }

 private:
  // claim() for blocks, and in solo mode or while it ends.
  size_type claim_in_section(size_type element_size, size_type n, bool partial,
                             size_type* claimed_count) {
    const Section section(*this, Section::ForClaim{});
    if (section.solo()) return claim_solo(element_size, n, partial, claimed_count);
    if (n == 1) {
      if (claimed_count != nullptr) *claimed_count = 1;
      return claim_one(element_size);
    }
    return claim_shared(element_size, n, partial, claimed_count);
  }
  // ---- solo mode --------------------------------------------------------------------------------
  //
  // While only one thread (the owner) has appended, its claims and publishes are plain loads and
  // stores: no other thread writes the counters or the marks. The owner announces each claim and
  // each publish in solo_depth_ and then checks mode_ with only a compiler barrier between; the
  // first other thread to append sets mode_ to kRevoking, issues a process-wide barrier (which
  // orders the owner's accesses as a full fence would have), waits until no solo claim or publish
  // is in progress, counts the claims solo mode made (solo_end_, where the shared claims start)
  // and sets kShared for good. Either the owner sees kRevoking and goes on the shared way, or the
  // other thread sees its claim or publish in progress and waits for it: never both at once.
  // Constructions are outside these sections, so nobody waits for one. A trivial copy's append
  // (append_solo) has no section: its claim is the announcement, and the owner waits instead.
  //
  // A child forked while a thread of its parent was in a solo section or ending solo mode has no
  // such thread: solo_generation_ and mode_'s kRevoking carry the fork generation of the process
  // that wrote them, so that the child's threads neither wait for it (a section of another
  // generation is not in progress here) nor let a revocation of another generation hang (one of
  // them takes it over).
  // mode_ holds kSolo, kShared, or kRevoking | fork_generation() << 2 (revoking_mode()).
  enum : std::uint32_t { kSolo = 0, kRevoking = 1, kShared = 2 };
  static bool is_revoking(std::uint32_t mode) noexcept { return (mode & 3u) == kRevoking; }
  static std::uint32_t revoking_mode() noexcept { return kRevoking | fork_generation() << 2; }
  enum : unsigned char { kClosedFull = 1, kClosedRefused = 2 };

  // One claim or one publish: solo or shared, decided when it starts.
  class Section {
   public:
    // For a claim: a thread that is not the owner ends solo mode first (or waits while another
    // thread ends it). Throws std::system_error if the OS refuses the barrier that ends it.
    struct ForClaim {};
    Section(ConcurrentCore& core, ForClaim) : core_(&core) {
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
        core.end_solo();
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

  // Ends solo mode, or waits while another thread ends it (then the mode is kShared, or kSolo
  // again if that thread's barrier was refused).
  void end_solo();
  // Waits while another thread of this process ends solo mode; returns the mode then (kShared,
  // or kSolo if that thread's barrier was refused). An end begun in a parent process (whose
  // thread does not exist here) is taken over and finished.
  std::uint32_t wait_while_revoking() noexcept;
  // The end of solo mode after mode_ was set to revoking_mode() by this thread: the barrier, the
  // wait for solo sections in progress, the count of solo claims. A refused barrier sets kSolo
  // again and is returned.
  std::error_code revoke() noexcept;
  // For append_solo, which has claimed slot i and then seen solo mode ending: waits until it has
  // ended (or the barrier was refused) and says whether the claim stands. If not, the thread
  // that ended it did not count the claim, and the shared claims start at i.
  bool solo_claim_counted(size_type i) noexcept {
    // kSolo: the barrier was refused and no thread has counted the claims; a thread ending solo
    // mode from now on sees this one (stored before the load that saw kSolo).
    return wait_while_revoking() == kSolo || solo_end_ > i;
  }

  // The owner's claim in solo mode: as claim_shared, with a plain store of solo_claimed_.
  size_type claim_solo(size_type element_size, size_type n, bool partial,
                       size_type* claimed_count) {
    const size_type i = solo_claimed_.load(std::memory_order_relaxed);
    size_type k = n;
    if (partial) {
      k = (std::min)(n, max_size_ - i);  // solo_claimed_ <= capacity_ <= max_size_
      if (k == 0) throw_full();
    }
    const size_type cap = capacity_.load(std::memory_order_relaxed);
    if (i > cap || k > cap - i) commit_slots(element_size, i, k);  // throws, or capacity_ >= i + k
    solo_claimed_.store(i + k, std::memory_order_relaxed);
    if (claimed_count != nullptr) *claimed_count = k;
    return i;
  }

  // The owner's publish in solo mode: a release store of published_, past any ready block after
  // it. A block is out of order only when an append nested in another one's construction (the
  // owner appending from make() or from a constructor) finishes first; the outer one publishes
  // it. The store cannot undo a reader's advance: readers move published_ only over ready marks,
  // and the block that starts at published_ has none while its owner publishes it this way.
  void publish_solo(size_type i, size_type n) noexcept {
    if (published_.load(std::memory_order_relaxed) != i) {
      mark_ready(i, n);
      return;
    }
    published_.store(ready_run_end(i + n, solo_claimed_.load(std::memory_order_relaxed)),
                     std::memory_order_release);
  }

  // ---- shared mode ------------------------------------------------------------------------------

  // One slot, shared mode: one fetch_add, which never fails, so threads that claim at once never
  // retry (a lost compare-and-swap is a retry, and retries grow with the thread count). The
  // capacity is checked after the claim, against a value loaded before it (the proof that such a
  // claim is never undone is at claim_one_slow). Past capacity minus a headroom the claim takes
  // the slow path, which commits ahead, waits for a commit or undoes the claim.
  //
  // Pacing: a ticket that is not the thread's previous one + 1 means another thread cut into its
  // run. Claims that interleave slot by slot trade the counter's, the elements' and the marks'
  // cache lines for every append, so one thread, the one holding the turn (runner_), goes on
  // while each other thread that was cut into pauses before its next claim (after publishing,
  // so that nothing waits for it), and after kPacedTurn such claims in a row it takes the turn
  // (the bounds are in spin.hpp). Runs form, and no thread is held back for more than a bounded
  // spin: no append waits for another thread to run. A pause pays only if the others claimed a
  // run meanwhile (more than kRunPaid slots): threads that append now and then, between longer
  // work, interleave without contending, and such a thread lets the next kUnpacedCuts cuts pass
  // without pausing.
  //
  // claimed_ holds the count of claims (kCountMask) and, while the claims are closed, kClosed and
  // the closing's epoch (kEpochMask; a fresh one for each closing). An undone claim leaves the
  // closing it was undone by, identified by its epoch: a closing that a child reopened (the
  // undone claims of its parent's threads never leave there) is not left by the claims that
  // the reopening discarded.
  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 63;
  static constexpr unsigned kEpochShift = 48;
  static constexpr std::uint64_t kEpochMask = ((std::uint64_t{1} << 15) - 1) << kEpochShift;
  static constexpr std::uint64_t kCountMask = (std::uint64_t{1} << kEpochShift) - 1;
  size_type claim_one(size_type element_size) {
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
        pace.paced = 0;  // a run: nobody cut in
      }
      pace.last = ticket;
    }
    if (ticket < cap - (std::min)(cap >> kAheadShift, kAheadMost))
      return static_cast<size_type>(ticket);
    return claim_one_slow(element_size, ticket, cap);
  }
  // Another thread cut into the calling thread's run (its new ticket is not pace.last + 1):
  // unless it holds the turn, it owes a pause before its next claim, or takes the turn after
  // kPacedTurn pauses in a row.
  void note_cut(PaceState& pace, std::uint64_t ticket) noexcept;
  // Spins the pauses owed.
  static void pay_pace(PaceState& pace) noexcept;
  // A claim among the last 1/2^kAheadShift of the committed slots (at most kAheadMost of them)
  // commits the next step ahead, if no other thread is committing.
  static constexpr unsigned kAheadShift = 4;
  static constexpr size_type kAheadMost = 1024;
  size_type claim_one_slow(size_type element_size, std::uint64_t ticket, size_type cap_before);
  // Undoes a one-slot claim made while claims were closed or undone by a closing (a claim of a
  // slot at or past closed_at_), reopening the claims when it is the last such claim left.
  // `epoch` is the closing's (claimed_ & kEpochMask while it was closed); nothing is undone if
  // that closing has been reopened without this claim (reopen_inherited).
  void leave_closed(std::uint64_t epoch) noexcept;
  // Closes the claims after a refused commit or a claim past max_size (under the commit lock):
  // every one-slot claim at or past capacity_ is undone, and the counter goes back to capacity_
  // once they all have left. Returns the closing's epoch.
  std::uint64_t close_claims(unsigned char reason, std::error_code error) noexcept;
  // For a claim that met closed claims: if a thread of a parent process closed them, the claims
  // it undid will never leave in this process, so they are reopened here (at closed_at_, under
  // the commit lock) and true is returned; the claims undone by that closing in this process do
  // not leave it then (leave_closed sees another epoch). False: closed in this process.
  bool reopen_inherited() noexcept;
  // Throws what closed the claims (std::length_error or OsAllocationError) for slot i.
  [[noreturn]] void throw_closed(size_type element_size, size_type i) const;
  // Commits the next step ahead if no other thread is committing (never waits, never throws).
  void commit_ahead(size_type element_size, size_type cap_before) noexcept;

  // Claims with one CAS (see claim()), committing more memory first if needed. A lost CAS means
  // another thread is appending right now: it backs off (spinning for exponentially more CPU
  // pauses, up to kMaxSpin, then yielding the CPU), so that the winner goes on appending with the
  // counter's cache line in its own cache rather than the two trading the line for every element.
  size_type claim_shared(size_type element_size, size_type n, bool partial,
                         size_type* claimed_count);
  // Commits memory for slots [i, i + n): once, whichever thread gets here first. Throws what
  // closed the claims if they are closed (nothing commits then: see claim_one_slow).
  void commit_slots(size_type element_size, size_type i, size_type n);
  // Commits slots up to `end` (> capacity_, <= max_size_, else std::length_error): the commit
  // lock is held, the claims are open.
  void commit_locked(size_type element_size, size_type end);

  // Publishes [i, i + n) without a read-modify-write. When published_ is i (the block is next)
  // a release store moves it past the block: nobody else can move it from i, as other threads
  // move it only over ready marks and this block has none. Otherwise the block is marked ready
  // (release stores), for size() or a later append to find; a marked block that crosses a
  // multiple of kAdvanceStride also advances published_, which bounds what size() scans when
  // blocks keep finishing out of order.
  static constexpr size_type kAdvanceStride = 256;
  void publish_shared(size_type i, size_type n) noexcept {
    // Acquire: the store below then carries the earlier blocks' publication too (a plain store
    // would otherwise end the release sequence of whoever published them).
    if (published_.load(std::memory_order_acquire) == i) {
      published_.store(i + n, std::memory_order_release);
      return;
    }
    mark_ready(i, n);
    if ((i + n) / kAdvanceStride != i / kAdvanceStride)
      (void)advance_published(published_.load(std::memory_order_acquire));
  }

  // Ready bytes mark blocks, not elements: a block [i, i + n) is split into power-of-two chunks
  // (largest first), and the byte of each chunk's first slot holds log2(chunk length) + 1; the
  // other bytes stay 0. The published prefix only ever ends at a block's or a chunk's end, so a
  // scan reads only chunk-start bytes, and skips a whole chunk per byte.
  void mark_ready(size_type i, size_type n) noexcept {
    if (!out_of_order_.load(std::memory_order_relaxed))
      out_of_order_.store(true, std::memory_order_relaxed);
    for (size_type left = n; left != 0;) {
      const size_type chunk = std::bit_floor(left);
      store_byte_release(ready_ + i, static_cast<unsigned char>(std::bit_width(chunk)));
      i += chunk;
      left -= chunk;
    }
  }

  // Moves published_ from p (a value it had) over the run of ready marks that starts at p, and
  // returns the prefix found (at least p). Several threads may do it at once: the furthest wins.
  size_type advance_published(size_type p) const noexcept;

  // The marks are plain bytes, only ever accessed atomically. unsigned char is an
  // implicit-lifetime type, and the OS's zero-filled pages hold such objects without a write
  // (as memory from malloc does), so a mark needs no construction and its page costs no RAM
  // until a mark on it is set (size() reads the mark after the prefix: a read maps no RAM).
  unsigned char load_mark(size_type i) const noexcept { return load_byte_acquire(ready_ + i); }

  // The end of the run of ready chunks that starts at slot p (p itself if its mark is 0), reading
  // marks below `end` (claimed or committed slots) only.
  size_type ready_run_end(size_type p, size_type end) const noexcept {
    while (p < end) {
      const unsigned char mark = load_mark(p);
      if (mark == 0) break;
      p += size_type{1} << (mark - 1);
    }
    return p;
  }

  // Four cache lines. The first two are read-mostly: written by a commit (under commit_lock_),
  // once when solo mode ends, and by moves. Appenders hammer the claims (and published_ when
  // their blocks finish in order), and readers poll published_, so each has a line of its own.
  Arena data_arena_;
  Arena ready_arena_;
  size_type max_size_ = 0;
  unsigned char* ready_ = nullptr;             // one mark per slot, zero until set
  std::atomic<const void*> owner_{nullptr};    // the thread that appended first (solo)
  std::atomic<size_type> capacity_{0};         // slots backed by committed memory
  std::atomic<std::uint32_t> mode_{kShared};   // kSolo from construction where barriers work
  std::atomic<bool> out_of_order_{false};      // some block was marked ready
  std::atomic<std::uint32_t> commit_lock_{0};  // held by the thread committing slots
  std::uint32_t data_offset_ = 0;  // from data_arena_'s base to the first slot (alignment.hpp)
  // The claims: solo mode's (the owner's plain stores) and the shared ones (a separate counter,
  // so that a claim stored after solo mode ended, see append_solo, cannot overwrite a shared
  // one). One line: in each mode only one of them is written.
  // claimed_ is the count of shared claims, with kClosed set while the claims are closed (see
  // claim_one_slow). The rest of the line is written only when solo mode or the claims close.
  alignas(64) std::atomic<std::uint64_t> claimed_{0};  // slots handed out once shared
  std::atomic<size_type> solo_claimed_{0};             // slots handed out in solo mode
  std::atomic<unsigned> solo_depth_{0};                // the owner's solo sections in progress
  std::atomic<std::uint32_t> solo_generation_{0};      // the fork generation of solo_depth_
  std::atomic<std::uint32_t> closed_generation_{0};    // the fork generation of the closing
  std::atomic<unsigned char> closed_reason_{0};        // kClosedFull or kClosedRefused
  std::uint16_t closed_epoch_ = 0;                     // the last closing's epoch (commit lock)
  std::atomic<int> closed_error_value_{0};             // the refused commit's error
  std::atomic<const std::error_category*> closed_error_category_{nullptr};
  std::atomic<size_type> closed_at_{0};         // capacity_ when the claims closed
  std::atomic<size_type> ahead_refused_at_{0};  // capacity_ when a commit ahead was refused
  // A prefix that is constructed and visible (size() may find more); mutable: size() advances it.
  // The rest of its line is written rarely: when a Writer loses elements, when solo mode ends,
  // when the turn changes hands (read by threads that were cut into, which publish next).
  alignas(64) mutable std::atomic<size_type> published_{0};
  std::atomic<size_type> dropped_{0};         // written only when a Writer loses elements
  std::atomic<const void*> runner_{nullptr};  // the thread holding the turn (pacing; a hint)
  size_type solo_end_ = 0;                    // the claims solo mode made; set once, when it ends
};

static_assert(sizeof(void*) != 8 || sizeof(ConcurrentCore) == 256, "four cache lines");

#if defined(_MSC_VER)
#pragma warning(pop)
#endif

}  // namespace reservoir::detail
