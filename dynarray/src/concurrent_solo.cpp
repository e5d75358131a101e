// The end of ConcurrentDynArray's solo mode: the process-wide barrier, the wait for the owner's
// sections in progress, a fork's takeover (detail/concurrent_solo.hpp has the scheme).
#include <reservoir/detail/concurrent_core.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <system_error>

#include <reservoir/detail/process_identity.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {

// Ends solo mode, or waits while another thread ends it (then the mode is kShared, or kSolo again
// if that thread's barrier was refused). A refused barrier throws std::system_error naming `call`.
void ConcurrentCore::end_solo(const char* call) {
  // kSolo, or an end begun by a thread of a parent process (which does not exist here).
  std::uint32_t mode = mode_.load(std::memory_order_seq_cst);
  const std::uint32_t mine = revoking_mode();
  if ((mode == kSolo || (is_revoking(mode) && mode != mine)) &&
      mode_.compare_exchange_strong(mode, mine, std::memory_order_seq_cst)) {
    if (const std::error_code ec = revoke()) {
      throw std::system_error(ec, std::string("reservoir::ConcurrentDynArray::") + call +
                                      ": a second appending thread needs a process-wide "
                                      "memory barrier");
    }
    return;
  }
  (void)wait_while_revoking();
}

// The end of solo mode after mode_ was set to revoking_mode() by this thread: the barrier, the wait
// for solo sections in progress, the count of solo claims. A refused barrier sets kSolo again and
// is returned.
std::error_code ConcurrentCore::revoke() noexcept {
  if (const std::error_code ec = pal::process_barrier()) {
    mode_.store(kSolo, std::memory_order_release);
    return ec;
  }
  // A solo claim or publish in progress finishes (the owner's next one sees kRevoking). Then
  // solo_claimed_ counts every solo claim, but perhaps not an append_solo claim stored after
  // the barrier: its owner sees kRevoking and asks solo_claim_counted whether it was counted.
  // Sections counted under another fork generation were a parent's threads': none is in
  // progress here, and solo mode ends with solo_claimed_ as it stands.
  const std::uint32_t generation = fork_generation();
  while (solo_depth_.load(std::memory_order_acquire) != 0 &&
         solo_generation_.load(std::memory_order_acquire) == generation)
    pal::yield_thread();
  solo_end_ = solo_claimed_.load(std::memory_order_relaxed);
  claimed_.store(solo_end_, std::memory_order_seq_cst);
  mode_.store(kShared, std::memory_order_release);
  return {};
}

// Waits while another thread of this process ends solo mode; returns the mode then (kShared, or
// kSolo if that thread's barrier was refused). An end begun in a parent process (whose thread does
// not exist here) is taken over and finished.
std::uint32_t ConcurrentCore::wait_while_revoking() noexcept {
  const std::uint32_t mine = revoking_mode();
  for (;;) {
    std::uint32_t mode = mode_.load(std::memory_order_acquire);
    if (!is_revoking(mode)) return mode;
    // Begun in a parent process: its thread is not here to finish it.
    if (mode != mine && mode_.compare_exchange_strong(mode, mine, std::memory_order_seq_cst))
      return revoke() ? kSolo : kShared;
    pal::yield_thread();
  }
}

}  // namespace reservoir::detail
