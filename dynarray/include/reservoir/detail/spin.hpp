// reservoir/detail/spin.hpp - how a thread that lost a claim or was cut into waits: a CPU pause
// hint, the backoff's and the pacing's bounds, shared by ConcurrentDynArray, its tests and the
// benchmark's claim floor.
#pragma once

#include <atomic>

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <immintrin.h>  // _mm_pause
#elif defined(_MSC_VER) && defined(_M_ARM64)
#include <intrin.h>  // __yield
#endif

namespace reservoir::detail {

// A spin-wait hint to the CPU (x86 pause, Arm yield): a short wait that leaves the core's
// pipeline and memory system to others.
inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(_M_X64) || defined(_M_IX86)
  _mm_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  __asm__ __volatile__("yield");
#elif defined(_M_ARM64)
  __yield();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);  // a compiler-only pause
#endif
}

// Pauses after a lost claim: the first wait, and the longest spun (a wait doubles after each
// loss): long enough for the winner to append hundreds of elements with the counter's line to
// itself (what a pause costs: docs/design.md, "Figures behind the constants"). A thread that loses
// again after the longest spin yields its CPU instead of spinning on: the winners are running (each
// loss means one claimed), and where threads outnumber the cores, or a tool runs one thread at a
// time (valgrind), the CPU it would spin on is one they need. With the CPU to itself, a yield
// returns at once, and the next loss yields again.
inline constexpr unsigned kFirstBackoff = 64;
inline constexpr unsigned kMaxSpin = 1024;

// Pacing of one-index claims (ConcurrentCore::claim_one): a thread whose streak another thread cut
// into pauses before its next claim (kFirstBackoff pauses, doubling to kMaxSpin) unless it holds
// the turn; after kPacedTurn such pauses in a row it takes the turn. A pause after which the
// others claimed at most kRunPaid indices bought no streak: the thread then lets kUnpacedCuts cuts
// pass without pausing.
inline constexpr unsigned kPacedTurn = 8;
inline constexpr unsigned kRunPaid = 8;
inline constexpr unsigned kUnpacedCuts = 256;

// ConcurrentCore::wait_for_size checks the prefix between yields of its CPU for up to
// kWaitYieldingMicroseconds, and only then sleeps until a publish wakes it. A thread waiting for
// one that lost its CPU must not spin through that thread's time slice: a yield hands the CPU to
// another runnable thread (that one, if it waits on the same CPU) in one context switch, where a
// sleep and its wake cost system calls on both sides and a wake of the sleeper (tens of
// microseconds on a virtual machine: more than the handover of a block between threads, which an
// ordered memo makes at every block). With nothing else to run a yield returns at once, so the
// thread checks as often as a spin of pauses would have, and a spin before the yields, measured,
// did not pay. The bound, a fraction of a time slice, ends the waits that yielding does not
// shorten: an appender descheduled for longer, or a scheduler that keeps running the yielding
// thread. In microseconds: a plain number, so that the public headers need no <chrono> (a program
// that includes <windows.h> before them, with its min and max macros, could not include it then).
inline constexpr long long kWaitYieldingMicroseconds = 1000;

}  // namespace reservoir::detail
