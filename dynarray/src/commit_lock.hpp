// ConcurrentDynArray's commit lock (ConcurrentCore::commit_lock_): held by the thread that
// commits more memory for an array, and by the one closing or reopening its claims.
#pragma once

#include <atomic>
#include <cstdint>

#include <reservoir/detail/process_identity.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {

// commit_lock_ as a lock, held for one commit step (up to a few milliseconds). Its word is 0 when
// free, otherwise the holder's process stamp (odd, never 0), plus kWaiters once a thread of the
// same process waits for it. Such a waiter sleeps in the OS until the holder lets go
// (pal::wait_while_equal: no spinning on a holder that is not running, whatever the priorities;
// not std::atomic::wait, which can miss a wake on some standard libraries), and only a release
// that finds kWaiters set wakes anyone, so an uncontended commit makes no extra system call. A
// thread that has waited takes the lock with kWaiters set, since others may still sleep. A lock
// held under another stamp was held by a thread of the parent when this process was forked,
// which does not exist here: it is taken over. The commit that thread had begun is made again
// (committing committed pages is harmless).
class CommitLock {
 public:
  explicit CommitLock(std::atomic<std::uint32_t>& word) noexcept : word_(word) {
    const std::uint32_t me = stamp();
    std::uint32_t take = me;
    std::uint32_t held = word_.load(std::memory_order_relaxed);
    for (;;) {
      if ((held & ~kWaiters) != me) {  // free, or left held by a thread not in this process
        if (word_.compare_exchange_weak(held, take, std::memory_order_acquire,
                                        std::memory_order_relaxed))
          return;
        continue;
      }
      if ((held & kWaiters) == 0 &&
          !word_.compare_exchange_weak(held, held | kWaiters, std::memory_order_relaxed,
                                       std::memory_order_relaxed))
        continue;  // it changed: look again
      pal::wait_while_equal(word_, held | kWaiters);
      take = me | kWaiters;
      held = word_.load(std::memory_order_relaxed);
    }
  }
  // Takes the lock only if it is free now (or left held by a thread not in this process).
  struct TryOnly {};
  CommitLock(std::atomic<std::uint32_t>& word, TryOnly) noexcept : word_(word) {
    const std::uint32_t me = stamp();
    std::uint32_t held = word_.load(std::memory_order_relaxed);
    owned_ = (held & ~kWaiters) != me &&
             word_.compare_exchange_strong(held, me, std::memory_order_acquire,
                                           std::memory_order_relaxed);
  }
  ~CommitLock() {
    if (!owned_) return;
    if ((word_.exchange(0, std::memory_order_release) & kWaiters) != 0) pal::wake_all(word_);
  }
  bool owned() const noexcept { return owned_; }
  CommitLock(const CommitLock&) = delete;
  CommitLock& operator=(const CommitLock&) = delete;

 private:
  static constexpr std::uint32_t kWaiters = 2;
  // Odd, without kWaiters, and distinct for 2^30 nested forks (then it repeats, which is taken
  // as never).
  static std::uint32_t stamp() noexcept { return fork_generation() << 2 | 1u; }

  std::atomic<std::uint32_t>& word_;
  bool owned_ = true;
};

}  // namespace reservoir::detail
