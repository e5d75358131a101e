// What the machine can back (machine_memory.cpp): the machine's headroom that commit steps take
// from, and the bytes given back to the OS that the headrooms regain. It includes no other file
// of arena/src.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace reservoir::detail {

// A headroom's figure: kUnknown while none is known (or one is being read), kUnlimited and above
// where nothing limits it; clamp() brings a byte count into that range.
inline constexpr std::int64_t kUnknown = std::numeric_limits<std::int64_t>::min();
inline constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max() / 2;
inline std::int64_t clamp(std::size_t v) noexcept {
  return static_cast<std::int64_t>(v < static_cast<std::size_t>(kUnlimited - 1) ? v
                                                                                : kUnlimited - 1);
}
// The steady clock in nanoseconds: the age of a reading.
std::int64_t now_ns() noexcept;

// True unless a commit of `committed` bytes, `populated` of them backed at once, is more than
// the machine can back (checked for steps of at least an eighth of its RAM), or its `backed`
// bytes (what the caller will write) do not fit what the machine has left, less a margin
// (the machine's headroom, re-read as it runs low; the caller checks no step before its process
// has committed kUnreadCommitBytes). A step of at most kPopulatedStepLimit keeps only the least
// margin free. On true the `backed` bytes are taken from the machine's headroom; on false nothing.
bool machine_can_back(std::size_t committed, std::size_t populated, std::size_t backed) noexcept;
// Gives back n bytes machine_can_back() took for a step that was then not backed.
void machine_give_back(std::int64_t n) noexcept;
// The sentence for a step machine_can_back() refused: the machine as of the last reading that
// succeeded.
std::string machine_memory_advice();
// `bytes` that were committed (and charged, or counted in a reading) went back to the OS:
// decommitted, or their mapping released. A headroom that a failed reading keeps (the OS will not
// tell now) regains them; a successful reading sees them itself.
void memory_released(std::size_t bytes) noexcept;
// All bytes memory_released() was told of, ever.
std::size_t released_total() noexcept;
// fork(): the machine check's locks held across it (prepare) and released (after, both sides).
void machine_lock_for_fork() noexcept;
void machine_unlock_after_fork() noexcept;

}  // namespace reservoir::detail
