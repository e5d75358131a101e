// reservoir/memory_limit.hpp - the memory-limit check of commit steps, process-wide. Included by
// <reservoir/arena.hpp>.
#pragma once

#include <cstddef>

#include <reservoir/settings.hpp>

namespace reservoir {

// ---- memory limits -----------------------------------------------------------------------------
//
// Under a memory cgroup limit, touching a page past the limit runs the OOM killer: SIGKILL, for
// std::vector and for us alike (populating a step does the same). So before each commit step an
// arena (with respect_memory_limit, the default) compares the step with the headroom left under
// the effective limit minus a margin (1/32 of the limit, at least 8 MiB) and refuses the step with
// OsAllocationError (Refusal::memory_limit) if it does not fit. The headroom is one figure for
// the whole process: each step takes its bytes from it with a compare-and-swap that fails rather
// than go below the re-read threshold, so threads racing the limit cannot overshoot it together;
// readings are taken one at a time and subtract what other threads charged but have not yet
// populated. The margin covers what the kernel counts beyond the arenas' pages (page tables,
// stacks, the allocator; figures: docs/memory-limit.md). Only bytes populated at once or about to
// be written are charged (reserve() charges its first step): committed pages nobody touches cost
// nothing, and later first touches of them are not checked. Decommits give their charge back. The
// cgroup's files are read at most once per commit step; a reading is reused for later steps while
// the headroom it left stays above a quarter of the limit and it is younger than 20 ms (1 s when no
// limit is set). Memory the rest of the program allocates in between is not seen until the next
// reading. Nothing is read (cgroup files, /proc/meminfo) before the arenas of the process have
// committed 2 MiB in all, far less than either margin, so a process that keeps its arrays small
// never reads them; a limit set by hand is checked from the first step. Independently of any limit,
// a step of an eighth of the RAM or more is refused (Refusal::machine_memory) if it commits more
// than RAM + swap under heuristic overcommit, or backs more than MemAvailable + SwapFree:
// std::vector's allocation would be refused too. Every step also takes what it backs from the
// machine's headroom (MemAvailable + SwapFree less a margin of 1/32 of the RAM, 64 to 256 MiB; a
// step of at most kPopulatedStepLimit is refused only where less than itself is available). Where
// readings fail (no file descriptor left) both headrooms keep their last figure, less what steps
// took and plus what arenas gave back since.
//
// The limit is set with set_memory_limit() and read with memory_limit_headroom() (settings.hpp).

}  // namespace reservoir
