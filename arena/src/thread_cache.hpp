// What one thread keeps for its own next arenas, as data: a parked reservation and the last pool
// slot of each class it gave back. The sources (parked.cpp, page_pools.cpp, sub_page_runs.cpp)
// take and fill a ThreadCache the provider hands them; thread_registry.cpp owns the caches'
// lifetime (one per thread, found through a pal thread key, reaped when the thread ends). Nothing
// here calls anything.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <optional>
#include <utility>

#include <reservoir/arena.hpp>

namespace reservoir::detail {

// A destroyed arena's reservation, kept for the next arena of the same layout and options.
struct Parked {
  void* mapping;
  std::size_t mapping_size;
  std::byte* base;
  std::size_t reserved;
  std::size_t committed;  // kept committed: whole granules
  ArenaOptions options;
};

// A thread's own pool slots: the last slot of each class it gave back, taken again by its next
// arena of that class without the pools' lock, so that threads creating and destroying arrays do
// not contend for it. A cached slot is parked as in the pool (poisoned under ASan, at most
// kPoolKeepPerSlot committed, counted in pool_resident_bytes()); a cached sub-page slot still
// counts as in use in its run, until it goes back to the pool. Its bytes are counted per thread,
// so that no shared counter moves at every array: a thread's cache keeps pages only while the
// pools' parked bytes and its own stay under the resident limit, so all threads' caches together
// may exceed the limit by what each holds (at most one slot a class).
inline constexpr std::size_t kPoolClassCount = 7;     // page_pools.cpp's classes
inline constexpr std::size_t kPoolSubClassCount = 4;  // sub_page_runs.cpp's classes
struct PoolCache {
  struct Page {
    std::byte* base = nullptr;  // nullptr: none
    std::size_t committed = 0;
    bool open = false;     // its chunk is an open reservation
    bool guarded = false;  // a guarded one (address_space.hpp's ChunkKind)
  };
  Page page[kPoolClassCount];
  std::byte* sub[kPoolSubClassCount] = {};
  std::size_t bytes = 0;  // committed bytes in the slots above (a sub-page slot: its stride)
  // The address space of the large-class slots above (their strides): spare for the owner's own
  // next default array (own_cached_spare), held for everyone else's until reclaim_cached_spare
  // gives it back to the pools. Read by the owner without the lock.
  std::atomic<std::size_t> spare{0};

  PoolCache() = default;
  PoolCache(PoolCache&& o) noexcept { *this = std::move(o); }
  PoolCache& operator=(PoolCache&& o) noexcept {
    std::copy(std::begin(o.page), std::end(o.page), std::begin(page));
    std::copy(std::begin(o.sub), std::end(o.sub), std::begin(sub));
    bytes = o.bytes;
    spare.store(o.spare.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
};

// One thread's cache. `busy` keeps the owner and a thread emptying the cache (a trim, a reap, a
// clear) apart; only the latter ever waits. No other lock is taken while it is held; the OS is
// called under it only to decommit what a slot entering the cache keeps beyond its share.
struct ThreadCache {
  std::atomic_flag busy;  // clear from construction (C++20)
  std::optional<Parked> parked;
  PoolCache pool;

  void lock() noexcept {
    while (busy.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() noexcept { busy.clear(std::memory_order_release); }
};

}  // namespace reservoir::detail
