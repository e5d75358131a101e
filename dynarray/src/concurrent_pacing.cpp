// ConcurrentDynArray's pacing of one-index claims: who pauses when another thread cut into its
// streak, and who holds the turn (the scheme at ConcurrentCore::claim_one, the bounds in spin.hpp).
#include <reservoir/detail/concurrent_core.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>

#include <reservoir/detail/process_identity.hpp>
#include <reservoir/detail/spin.hpp>

namespace reservoir::detail {

// Another thread cut into the calling thread's streak (its new ticket is not pace.last + 1):
// unless it holds the turn, it owes a pause before its next claim, or takes the turn after
// kPacedTurn pauses in a row. A pause pays only if the others claimed a streak meanwhile (more
// than kRunPaid indices): threads that append now and then, between longer work, interleave
// without contending, and such a thread lets the next kUnpacedCuts cuts pass without pausing.
void ConcurrentCore::note_cut(PaceState& pace, std::uint64_t ticket) noexcept {
  if (pace.unpaced != 0) {
    --pace.unpaced;
    return;
  }
  // After a pause, at most kRunPaid claims by the others (or a ticket not above the last one: a
  // closing) means nobody ran meanwhile: pausing costs this thread and buys nothing.
  const void* const me = thread_token();
  const void* const runner = runner_.load(std::memory_order_relaxed);
  if (pace.paced != 0 && (ticket <= pace.last || ticket - pace.last - 1 <= kRunPaid)) {
    // The turn's holder did not run either (it stopped appending, or appends sparsely): this
    // thread takes the turn, so that threads left without a running holder do not pause in step.
    pace.paced = 0;
    pace.unpaced = kUnpacedCuts;
    ++claim_counts().unpaid;
    if (runner != me) {
      runner_.store(me, std::memory_order_relaxed);
      ++claim_counts().turns;
    }
    return;
  }
  if (runner == me) return;
  if (runner == nullptr || pace.paced >= kPacedTurn) {
    runner_.store(me, std::memory_order_relaxed);
    pace.paced = 0;
    ++claim_counts().turns;
    return;
  }
  const unsigned doublings = (std::min)(
      pace.paced, static_cast<std::uint32_t>(std::bit_width(kMaxSpin / kFirstBackoff) - 1));
  pace.owed = kFirstBackoff << doublings;
  ++pace.paced;
  ++claim_counts().paced;
}

// Spins the pauses owed.
void ConcurrentCore::pay_pace(PaceState& pace) noexcept {
  for (std::uint32_t spin = pace.owed; spin != 0; --spin)
    cpu_pause();
  pace.owed = 0;
}

}  // namespace reservoir::detail
