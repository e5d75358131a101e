// reservoir/detail/pace_state.hpp - what a thread knows of its last one-index shared claim,
// for pacing (ConcurrentCore::claim_one, note_cut and pay_pace in src/concurrent_pacing.cpp; the
// bounds are in spin.hpp).
#pragma once

#include <cstdint>

#include <reservoir/detail/spin.hpp>  // the bounds

namespace reservoir::detail {

// A hint, never a correctness condition (a core made later at the same address may inherit one
// pause and a count). Constant-initialized and trivially destructible, so reaching it costs no
// call where TLS is native (ELF, Mach-O: one where the compiler emulates TLS, as MinGW's GCC does).
struct PaceState {
  const void* core = nullptr;  // the ConcurrentCore of the last claim
  std::uint64_t last = 0;      // its ticket
  std::uint32_t owed = 0;      // CPU pauses to spin before the next claim on that core
  std::uint32_t paced = 0;     // claims in a row after which this thread paused
  std::uint32_t unpaced = 0;   // cuts to let pass without a pause (pausing did not pay)
};
inline constinit thread_local PaceState t_pace{};

}  // namespace reservoir::detail
