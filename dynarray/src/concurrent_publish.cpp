// ConcurrentDynArray's walk of published_ over the ready marks (size(), and blocks that finish
// out of order), and the wait for a longer prefix; the publishes themselves are inline in
// detail/concurrent_publish.hpp.
#include <reservoir/detail/concurrent_publish.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <reservoir/detail/spin.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {

// Moves published_ from p (a value it had) over the ready pieces that follow it, and returns the
// prefix found (at least p). Several threads may do it at once: the furthest wins.
ConcurrentCore::size_type ConcurrentCore::advance_published(size_type p) const noexcept {
  // Marks below capacity_ are committed, and those of unclaimed indices read 0.
  const size_type q = ready_end(p, capacity_.load(std::memory_order_acquire));
  if (q == p) return p;
  // published_ only grows, and every value it takes is a prefix of ready elements: move it to q
  // unless another thread has moved it as far already (a lost CAS means it moved: bounded).
  size_type current = p;
  while (current < q && !published_.compare_exchange_weak(current, q, std::memory_order_acq_rel,
                                                          std::memory_order_acquire)) {
  }
  return (std::max)(current, q);
}

// The prefix waited for is held back by appends in progress, whose threads may have lost their
// CPU (to this one, among others): after a short spin, which covers an appender that is running,
// the thread sleeps in the OS. Before it sleeps it sets the flag in size_waiters_ and issues the
// process-wide barrier, then checks again: with wake_waiters' compiler barrier on the publishing
// side, either that check sees the publish or the publish sees the flag and wakes it (the word
// changes, so a wake between the check and the sleep is not missed either). A refused barrier,
// or none here, leaves the thread yielding its CPU between checks instead.
ConcurrentCore::size_type ConcurrentCore::wait_for_size(size_type n) const noexcept {
  size_type s = size();
  for (unsigned spin = 0; s < n && spin < kWaitSpin; ++spin) {
    cpu_pause();
    s = size();
  }
  while (s < n) {
    if (waits_sleep_) {
      const std::uint32_t word = size_waiters_.fetch_or(1u, std::memory_order_relaxed) | 1u;
      if (!pal::process_barrier()) {
        s = size();
        if (s >= n) break;
        pal::wait_while_equal(size_waiters_, word);
        s = size();
        continue;
      }
    }
    pal::yield_thread();
    s = size();
  }
  return s;
}

// A thread sleeps in wait_for_size: clear the flag, change the word (so that a thread about to
// sleep on the old word does not) and wake them all; each checks its own count again.
void ConcurrentCore::wake_sleepers() noexcept {
  std::uint32_t word = size_waiters_.load(std::memory_order_relaxed);
  while ((word & 1u) != 0) {
    // word + 1 clears bit 0 and counts the wake. A lost exchange: another publish woke them, or
    // a sleeper set the flag again since (then this wake is for it too).
    if (size_waiters_.compare_exchange_weak(word, word + 1, std::memory_order_relaxed)) {
      pal::wake_all(size_waiters_);
      return;
    }
  }
}

}  // namespace reservoir::detail
