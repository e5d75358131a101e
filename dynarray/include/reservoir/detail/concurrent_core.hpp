// reservoir/detail/concurrent_core.hpp - what ConcurrentDynArray<T> does that does not depend on T:
// the two reservations (slots and ready marks), the claim and publish protocol, solo mode and the
// commit of more slots. The element type's size is passed in where memory is committed. Hot paths
// (a claim or a publish in solo mode, an uncontended shared one) are inline; everything else is
// compiled once into the library (concurrent_core.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <reservoir/arena.hpp>

namespace reservoir::detail {

// Atomic access to a plain byte (ConcurrentDynArray's ready marks), sequentially consistent.
#if defined(__cpp_lib_atomic_ref)
inline constexpr bool kByteAtomicsLockFree =
    std::atomic_ref<unsigned char>::is_always_lock_free &&
    std::atomic_ref<unsigned char>::required_alignment == 1;
inline unsigned char atomic_load_byte(unsigned char* p) noexcept {
  return std::atomic_ref<unsigned char>(*p).load(std::memory_order_seq_cst);
}
inline void atomic_store_byte(unsigned char* p, unsigned char v) noexcept {
  std::atomic_ref<unsigned char>(*p).store(v, std::memory_order_seq_cst);
}
#else  // standard libraries without std::atomic_ref (libc++ before 19): the GCC/Clang builtins
inline constexpr bool kByteAtomicsLockFree = __atomic_always_lock_free(1, 0);
inline unsigned char atomic_load_byte(unsigned char* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}
inline void atomic_store_byte(unsigned char* p, unsigned char v) noexcept {
  __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}
#endif

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

// The slots of a ConcurrentDynArray: claims hand out consecutive indices, publishes advance the
// published prefix (see the contract in concurrent_dynarray.hpp). Construction, moves and
// destruction are not concurrent operations.
class ConcurrentCore {
 public:
  using size_type = std::size_t;

  // No reservation, max_size() 0: every claim throws std::length_error.
  ConcurrentCore() noexcept = default;
  // Reserves max_size slots of element_size bytes each, the first aligned to `alignment` (a power
  // of two up to kMaxElementAlignment), and a ready byte per slot. Throws std::invalid_argument for
  // max_size 0, std::length_error when the slots overflow the address space, and what Arena's
  // constructor throws.
  ConcurrentCore(size_type max_size, size_type element_size, size_type alignment,
                 ArenaOptions options);
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
  size_type size() const noexcept { return published_.load(std::memory_order_acquire); }
  size_type capacity() const noexcept { return capacity_.load(std::memory_order_acquire); }

  // Claims the next n (>= 1) consecutive slots and returns the first, committing memory for them
  // first if needed (slots of element_size bytes). With `partial`, claims as many of them as fit
  // below max_size() instead (at least one) and stores that count in *claimed_count. Throws
  // std::length_error when full, OsAllocationError when the OS refuses to commit,
  // std::system_error when it refuses the barrier that ends solo mode; nothing is claimed then.
  size_type claim(size_type element_size, size_type n = 1, bool partial = false,
                  size_type* claimed_count = nullptr) {
    const Section section(*this, Section::ForClaim{});
    return section.solo() ? claim_solo(element_size, n, partial, claimed_count)
                          : claim_shared(element_size, n, partial, claimed_count);
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

 private:
  // ---- solo mode --------------------------------------------------------------------------------
  //
  // While only one thread (the owner) has appended, its claims and publishes are plain loads and
  // stores: no other thread writes the counters or the marks. The owner announces each claim and
  // each publish in solo_depth_ and then checks mode_ with only a compiler barrier between; the
  // first other thread to append sets mode_ to kRevoking, issues a process-wide barrier (which
  // orders the owner's accesses as a full fence would have), waits until no solo claim or publish
  // is in progress, and sets kShared for good. Either the owner sees kRevoking and goes on the
  // shared way, or the other thread sees its claim or publish in progress and waits for it: never
  // both at once. Constructions are outside these sections, so nobody waits for one.
  enum : unsigned char { kSolo, kRevoking, kShared };

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
          enter_as_owner();
          return;
        }
        core.end_solo();
      }
    }
    // For a publish: a thread that is not the owner claimed in shared mode, which never ends.
    struct ForPublish {};
    Section(ConcurrentCore& core, ForPublish) noexcept : core_(&core) {
      if (core.mode_.load(std::memory_order_acquire) != kShared &&
          core.owner_.load(std::memory_order_relaxed) == thread_token())
        enter_as_owner();
    }
    ~Section() {
      if (solo_) core_->solo_depth_.store(depth_, std::memory_order_release);
    }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    bool solo() const noexcept { return solo_; }

   private:
    void enter_as_owner() noexcept {
      const unsigned depth = core_->solo_depth_.load(std::memory_order_relaxed);
      core_->solo_depth_.store(depth + 1, std::memory_order_relaxed);
      // Paired with end_solo's process-wide barrier: a full fence between the store above and
      // the load below, paid by the thread that ends solo mode.
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (core_->mode_.load(std::memory_order_relaxed) == kSolo) {
        solo_ = true;
        depth_ = depth;
        return;
      }
      // Ending: go on the shared way. No other thread appends before it has seen this store.
      core_->solo_depth_.store(depth, std::memory_order_release);
    }

    ConcurrentCore* core_;
    bool solo_ = false;
    unsigned depth_ = 0;
  };

  // Ends solo mode, or waits while another thread ends it (then the mode is kShared, or kSolo
  // again if that thread's barrier was refused).
  void end_solo();

  // The owner's claim in solo mode: as claim_shared, with a plain store.
  size_type claim_solo(size_type element_size, size_type n, bool partial,
                       size_type* claimed_count) {
    const size_type i = claimed_.load(std::memory_order_relaxed);
    size_type k = n;
    if (partial) {
      k = (std::min)(n, max_size_ - i);  // claimed_ <= capacity_ <= max_size_
      if (k == 0) throw_full();
    }
    const size_type cap = capacity_.load(std::memory_order_relaxed);
    if (i > cap || k > cap - i) commit_slots(element_size, i, k);  // throws, or capacity_ >= i + k
    claimed_.store(i + k, std::memory_order_relaxed);
    if (claimed_count != nullptr) *claimed_count = k;
    return i;
  }

  // The owner's publish in solo mode: as publish_shared, with plain loads and a release store.
  // A block is out of order only when an append nested in another one's construction (the owner
  // appending from make() or from a constructor) finishes first; the outer one publishes it.
  void publish_solo(size_type i, size_type n) noexcept {
    if (published_.load(std::memory_order_relaxed) != i) {
      mark_ready(i, n);
      return;
    }
    published_.store(ready_run_end(i + n, claimed_.load(std::memory_order_relaxed)),
                     std::memory_order_release);
  }

  // ---- shared mode ------------------------------------------------------------------------------

  // Claims with one CAS (see claim()), committing more memory first if needed. Backs off briefly
  // after a lost CAS, so that contending threads stop invalidating the counter's cache line on
  // every attempt.
  size_type claim_shared(size_type element_size, size_type n, bool partial,
                         size_type* claimed_count);
  // Commits memory for slots [i, i + n): once, whichever thread gets here first.
  void commit_slots(size_type element_size, size_type i, size_type n);
  // Publishes [i, i + n): directly when the block is next, else through its ready marks.
  void publish_shared(size_type i, size_type n) noexcept;
  // Marks the constructed block [i, i + n) ready, chunk by chunk (see publish_shared).
  void mark_ready(size_type i, size_type n) noexcept;

  // The marks are plain bytes, only ever accessed atomically. unsigned char is an
  // implicit-lifetime type, and the OS's zero-filled pages hold such objects without a write
  // (as memory from malloc does), so a mark needs no construction and its page stays untouched
  // until a mark on it is set.
  unsigned char load_mark(size_type i) const noexcept { return atomic_load_byte(ready_ + i); }

  // The end of the run of ready chunks that starts at slot p (p itself if its mark is 0), reading
  // marks below `end` (claimed slots) only.
  size_type ready_run_end(size_type p, size_type end) const noexcept {
    while (p < end) {
      const unsigned char mark = load_mark(p);
      if (mark == 0) break;
      p += size_type{1} << (mark - 1);
    }
    return p;
  }

  // Four cache lines. The first two are read-mostly: written by a commit (under commit_lock_),
  // once when solo mode ends, and by moves. Appenders hammer claimed_ and published_, and
  // readers poll published_, so each has a line of its own.
  Arena data_arena_;
  Arena ready_arena_;
  size_type max_size_ = 0;
  unsigned char* ready_ = nullptr;            // one mark per slot, zero until set
  std::atomic<const void*> owner_{nullptr};   // the thread that appended first (solo)
  std::atomic<size_type> capacity_{0};        // slots backed by committed memory
  std::atomic<unsigned char> mode_{kShared};  // kSolo from construction where barriers work
  std::atomic<bool> out_of_order_{false};     // some block was marked ready
  std::atomic<bool> commit_lock_{false};      // held by the thread committing slots
  std::uint32_t data_offset_ = 0;  // from data_arena_'s base to the first slot (alignment.hpp)
  alignas(64) std::atomic<size_type> claimed_{0};    // slots handed out
  std::atomic<unsigned> solo_depth_{0};              // the owner's solo appends in progress
  alignas(64) std::atomic<size_type> published_{0};  // prefix that is constructed and visible
};

static_assert(sizeof(void*) != 8 || sizeof(ConcurrentCore) == 256, "four cache lines");

#if defined(_MSC_VER)
#pragma warning(pop)
#endif

}  // namespace reservoir::detail
