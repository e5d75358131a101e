// The fork generation's counter and the handler that bumps it in each child
// (detail/process_identity.hpp).
#include <reservoir/detail/process_identity.hpp>

#include <atomic>
#include <cstdint>

#include <reservoir/pal.hpp>

namespace reservoir::detail {

std::atomic<std::uint32_t> g_fork_generation{0};

namespace {

// Bumps the fork generation in each child (see fork_generation()). A commit lock is held under
// the generation of the process that took it, so a child can tell a lock that a thread of its
// parent held at the fork (that thread does not exist in the child) from one held by a thread of
// its own.
void count_fork_in_child() noexcept {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void register_fork_count() noexcept {
  static const bool registered = !pal::at_fork(nullptr, nullptr, &count_fork_in_child);
  (void)registered;
}

}  // namespace reservoir::detail
