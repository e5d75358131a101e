// pal on Linux, its own paths (RESERVOIR_PAL_LINUX): the process-wide barrier through membarrier,
// and the sleep on a word through futex. pal_posix_generic.cpp has the other systems' answers.
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <limits>

#include "pal_posix_internal.hpp"

namespace reservoir::pal {

namespace {
std::atomic<int> g_barrier_registered{-1};

long membarrier_call(int command) noexcept {
  return ::syscall(SYS_membarrier, command, 0U, 0);
}
}  // namespace

bool process_barrier_supported() noexcept {
  std::error_code ec;
  if (injected_failure(Op::barrier, &ec)) return false;
  // Registered once per process (registering again, by a second thread asking first, changes
  // nothing); a kernel without the command (before 4.14) or a sandbox that filters the call
  // answers no, and then nothing relies on it.
  return kept_answer(g_barrier_registered, [] {
    const long commands = membarrier_call(MEMBARRIER_CMD_QUERY);
    return commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
           membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  });
}

std::error_code process_barrier() noexcept {
  std::error_code ec;
  if (injected_failure(Op::barrier, &ec)) return ec;
  if (membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) return last_error();
  return {};
}

void wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  if (std::error_code ec; injected_failure(Op::wait, &ec)) {
    sleep_word_poll();  // as when the OS refuses the wait (below)
    return;
  }
  // The kernel compares the word with `expected` under its own lock before it sleeps, so a wake
  // after the change cannot be missed. EAGAIN (the word had changed) and EINTR return to the
  // caller; anything else (no futex here: ENOSYS under a seccomp filter) sleeps one poll instead,
  // so the caller's loop never spins.
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  if (::syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0) != 0 &&
      errno != EAGAIN && errno != EINTR) {
    sleep_word_poll();
  }
}

void wake_all(const std::atomic<std::uint32_t>& word) noexcept {
  std::error_code ignored;
  (void)injected_failure(Op::wake, &ignored);  // counted only: the wake is made all the same
  // Fails only where the wait failed too (no futex), and such waiters poll.
  (void)::syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, std::numeric_limits<int>::max(), nullptr,
                  nullptr, 0);
}

}  // namespace reservoir::pal
