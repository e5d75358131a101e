// Closing ConcurrentDynArray's claims after a refused commit or a one-index claim past max_size(),
// and reopening them: each closing has an epoch, so an undone claim leaves only its own closing
// (one a child reopened is not left by the parent's claims that the reopening discarded).
#include <reservoir/detail/concurrent_core.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

#include <reservoir/detail/process_identity.hpp>

#include "commit_lock.hpp"

namespace reservoir::detail {

// Closes the claims after a refused commit or a claim past max_size (under the commit lock): every
// one-index claim at or past capacity_ is undone, and the counter goes back to capacity_ once they
// all have left. Returns the closing's epoch. (Why a claim below capacity is never undone:
// claim_one_slow, concurrent_claim.cpp.)
std::uint64_t ConcurrentCore::close_claims(unsigned char reason, std::error_code error) noexcept {
  closed_reason_.store(reason, std::memory_order_relaxed);
  closed_error_value_.store(error.value(), std::memory_order_relaxed);
  closed_error_category_.store(&error.category(), std::memory_order_relaxed);
  closed_at_.store(capacity_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  closed_generation_.store(fork_generation(), std::memory_order_relaxed);
  // A fresh epoch (an open counter has none): a claim undone by an earlier closing that a child
  // reopened cannot take this one for its own (unless it stalls through 2^15 closings).
  closed_epoch_ = static_cast<std::uint16_t>((closed_epoch_ + 1) & (kEpochMask >> kEpochShift));
  const std::uint64_t epoch = std::uint64_t{closed_epoch_} << kEpochShift;
  // The fields above reach every claim that sees kClosed through claimed_'s release sequence.
  return claimed_.fetch_or(kClosed | epoch, std::memory_order_seq_cst) | kClosed | epoch;
}

// Undoes a one-index claim made while claims were closed or undone by a closing (a claim of an
// index at or past closed_at_), reopening the claims when it is the last such claim left. `epoch`
// is the closing's (claimed_ & kEpochMask while it was closed); nothing is undone if that closing
// has been reopened without this claim (reopen_inherited).
void ConcurrentCore::leave_closed(std::uint64_t epoch) noexcept {
  std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  do {
    // Reopened without this claim (reopen_inherited discarded it): nothing to undo.
    if ((word & (kClosed | kEpochMask)) != (kClosed | epoch)) return;
  } while (!claimed_.compare_exchange_weak(word, word - 1, std::memory_order_seq_cst));
  --word;
  // The last undone claim to leave reopens. A failed exchange means another claim came (it is
  // undone, and will leave and check in turn).
  const std::uint64_t reopen = closed_at_.load(std::memory_order_relaxed);
  if (word == (kClosed | epoch | reopen))
    (void)claimed_.compare_exchange_strong(word, reopen, std::memory_order_seq_cst);
}

// For a claim that met closed claims: if a thread of a parent process closed them, the claims it
// undid will never leave in this process, so they are reopened here (at closed_at_, under the
// commit lock) and true is returned; the claims undone by that closing in this process do not
// leave it then (leave_closed sees another epoch). False: closed in this process.
bool ConcurrentCore::reopen_inherited() noexcept {
  if (closed_generation_.load(std::memory_order_relaxed) == fork_generation()) return false;
  const CommitLock lock(commit_lock_);
  std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  while ((word & kClosed) != 0) {
    // Closed in this process since (under the lock, which this thread now holds): its own.
    if (closed_generation_.load(std::memory_order_relaxed) == fork_generation()) return false;
    // The claims made here meanwhile are discarded with the parent's: they see the counter open
    // or under another epoch, and do not leave.
    if (claimed_.compare_exchange_weak(word, closed_at_.load(std::memory_order_relaxed),
                                       std::memory_order_seq_cst))
      break;
  }
  return true;
}

// Throws what closed the claims (std::length_error or OsAllocationError) for index i, naming the
// user's call.
void ConcurrentCore::throw_closed(ClaimSite site, size_type i) const {
  if (closed_reason_.load(std::memory_order_relaxed) != kClosedRefused) throw_full(site.call);
  const std::error_category* const category =
      closed_error_category_.load(std::memory_order_relaxed);
  const std::error_code error(closed_error_value_.load(std::memory_order_relaxed),
                              category != nullptr ? *category : std::generic_category());
  // For one of reservoir's own limits, what the refused commit said of the limit follows.
  std::string said = std::string("reservoir::ConcurrentDynArray::") + site.call +
                     " needed it for index " + std::to_string(i) + "; nothing was appended";
  if (std::string advice = refusal_advice(error); !advice.empty()) said += ". " + advice;
  throw OsAllocationError("commit", site.element_size,
                          static_cast<const std::byte*>(data()) + i * site.element_size, error,
                          said);
}

void ConcurrentCore::throw_full(const char* call) const {
  std::string message = std::string("reservoir::ConcurrentDynArray::") + call +
                        ": full at max_size() " + std::to_string(max_size_);
  if (max_size_ == 0) {
    message +=
        ": a default-constructed or moved-from ConcurrentDynArray has no reservation; construct "
        "it with reservoir::max_elements(n) (or move-assign such an array into it)";
  }
  throw std::length_error(message);
}

}  // namespace reservoir::detail
