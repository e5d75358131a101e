// ConcurrentDynArray's walk of published_ over the ready marks (size(), and blocks that finish
// out of order), and the wait for a longer prefix; the publishes themselves are inline in
// detail/concurrent_publish.hpp.
#include <reservoir/detail/concurrent_publish.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include <reservoir/detail/process_identity.hpp>
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

namespace {

// A thread asleep in wait_for_size: which array, the count it waits for, and the word it sleeps
// on, its own, so that a publish wakes only the threads whose count it reached (threads waiting
// for later blocks sleep on). Slots are shared by every array of the process; a thread that finds
// none free yields its CPU between checks instead of sleeping.
struct ParkingSlot {
  std::atomic<std::uint32_t> taken{0};  // 0 free, else parking_stamp() of the taker's process
  std::atomic<std::uint32_t> word{0};   // bit 0 set while its thread sleeps; + 1 by each wake
  std::atomic<const void*> core{nullptr};
  std::atomic<std::size_t> target{0};
};
constexpr unsigned kParkingSlots = 32;
constinit ParkingSlot g_parking[kParkingSlots];

// A slot taken under another stamp was taken by a thread of a parent process, which does not exist
// here: it is free (its array's count of sleepers stays one too high, which costs a scan of the
// slots at each publish and nothing else).
std::uint32_t parking_stamp() noexcept {
  return fork_generation() << 1 | 1u;
}

ParkingSlot* take_parking_slot(const void* core, std::size_t target) noexcept {
  const std::uint32_t stamp = parking_stamp();
  for (ParkingSlot& slot : g_parking) {
    std::uint32_t taken = slot.taken.load(std::memory_order_relaxed);
    if (taken == stamp) continue;
    if (slot.taken.compare_exchange_strong(taken, stamp, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
      slot.target.store(target, std::memory_order_relaxed);
      slot.core.store(core, std::memory_order_relaxed);
      return &slot;
    }
  }
  return nullptr;
}

}  // namespace

// The prefix waited for is held back by appends in progress, whose threads may have lost their
// CPU (to this one, among others): after a bounded time of yielding, the thread sleeps in the OS,
// on its own parking slot's word. It
// counts itself in sleepers_ and, before each sleep, sets bit 0 of that word, issues the
// process-wide barrier and checks size() again. A publish stores, then loads sleepers_ with a
// compiler barrier between, so either the check sees the publish, or the publish sees the count and
// wakes, in wake_sleepers, each slot whose count the prefix reached (the word changes, so a wake
// between the check and the sleep is not missed). Where the OS has no such barrier or refuses it,
// the thread yields its CPU between checks instead of sleeping (publishes do not pay a fence for
// it).
ConcurrentCore::size_type ConcurrentCore::wait_for_size(size_type n) const noexcept {
  size_type s = size();
  // Yielding first, for a bounded time: a thread of this process that lost its CPU to this one
  // gets it back through a yield (one context switch), without the system calls of a sleep and
  // its wake, which cost more than a block's append where threads outnumber the cores and blocks
  // pass from thread to thread; with nothing else to run, a yield returns at once and the thread
  // checks again, as a spin would. A wait longer than that (an appender that stays descheduled)
  // sleeps.
  if (s < n) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::microseconds(kWaitYieldingMicroseconds);
    do {
      pal::yield_thread();
      s = size();
    } while (s < n && std::chrono::steady_clock::now() < until);
  }
  if (s >= n) return s;
  ParkingSlot* const slot = waits_sleep_ ? take_parking_slot(this, n) : nullptr;
  if (slot == nullptr) {
    while (s < n) {
      pal::yield_thread();
      s = size();
    }
    return s;
  }
  sleepers_.fetch_add(1, std::memory_order_relaxed);  // ordered by the barrier below
  for (;;) {
    const std::uint32_t word = slot->word.fetch_or(1u, std::memory_order_relaxed) | 1u;
    const bool ordered = !pal::process_barrier();
    s = size();
    if (s >= n) break;
    if (ordered) {
      pal::wait_while_equal(slot->word, word);
    } else {
      pal::yield_thread();
    }
    s = size();
    if (s >= n) break;
  }
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
  slot->core.store(nullptr, std::memory_order_relaxed);
  slot->taken.store(0, std::memory_order_release);
  return s;
}

// Some thread sleeps in wait_for_size on this array: wake those whose count the prefix reached
// (each checks its own count again), and no other, so that threads waiting for later blocks sleep
// on. Clearing bit 0 changes the word, so a thread about to sleep on it returns at once; a slot
// whose thread is awake already is left alone.
void ConcurrentCore::wake_sleepers() noexcept {
  // Publishes that a sleeper's check missed all get here; with this fence between each one's
  // stores and its size(), the last of them (in the fences' order) finds every one of them.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const size_type s = size();
  const std::uint32_t stamp = parking_stamp();
  for (ParkingSlot& slot : g_parking) {
    if (slot.core.load(std::memory_order_relaxed) != this) continue;
    if (slot.taken.load(std::memory_order_acquire) != stamp ||
        slot.target.load(std::memory_order_relaxed) > s)
      continue;
    std::uint32_t word = slot.word.load(std::memory_order_relaxed);
    // word + 1 clears bit 0 and counts the wake. A lost exchange: another publish woke it, or it
    // woke and went to sleep again (then this publish's wake is for it too: it retries).
    while ((word & 1u) != 0) {
      if (slot.word.compare_exchange_weak(word, word + 1, std::memory_order_relaxed)) {
        pal::wake_all(slot.word);
        break;
      }
    }
  }
}

}  // namespace reservoir::detail
