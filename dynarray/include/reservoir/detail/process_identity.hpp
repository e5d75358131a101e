// reservoir/detail/process_identity.hpp - who wrote a word of ConcurrentDynArray's state: the fork
// generation of this process and a token of the calling thread. A word that records them tells a
// thread of this process from one of a parent (which does not exist in a child), and the thread
// that owns solo mode or holds the pacing turn from the others.
#pragma once

#include <atomic>
#include <cstdint>

namespace reservoir::detail {

// The number of forks this process descends from: bumped in each child (a pthread_atfork handler,
// registered by register_fork_count). Counts wrap after 2^30 nested forks, which is taken as
// never.
extern std::atomic<std::uint32_t> g_fork_generation;
inline std::uint32_t fork_generation() noexcept {
  return g_fork_generation.load(std::memory_order_relaxed);
}
// Registers the handler that bumps the generation in each child, once per process (the first
// ConcurrentCore made calls it). Where registration fails (no memory for it), a child forked while
// a commit was in progress could wait for that commit: docs/api.md says so.
void register_fork_count() noexcept;

// An address unique to the calling thread while it runs (a thread started after it ended may get
// the same one). Constant-initialized, so reaching it costs no call.
inline const void* thread_token() noexcept {
  static thread_local const char token = 0;
  return &token;
}

}  // namespace reservoir::detail
