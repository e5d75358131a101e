// pal where Linux's own paths are not taken (macOS, FreeBSD, and Linux under the posix-generic
// build): no process-wide barrier, a sleep on a word made of short polls, and no huge-page advice
// honoured. pal_linux_sync.cpp and pal_linux_huge_pages.cpp have Linux's answers.
#include <atomic>
#include <cstdint>

#include "pal_posix_internal.hpp"

namespace reservoir::pal {

// ---- barrier and sleeps on a word --------------------------------------------------------------

bool process_barrier_supported() noexcept {
  std::error_code ec;
  if (injected_failure(Op::barrier, &ec)) return false;
  return false;
}

std::error_code process_barrier() noexcept {
  std::error_code ec;
  if (injected_failure(Op::barrier, &ec)) return ec;
  return std::make_error_code(std::errc::not_supported);
}

void wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  if (std::error_code ec; injected_failure(Op::wait, &ec)) {
    sleep_word_poll();  // as when the word still holds `expected` (below)
    return;
  }
  if (word.load(std::memory_order_relaxed) == expected) sleep_word_poll();
}

void wake_all(const std::atomic<std::uint32_t>& word) noexcept {
  std::error_code ignored;
  (void)injected_failure(Op::wake, &ignored);  // counted only, as where the wake is made
  (void)word;                                  // the waiters poll
}

// ---- huge pages --------------------------------------------------------------------------------

bool transparent_huge_pages() noexcept {
  if (const int forced = detail::transparent_huge_pages_override(); forced >= 0) return forced;
  return false;
}

bool host_reclaims_free_pages() noexcept {
  if (detail::transparent_huge_pages_override() >= 0) return false;
  return false;
}

}  // namespace reservoir::pal
