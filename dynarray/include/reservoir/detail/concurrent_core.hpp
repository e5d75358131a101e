// reservoir/detail/concurrent_core.hpp - what ConcurrentDynArray<T> does that does not depend on T:
// the class, its shared field layout (in this file only, with the reasons for it) and the map of
// where each concern lives. The element type's size is passed in where memory is committed.
//
// One file per concern (inline parts here in detail/, the rest in dynarray/src/):
//   claim         concurrent_claim.hpp, concurrent_claim.cpp: claim(), the one-index fetch_add
//                 and the block compare-and-swap, the claims past capacity
//   publish       concurrent_publish.hpp, concurrent_publish.cpp: publish(), the ready marks,
//                 size()'s walk over them, and wait_for_size(): bounded yielding, then asleep
//                 in a parking slot until a publish reaches its count (kWaitYieldingMicroseconds in
//                 spin.hpp)
//   solo mode     concurrent_solo.hpp, concurrent_solo.cpp: the owner's plain stores, the
//                 sections and the process-wide barrier that ends it
//   pacing        pace_state.hpp, concurrent_pacing.cpp (bounds in spin.hpp)
//   closing       concurrent_closing.cpp: closing the claims after a refused commit or a full
//                 array, and reopening them by epoch
//   commit        concurrent_commit.cpp, commit_lock.hpp: committing more memory (and ahead),
//                 under the commit lock
//   fork          process_identity.hpp, process_identity.cpp: fork generations, thread tokens
//   reports       concurrent_reports.hpp, concurrent_reports.cpp: errors' and a lost Writer's
//                 messages, the claim counters
//   construction  concurrent_core.cpp: the reservations, moves
// A one-index claim reads: claim() (concurrent_claim.hpp), then in shared mode claim_one; past
// the headroom, claim_one_slow (concurrent_claim.cpp), which may commit (concurrent_commit.cpp)
// or close the claims (concurrent_closing.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>

#include <reservoir/arena.hpp>
#include <reservoir/detail/atomic_byte.hpp>
#include <reservoir/detail/concurrent_reports.hpp>
#include <reservoir/detail/pace_state.hpp>
#include <reservoir/detail/process_identity.hpp>

namespace reservoir::detail {

// What a claim is for: the element's size (memory is committed in elements) and the user's call,
// which every message names ("push_back/emplace_back", "Writer::flush", ...).
struct ClaimSite {
  std::size_t element_size;
  const char* call;
};

// The counters are alignas(64) so that each has its own cache line; MSVC warns (C4324) that the
// class is padded for it, which is the point.
#if defined(_MSC_VER)
#pragma warning(push)
#pragma warning(disable : 4324)
#endif

// The elements of a ConcurrentDynArray, by index: claims hand out consecutive indices, publishes
// make them part of the published prefix (see the contract in concurrent_dynarray.hpp).
// Construction, moves and destruction are not concurrent operations.
//
// The published prefix is published_ extended by the ready pieces that follow it: size() computes
// it and stores what it found back into published_, so the next call starts further on. An append
// publishes with plain stores (no read-modify-write; claimed_ is the one counter appenders contend
// on): it moves published_ past its block when the block is next, and marks it ready otherwise.
// So no appender hands another the prefix or waits for one, and once the appends in progress
// have returned, size() counts them all.
class ConcurrentCore {
 public:
  using size_type = std::size_t;

  // ---- construction (concurrent_core.cpp) ------------------------------------------------------

  // No reservation, max_size() 0: every claim throws std::length_error.
  ConcurrentCore() noexcept = default;
  // Reserves max_size elements of element_size bytes each, the first aligned to `alignment` (a
  // power of two up to kMaxElementAlignment), and a ready byte per index. Throws
  // std::invalid_argument for max_size 0, std::length_error when the elements overflow the address
  // space, and what Arena's constructor throws; every message names `call`, the constructor the
  // user called.
  ConcurrentCore(size_type max_size, size_type element_size, size_type alignment,
                 ArenaOptions options, const char* call = "ConcurrentDynArray(max_elements)");
  ConcurrentCore(const ConcurrentCore&) = delete;
  ConcurrentCore& operator=(const ConcurrentCore&) = delete;
  ~ConcurrentCore() = default;

  // Takes other's state, leaving other as if default-constructed. The caller has destroyed the
  // elements this core held.
  void take(ConcurrentCore& other) noexcept;

  // The element at index 0; nullptr without a reservation.
  void* data() const noexcept {
    std::byte* const base = data_arena_.base();
    return base == nullptr ? nullptr : base + data_offset_;
  }
  size_type max_size() const noexcept { return max_size_; }
  size_type capacity() const noexcept { return capacity_.load(std::memory_order_acquire); }

  // ---- claim (concurrent_claim.hpp) ------------------------------------------------------------

  // Claims the next n (>= 1) consecutive indices and returns the first, committing memory for
  // them first if needed. With `partial`, claims as many of them as fit below max_size() instead
  // (at least one) and stores that count in *claimed_count. Throws std::length_error when full,
  // OsAllocationError when the OS refuses to commit, std::system_error when it refuses the
  // barrier that ends solo mode; nothing is claimed then. The messages name site.call.
  size_type claim(ClaimSite site, size_type n = 1, bool partial = false,
                  size_type* claimed_count = nullptr);
  // As claim(site), but std::nullopt instead of throwing.
  std::optional<size_type> try_claim(ClaimSite site) noexcept;

  // ---- solo mode (concurrent_solo.hpp) ---------------------------------------------------------

  // The owner's whole append of one element in solo mode, for an element whose construction runs
  // none of the user's code (a trivial copy: it cannot throw, append nor wait). Calls
  // construct(i) for the next index i and returns i + 1; returns 0 having added nothing when this
  // is not that case: not solo mode or not its owner, an append of the owner's unpublished (this
  // one is nested in its construction), no committed index left, or a claim that the thread
  // ending solo mode did not count. The caller then appends the general way (claim(), construct,
  // publish()).
  template <class Construct>
  size_type append_solo(Construct&& construct) noexcept;

  // ---- publish (concurrent_publish.hpp) --------------------------------------------------------

  // Publishes the constructed indices [i, i + n) (n >= 1). With `each`, a block that finishes out
  // of order is marked index by index, so that is_published finds each of its elements.
  void publish(size_type i, size_type n = 1, bool each = false) noexcept;
  // Whether element i is known to be published: below published_, or marked ready (a one-element
  // append, the first index of a piece, or any index of a block published `each`). Never true
  // for an element not yet constructed; false for the inside of a block marked by pieces until
  // published_ passes it. One or two loads and a byte load; never stores.
  bool is_published(size_type i) const noexcept;
  // The published prefix: published_ and the ready pieces that follow it, which it stores back
  // into published_ (a reader writes, but never waits: see advance_published).
  size_type size() const noexcept;
  // Waits until size() >= n and returns size() (n <= max_size(): the caller checks). Yields its
  // CPU between checks for up to kWaitYieldingMicroseconds, then sleeps in the OS until a publish
  // wakes it, where the process-wide barrier is available; elsewhere it goes on yielding.
  size_type wait_for_size(size_type n) const noexcept;

  // ---- reports (concurrent_reports.cpp) --------------------------------------------------------

  // std::length_error naming `call`: the array is full (or has no reservation: then the message
  // says how to make one).
  [[noreturn]] void throw_full(const char* call) const;
  // Elements Writers destroyed unappended (see ConcurrentDynArray::dropped()).
  size_type dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  void count_dropped(size_type n) noexcept { dropped_.fetch_add(n, std::memory_order_relaxed); }

 private:
  // ---- the words' encodings --------------------------------------------------------------------

  // mode_ holds kSolo, kShared, or kRevoking | fork_generation() << 2 (revoking_mode()): solo
  // mode ending, begun by a thread of that generation.
  enum : std::uint32_t { kSolo = 0, kRevoking = 1, kShared = 2 };
  static bool is_revoking(std::uint32_t mode) noexcept { return (mode & 3u) == kRevoking; }
  static std::uint32_t revoking_mode() noexcept { return kRevoking | fork_generation() << 2; }
  // claimed_ holds the count of claims (kCountMask) and, while the claims are closed, kClosed and
  // the closing's epoch (kEpochMask; a fresh one for each closing). closed_reason_ says why.
  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 63;
  static constexpr unsigned kEpochShift = 48;
  static constexpr std::uint64_t kEpochMask = ((std::uint64_t{1} << 15) - 1) << kEpochShift;
  static constexpr std::uint64_t kCountMask = (std::uint64_t{1} << kEpochShift) - 1;
  enum : unsigned char { kClosedFull = 1, kClosedRefused = 2 };

  // ---- claim (concurrent_claim.hpp, concurrent_claim.cpp) --------------------------------------

  // claim() for blocks, and in solo mode or while it ends.
  size_type claim_in_section(ClaimSite site, size_type n, bool partial, size_type* claimed_count);
  // One index, shared mode: one fetch_add; past the headroom, claim_one_slow.
  size_type claim_one(ClaimSite site);
  // A claim among the last 1/2^kAheadShift of the committed indices (at most kAheadMost of them)
  // commits the next step ahead, if no other thread is committing.
  static constexpr unsigned kAheadShift = 4;
  static constexpr size_type kAheadMost = 1024;
  size_type claim_one_slow(ClaimSite site, std::uint64_t ticket, size_type cap_before);
  // A block, shared mode: one compare-and-swap, with backoff after a lost one.
  size_type claim_shared(ClaimSite site, size_type n, bool partial, size_type* claimed_count);

  // ---- solo mode (concurrent_solo.hpp, concurrent_solo.cpp) ------------------------------------

  class Section;  // one claim or one publish: solo or shared, decided when it starts
  void end_solo(const char* call);
  std::uint32_t wait_while_revoking() noexcept;
  std::error_code revoke() noexcept;
  bool solo_claim_counted(size_type i) noexcept;
  size_type claim_solo(ClaimSite site, size_type n, bool partial, size_type* claimed_count);
  void publish_solo(size_type i, size_type n, bool each) noexcept;

  // ---- pacing (concurrent_pacing.cpp) ----------------------------------------------------------

  void note_cut(PaceState& pace, std::uint64_t ticket) noexcept;
  static void pay_pace(PaceState& pace) noexcept;

  // ---- closing (concurrent_closing.cpp) --------------------------------------------------------

  std::uint64_t close_claims(unsigned char reason, std::error_code error) noexcept;
  void leave_closed(std::uint64_t epoch) noexcept;
  bool reopen_inherited() noexcept;
  [[noreturn]] void throw_closed(ClaimSite site, size_type i) const;

  // ---- commit (concurrent_commit.cpp) ----------------------------------------------------------

  void commit_ahead(ClaimSite site, size_type cap_before) noexcept;
  void commit_for(ClaimSite site, size_type i, size_type n);
  void commit_locked(ClaimSite site, size_type end);

  // ---- publish (concurrent_publish.hpp, concurrent_publish.cpp) --------------------------------

  static constexpr size_type kAdvanceStride = 256;
  void publish_shared(size_type i, size_type n, bool each) noexcept;
  void mark_ready(size_type i, size_type n, bool each) noexcept;
  size_type advance_published(size_type p) const noexcept;
  unsigned char load_mark(size_type i) const noexcept;
  size_type ready_end(size_type p, size_type end) const noexcept;
  // After a publish (a store of published_ or of ready marks): wakes the threads sleeping in
  // wait_for_size that it satisfied, if any sleeps (below the class).
  void wake_waiters() noexcept;
  void wake_sleepers() noexcept;

  // ---- the fields ------------------------------------------------------------------------------
  //
  // Four cache lines, in this order for these reasons:
  //   line 0-1  read-mostly: written by a commit (under commit_lock_), once when solo mode ends,
  //             and by moves; read by every append.
  //   line 2    the claims, which appenders hammer: solo mode's (the owner's plain stores) and
  //             the shared ones (a separate counter, so that a claim stored after solo mode
  //             ended, see append_solo, cannot overwrite a shared one). In each mode only one of
  //             them is written; the rest of the line is written only when solo mode ends or the
  //             claims close, and read on those paths.
  //   line 3    published_, which readers poll and appenders store when their blocks finish in
  //             order; the rest of its line is written rarely: when a Writer loses elements, when
  //             solo mode ends, when the pacing turn changes hands (read by threads that were cut
  //             into, which publish next).
  // The static_asserts after the class hold these lines in place.
  Arena data_arena_;
  Arena ready_arena_;
  size_type max_size_ = 0;
  unsigned char* ready_ = nullptr;            // one mark per index, zero until set
  std::atomic<const void*> owner_{nullptr};   // the thread that appended first (solo)
  std::atomic<size_type> capacity_{0};        // indices backed by committed memory
  std::atomic<std::uint32_t> mode_{kShared};  // kSolo from construction where barriers work
  std::atomic<bool> out_of_order_{false};     // some block was marked ready
  bool waits_sleep_ = false;  // wait_for_size may sleep: the process-wide barrier is available
  std::atomic<std::uint32_t> commit_lock_{0};  // held by the thread committing (commit_lock.hpp)
  std::uint32_t data_offset_ = 0;              // from data_arena_'s base to index 0 (alignment.hpp)
  alignas(64) std::atomic<std::uint64_t> claimed_{0};  // indices handed out once shared
  std::atomic<size_type> solo_claimed_{0};             // indices handed out in solo mode
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
  alignas(64) mutable std::atomic<size_type> published_{0};
  std::atomic<size_type> dropped_{0};         // written only when a Writer loses elements
  std::atomic<const void*> runner_{nullptr};  // the thread holding the turn (pacing; a hint)
  size_type solo_end_ = 0;                    // the claims solo mode made; set once, when it ends
  // Threads in wait_for_size's sleep on this array, each in a parking slot of its own
  // (concurrent_publish.cpp): a publish looks for those it satisfied only while this is not 0.
  mutable std::atomic<std::uint32_t> sleepers_{0};

  friend struct ConcurrentCoreLayout;
};

// The lines above, checked where pointers are 8 bytes (the layout the comments describe).
struct ConcurrentCoreLayout {
  static constexpr bool kEightBytePointers = sizeof(void*) == 8;
  static constexpr std::size_t kLine = 64;
  static_assert(!kEightBytePointers || sizeof(ConcurrentCore) == 4 * kLine, "four cache lines");
  static_assert(!kEightBytePointers || offsetof(ConcurrentCore, data_offset_) / kLine == 1,
                "the read-mostly fields fill lines 0 and 1");
  static_assert(!kEightBytePointers || offsetof(ConcurrentCore, claimed_) == 2 * kLine,
                "the claims start line 2");
  static_assert(!kEightBytePointers || offsetof(ConcurrentCore, ahead_refused_at_) / kLine == 2,
                "the closing's fields share the claims' line");
  static_assert(!kEightBytePointers || offsetof(ConcurrentCore, published_) == 3 * kLine,
                "published_ starts line 3");
  static_assert(!kEightBytePointers || offsetof(ConcurrentCore, solo_end_) / kLine == 3,
                "the rarely written fields share published_'s line");
  static_assert(
      !kEightBytePointers || offsetof(ConcurrentCore, sleepers_) / kLine == 3,
      "the sleepers' flag shares published_'s line, which every publish has just written");
  static_assert(!kEightBytePointers || offsetof(ConcurrentCore, waits_sleep_) / kLine <= 1,
                "whether waits sleep is read-mostly");
};

#if defined(_MSC_VER)
#pragma warning(pop)
#endif

// Called by every publish after its stores (in solo mode too: a reader may wait for the owner):
// wakes the threads asleep in wait_for_size whose count the prefix has reached; with none asleep,
// one load and a branch. A compiler barrier only, paired with the process-wide barrier that a
// sleeper issues between counting itself and checking size(): either that check sees this
// publish, or this load sees the count (wake_sleepers: concurrent_publish.cpp).
inline void ConcurrentCore::wake_waiters() noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_relaxed) != 0) wake_sleepers();
}

}  // namespace reservoir::detail

// The inline parts are one header per concern (concurrent_claim.hpp, concurrent_publish.hpp,
// concurrent_solo.hpp), each including this one: a file that calls them includes those it calls.
