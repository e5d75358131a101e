// What the page pools (page_pools.cpp) and the sub-page runs (sub_page_runs.cpp) share: one lock
// for every class of both, and the committed bytes their parked slots hold against one resident
// limit. pool_state.cpp owns it; nothing here calls up.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include <reservoir/arena.hpp>

namespace reservoir::detail {

struct PoolState {
  std::mutex mutex;          // guards every class of both sources, and `resident`
  std::size_t resident = 0;  // committed bytes in free slots, sub-page slots too
  std::atomic<std::size_t> resident_limit{kDefaultPoolResidentLimit};
  std::atomic<std::size_t> resident_seen{0};  // `resident` for readers without the lock
  // false without fork handlers (the provider says so before any slot is taken): then no pool
  // hands out a slot, so a forked child never meets one half-taken.
  std::atomic<bool> enabled{true};

  void note_resident() noexcept { resident_seen.store(resident, std::memory_order_relaxed); }
};

// Never destroyed: an arena in a static object may be destroyed after any function-local static.
PoolState& pool_state() noexcept;

}  // namespace reservoir::detail
