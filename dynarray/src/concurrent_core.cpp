// ConcurrentDynArray's slots, out of line: construction, moves, the contended and the rare paths
// of the claim and publish protocol (solo mode's end, committing more slots, out-of-order
// publishes). What every append runs is inline in detail/concurrent_core.hpp.
#include <reservoir/detail/concurrent_core.hpp>

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <reservoir/detail/alignment.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {
namespace {

// Ready marks must start at zero: never take their reservation from the cache (whose first step
// holds old bytes), so every byte is fresh or decommitted memory, which the OS fills with zeros.
ArenaOptions fresh(ArenaOptions o) noexcept {
  o.reuse_reservation = false;
  return o;
}

// The bytes to reserve for max_size slots whose first is aligned to `alignment`.
std::size_t data_bytes(std::size_t max_size, std::size_t element_size, std::size_t alignment) {
  if (max_size == 0) throw std::invalid_argument("reservoir::ConcurrentDynArray: max_size 0");
  const std::size_t slack = alignment > kMinBaseAlignment ? alignment - kMinBaseAlignment : 0;
  if (max_size > (static_cast<std::size_t>(-1) - slack) / element_size) {
    throw std::length_error("reservoir::ConcurrentDynArray: max_size overflows");
  }
  return max_size * element_size + slack;
}

// commit_lock_ as a lock: held for one commit step (up to a few milliseconds); waiters yield.
class CommitLock {
 public:
  explicit CommitLock(std::atomic<bool>& flag) noexcept : flag_(flag) {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed))
        pal::yield_thread();
  }
  ~CommitLock() { flag_.store(false, std::memory_order_release); }
  CommitLock(const CommitLock&) = delete;
  CommitLock& operator=(const CommitLock&) = delete;

 private:
  std::atomic<bool>& flag_;
};

}  // namespace

ConcurrentCore::ConcurrentCore(size_type max_size, size_type element_size, size_type alignment,
                               ArenaOptions options)
    : data_arena_(data_bytes(max_size, element_size, alignment), options),
      ready_arena_(max_size, fresh(options)),
      max_size_(max_size) {
  ready_ = reinterpret_cast<unsigned char*>(ready_arena_.base());
  const auto base = reinterpret_cast<std::uintptr_t>(data_arena_.base());
  data_offset_ =
      static_cast<std::uint32_t>(alignment > kMinBaseAlignment ? -base & (alignment - 1) : 0);
  if (pal::process_barrier_supported()) mode_.store(kSolo, std::memory_order_relaxed);
}

void ConcurrentCore::take(ConcurrentCore& other) noexcept {
  data_arena_ = std::move(other.data_arena_);
  ready_arena_ = std::move(other.ready_arena_);
  max_size_ = std::exchange(other.max_size_, 0);
  ready_ = std::exchange(other.ready_, nullptr);
  data_offset_ = std::exchange(other.data_offset_, 0);
  claimed_.store(other.claimed_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  published_.store(other.published_.exchange(0, std::memory_order_relaxed),
                   std::memory_order_relaxed);
  capacity_.store(other.capacity_.exchange(0, std::memory_order_relaxed),
                  std::memory_order_relaxed);
  out_of_order_.store(other.out_of_order_.exchange(false, std::memory_order_relaxed),
                      std::memory_order_relaxed);
  mode_.store(other.mode_.exchange(kShared, std::memory_order_relaxed), std::memory_order_relaxed);
  owner_.store(other.owner_.exchange(nullptr, std::memory_order_relaxed),
               std::memory_order_relaxed);
}

std::optional<ConcurrentCore::size_type> ConcurrentCore::try_claim(
    size_type element_size) noexcept {
  try {
    return claim(element_size);
  } catch (...) {  // length_error, OsAllocationError or a refused barrier: all are "no"
    return std::nullopt;
  }
}

void ConcurrentCore::throw_full() const {
  throw std::length_error("reservoir::ConcurrentDynArray: full at max_size() " +
                          std::to_string(max_size_));
}

void ConcurrentCore::end_solo() {
  unsigned char mode = kSolo;
  if (mode_.compare_exchange_strong(mode, kRevoking, std::memory_order_seq_cst)) {
    if (const std::error_code ec = pal::process_barrier()) {
      mode_.store(kSolo, std::memory_order_release);
      throw std::system_error(ec,
                              "reservoir::ConcurrentDynArray: a second appending thread "
                              "needs a process-wide memory barrier");
    }
    // A solo claim or publish in progress finishes (the owner's next one sees kRevoking).
    while (solo_depth_.load(std::memory_order_acquire) != 0)
      pal::yield_thread();
    mode_.store(kShared, std::memory_order_release);
    return;
  }
  while (mode_.load(std::memory_order_acquire) == kRevoking)
    pal::yield_thread();
}

ConcurrentCore::size_type ConcurrentCore::claim_shared(size_type element_size, size_type n,
                                                       bool partial, size_type* claimed_count) {
  for (;;) {
    size_type i = claimed_.load(std::memory_order_relaxed);
    size_type k = n;
    unsigned spins = 1;
    for (;;) {
      if (partial) {
        k = (std::min)(n, max_size_ - i);  // claimed_ <= capacity_ <= max_size_
        if (k == 0) throw_full();
      }
      const size_type cap = capacity_.load(std::memory_order_acquire);
      if (i > cap || k > cap - i) break;
      // seq_cst, as publish's reads of claimed_: a thread that publishes up to slot i and then
      // reads claimed_ must see this claim if the claimer's ready mark may be there to see.
      if (claimed_.compare_exchange_weak(i, i + k, std::memory_order_seq_cst,
                                         std::memory_order_relaxed)) {
        if (claimed_count != nullptr) *claimed_count = k;
        return i;
      }
      for (unsigned spin = 0; spin < spins; ++spin)
        std::atomic_signal_fence(std::memory_order_seq_cst);  // a compiler-only pause
      spins = (std::min)(spins * 2, 64u);
    }
    commit_slots(element_size, i, k);  // throws, or capacity_ >= i + k (or another thread did it)
  }
}

void ConcurrentCore::commit_slots(size_type element_size, size_type i, size_type n) {
  const CommitLock lock(commit_lock_);
  const size_type cap = capacity_.load(std::memory_order_relaxed);
  if (i <= cap && n <= cap - i) return;  // another thread did it
  if (i > max_size_ || n > max_size_ - i) throw_full();
  // Both arenas reach their step ends; the capacity is what both can hold. Ready bytes come
  // from fresh or decommitted memory, so they read as zero (not ready).
  data_arena_.commit(data_offset_ + (i + n) * element_size);  // strong guarantee on failure
  const size_type data_cap =
      (std::min)((data_arena_.committed() - data_offset_) / element_size, max_size_);
  // The marks are written only when blocks finish out of order, so while one thread appends
  // alone their pages are never touched and cost no RAM and no faults: commit them without
  // prefault. Once a block has finished out of order, more marks will be written, and the new
  // pages are backed here in one call rather than by a page fault in an appending thread.
  const auto populate =
      out_of_order_.load(std::memory_order_relaxed) ? Arena::Populate::all : Arena::Populate::none;
  // On failure data_arena_ keeps a step: harmless, unclaimed.
  ready_arena_.commit(data_cap, populate);
  const size_type flags = (std::min)(ready_arena_.committed(), max_size_);
  // No thread reads a mark at or above the old capacity before the release store below
  // publishes it.
  capacity_.store((std::min)(data_cap, flags), std::memory_order_release);
}

void ConcurrentCore::mark_ready(size_type i, size_type n) noexcept {
  if (!out_of_order_.load(std::memory_order_relaxed))
    out_of_order_.store(true, std::memory_order_relaxed);
  for (size_type k = i, left = n; left != 0;) {
    const size_type chunk = std::bit_floor(left);
    atomic_store_byte(ready_ + k, static_cast<unsigned char>(std::bit_width(chunk)));
    k += chunk;
    left -= chunk;
  }
}

// Ready bytes mark blocks, not elements: a block [i, i + n) is split into power-of-two chunks
// (largest first), and the byte of each chunk's first slot holds log2(chunk length) + 1; the
// other bytes stay 0. The published prefix only ever ends at a block's or a chunk's end, so a
// thread advancing it reads only chunk-start bytes, and skips a whole chunk per byte.
void ConcurrentCore::publish_shared(size_type i, size_type n) noexcept {
  // 1. The common case: the block is next, so publish it directly; its ready bytes are never
  //    needed.
  size_type p = i;
  if (published_.compare_exchange_strong(p, i + n, std::memory_order_seq_cst)) {
    p = i + n;
  } else {
    // 2. A predecessor is still constructing: mark the block ready for whoever publishes it.
    //    Every mark is stored before published_ is read again, so a publisher that stopped at
    //    any chunk of this block (having read its mark as 0) is seen below, and this thread
    //    goes on.
    mark_ready(i, n);
    p = published_.load(std::memory_order_seq_cst);
  }
  // 3. Advance over every run of ready chunks with one CAS per run. seq_cst on the marks and the
  //    counters: of two threads finishing neighbouring blocks, at least one sees the other's
  //    claim and mark. Only marks of claimed slots are read (committed before the claim), so a
  //    thread appending alone never touches them.
  for (;;) {
    const size_type q = ready_run_end(p, claimed_.load(std::memory_order_seq_cst));
    if (q == p) return;
    if (published_.compare_exchange_strong(p, q, std::memory_order_seq_cst)) p = q;
    // else p is the prefix another thread published (a chunk boundary too): scan from there
  }
}

}  // namespace reservoir::detail
