// ConcurrentDynArray's slots, out of line: construction, moves, the contended and the rare paths
// of the claim and publish protocol (solo mode's end, committing more slots, out-of-order
// publishes). What every append runs is inline in detail/concurrent_core.hpp.
#include <reservoir/detail/concurrent_core.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <reservoir/detail/alignment.hpp>
#include <reservoir/detail/spin.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {
namespace {

// Ready marks must start at zero: never take their reservation from the cache (whose first step
// holds old bytes), so every byte is fresh or decommitted memory, which the OS fills with zeros.
ArenaOptions fresh(ArenaOptions o) noexcept {
  o.reuse_reservation = false;
  return o;
}

// The data arena is page-granular: its commits are published to readers step by step, and its
// element alignment may exceed a sub-page slot's.
ArenaOptions page_granular(ArenaOptions o) noexcept {
  o.sub_page_slot = false;
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

// Counts the forks this process descends from (bumped in each child). A commit lock is held under
// the count of the process that took it, so a child can tell a lock that a thread of its parent
// held at the fork (that thread does not exist in the child) from one held by a thread of its own.
std::atomic<std::uint32_t> g_fork_generation{0};
void count_fork_in_child() noexcept {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
}

// Registers count_fork_in_child once per process. Where registration fails (no memory for it), a
// child forked while a commit was in progress could wait for that commit: docs/api.md says so.
void register_fork_count() noexcept {
  static const bool registered = !pal::at_fork(nullptr, nullptr, &count_fork_in_child);
  (void)registered;
}

// commit_lock_ as a lock, held for one commit step (up to a few milliseconds). Its word is 0 when
// free, otherwise the holder's process stamp (odd, never 0). A waiter of the same process sleeps
// in the OS until the holder lets go (std::atomic::wait: no spinning on a holder that is not
// running, whatever the priorities); a lock held under another stamp was held by a thread of the
// parent when this process was forked, which does not exist here: it is taken over. The
// commit that thread had begun is made again (committing committed pages is harmless).
class CommitLock {
 public:
  explicit CommitLock(std::atomic<std::uint16_t>& word) noexcept : word_(word) {
    const auto me =
        static_cast<std::uint16_t>((g_fork_generation.load(std::memory_order_relaxed) << 1) | 1u);
    std::uint16_t held = word_.load(std::memory_order_relaxed);
    for (;;) {
      if (held != me) {  // free, or left held by a thread that is not in this process
        if (word_.compare_exchange_weak(held, me, std::memory_order_acquire,
                                        std::memory_order_relaxed))
          return;
        continue;
      }
      word_.wait(held, std::memory_order_relaxed);
      held = word_.load(std::memory_order_relaxed);
    }
  }
  ~CommitLock() {
    word_.store(0, std::memory_order_release);
    word_.notify_all();
  }
  CommitLock(const CommitLock&) = delete;
  CommitLock& operator=(const CommitLock&) = delete;

 private:
  std::atomic<std::uint16_t>& word_;
};

}  // namespace

void writer_dropped_unreported(std::size_t count, std::size_t max_size) noexcept {
#if defined(NDEBUG)
  (void)count;
  (void)max_size;
#else
  // The one place the library prints: a checked build stops a silent loss of the user's data.
  std::fprintf(stderr,
               "reservoir::ConcurrentDynArray::Writer destroyed %zu buffered elements it could "
               "not append (max_size() %zu, or the OS refused memory), and no flush() had "
               "reported it: call flush() before the writer's end and handle what it throws "
               "(take_buffered() hands back what did not fit)\n",
               count, max_size);
  std::abort();
#endif
}

bool writer_loss_aborts() noexcept {
#if defined(NDEBUG)
  return false;
#else
  return true;
#endif
}

ConcurrentCore::ConcurrentCore(size_type max_size, size_type element_size, size_type alignment,
                               ArenaOptions options)
    : data_arena_(data_bytes(max_size, element_size, alignment), page_granular(options)),
      ready_arena_(max_size, fresh(options)),
      max_size_(max_size) {
  ready_ = reinterpret_cast<unsigned char*>(ready_arena_.base());
  const auto base = reinterpret_cast<std::uintptr_t>(data_arena_.base());
  data_offset_ =
      static_cast<std::uint32_t>(alignment > kMinBaseAlignment ? -base & (alignment - 1) : 0);
  if (pal::process_barrier_supported()) mode_.store(kSolo, std::memory_order_relaxed);
  register_fork_count();
}

void ConcurrentCore::take(ConcurrentCore& other) noexcept {
  data_arena_ = std::move(other.data_arena_);
  ready_arena_ = std::move(other.ready_arena_);
  max_size_ = std::exchange(other.max_size_, 0);
  ready_ = std::exchange(other.ready_, nullptr);
  data_offset_ = std::exchange(other.data_offset_, 0);
  solo_end_ = std::exchange(other.solo_end_, 0);
  dropped_.store(other.dropped_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  solo_claimed_.store(other.solo_claimed_.exchange(0, std::memory_order_relaxed),
                      std::memory_order_relaxed);
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
    // A solo claim or publish in progress finishes (the owner's next one sees kRevoking). Then
    // solo_claimed_ counts every solo claim, but perhaps not an append_solo claim stored after
    // the barrier: its owner sees kRevoking and asks solo_claim_counted whether it was counted.
    while (solo_depth_.load(std::memory_order_acquire) != 0)
      pal::yield_thread();
    solo_end_ = solo_claimed_.load(std::memory_order_relaxed);
    claimed_.store(solo_end_, std::memory_order_relaxed);
    mode_.store(kShared, std::memory_order_release);
    return;
  }
  (void)wait_while_revoking();
}

unsigned char ConcurrentCore::wait_while_revoking() const noexcept {
  unsigned char mode = kRevoking;
  while ((mode = mode_.load(std::memory_order_acquire)) == kRevoking)
    pal::yield_thread();
  return mode;
}

ConcurrentCore::size_type ConcurrentCore::claim_shared(size_type element_size, size_type n,
                                                       bool partial, size_type* claimed_count) {
  for (;;) {
    size_type i = claimed_.load(std::memory_order_relaxed);
    size_type k = n;
    unsigned spins = kFirstBackoff;
    for (;;) {
      if (partial) {
        k = (std::min)(n, max_size_ - i);  // claimed_ <= capacity_ <= max_size_
        if (k == 0) throw_full();
      }
      const size_type cap = capacity_.load(std::memory_order_acquire);
      if (i > cap || k > cap - i) break;
      // Strong: a failure means another thread claimed. Relaxed: claimed_ only hands out
      // indices; the marks and published_ carry the elements.
      if (claimed_.compare_exchange_strong(i, i + k, std::memory_order_relaxed)) {
        if (claimed_count != nullptr) *claimed_count = k;
        return i;
      }
      if (spins > kMaxSpin) {
        pal::yield_thread();
      } else {
        for (unsigned spin = 0; spin < spins; ++spin)
          cpu_pause();
        spins *= 2;
      }
      i = claimed_.load(std::memory_order_relaxed);  // fresh after the wait
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

ConcurrentCore::size_type ConcurrentCore::advance_published(size_type p) const noexcept {
  // Marks below capacity_ are committed, and those of unclaimed slots read 0.
  const size_type q = ready_run_end(p, capacity_.load(std::memory_order_acquire));
  if (q == p) return p;
  // published_ only grows, and every value it takes is a prefix of ready slots: move it to q
  // unless another thread has moved it as far already (a lost CAS means it moved: bounded).
  size_type current = p;
  while (current < q && !published_.compare_exchange_weak(current, q, std::memory_order_acq_rel,
                                                          std::memory_order_acquire)) {
  }
  return (std::max)(current, q);
}

}  // namespace reservoir::detail
