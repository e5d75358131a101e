// The memory-limit check (memory_limit.cpp): the headroom under the process's memory limit, and
// both checks of a commit step (the machine's, from machine_memory.hpp, then the limit's).
#pragma once

#include <cstddef>
#include <string>
#include <system_error>

#include "machine_memory.hpp"

namespace reservoir::detail {

// A commit step is charged before it is committed: charge() takes the bytes out of the
// process-wide headroom (failing, and taking nothing, if they do not fit) and counts them as in
// flight until settle() says they are populated (then the OS's usage figure includes them).
// refund() gives back a charge whose commit failed.

// Nothing is read from the OS (cgroup files, the machine's memory) until the committed bytes of
// checked steps, summed over the process, pass kUnreadCommitBytes: the step that takes the sum
// past it is the first one checked against the cgroup's limit and the machine. It is a quarter
// of the smallest margin either check keeps (8 MiB under a limit, 64 MiB on a machine), so the
// bytes committed unread cannot take the process past a limit it was not already within the
// margin of. A limit set by hand (set_memory_limit) is checked from the first step.
inline constexpr std::size_t kLeastLimitMargin = std::size_t{8} << 20;
inline constexpr std::size_t kUnreadCommitBytes = kLeastLimitMargin / 4;

// Charges `populated` bytes about to be backed; true if they fit (or no limit applies).
// *charged is what was taken (0 when nothing is checked): what a refund may give back. `read`:
// the limits may be read (kUnreadCommitBytes); a cgroup's limit is not checked otherwise.
bool memory_limit_charge(std::size_t populated, bool read, std::size_t* charged) noexcept;
// Both checks of a commit step of `committed` bytes, `populated` of them backed at once and
// `backed` of them backed by the time the caller has written what it commits for:
// machine_can_back(), then memory_limit_charge(); the Refusal if either says no (then nothing is
// taken from either headroom).
std::error_code charge_step(std::size_t committed, std::size_t populated, std::size_t backed,
                            std::size_t* charged) noexcept;
// The charged bytes are backed now (or will be by the caller's next stores).
void memory_limit_settle(std::size_t charged) noexcept;
// The charged step was not committed (or not backed): its `charged` bytes go back to the
// limit's headroom and its `backed` bytes (what charge_step checked against the machine, 0 if it
// was not called) to the machine's.
void memory_limit_refund(std::size_t charged, std::size_t backed) noexcept;
// True if commit steps are checked against a limit: one set by set_memory_limit(), or a cgroup's
// as of the latest reading (taken now if there is none yet and a step committing up to `most`
// bytes would take the process past kUnreadCommitBytes; false without a reading before that).
bool memory_limit_in_force(std::size_t most) noexcept;
// The sentence appended to a refused step's message: the limit, its source, the usage, the
// margin, and how to raise or turn off the check.
std::string memory_limit_advice();
// fork(): the memory-limit locks held across it (prepare) and released (after, both sides).
void memory_limit_lock_for_fork() noexcept;
void memory_limit_unlock_after_fork() noexcept;

}  // namespace reservoir::detail
