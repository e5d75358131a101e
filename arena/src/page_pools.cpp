// The slot pools: reservations for small arenas carved from large chunks (one OS mapping per
// chunk, not per arena), and the slots of destroyed arenas kept with their first pages still
// committed, so that the next small arena costs no system call and no page fault.
//
// A slot's arena commits and decommits inside its slot with the ordinary calls; only the chunk
// (pool_chunks.cpp) is reserved and released. A slot in a thread's cache (PoolCache) counts as
// spare address space for that thread's own next default array only (own_cached_spare), as held
// for the others' (as it was a moment before): a shared counter that every thread writes at every
// array would cost more than the array (its cache line moving between cores), and a thread caches
// one slot a tier at most. Before another thread's default array is given a smaller tier, the
// other threads' cached large slots go back to the pools (reclaim_cached_spare), so live threads'
// caches never shrink it. Under an address-space limit (RLIMIT_AS) no large chunk is asked for:
// every reserved slot would count against the limit.
//
//
// Locking: one mutex guards every class. A take or a return is a few loads and stores under it;
// the OS is called under it only to reserve a new chunk, to decommit what a returned slot keeps
// beyond its share, and in trim_pools(). The fork handlers (provider.cpp) hold it across
// fork(), so a child finds the pools consistent.
#include "page_pools.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "address_space.hpp"
#include "bits.hpp"
#include "memory_limit.hpp"
#include "pool_chunks.hpp"
#include "pool_state.hpp"
#include "populate.hpp"

namespace reservoir::detail {
namespace {

// Decommits [base + keep, base + committed) (in an open chunk: gives its pages back, the range
// stays read-write; in a guarded one the guard moves to the new end); the committed prefix that is
// true afterwards (all of it if the OS refused: the pages stay read-write, nothing is lost, and
// the count is honest). A closed slot decommitted to nothing merges back into its chunk's mapping.
std::size_t decommit_beyond(std::byte* base, std::size_t keep, std::size_t committed, bool open,
                            bool guarded, std::size_t slot_bytes) noexcept {
  if (committed <= keep) return committed;
  std::byte* const from = base + keep;
  const std::size_t len = committed - keep;
  // In an open chunk the rest of a huge page past the prefix goes too (backed_end).
  if (open ? pal::discard(from, backed_end(base, committed, slot_bytes) - keep)
           : pal::decommit(from, len)) {
    return committed;
  }
  if (guarded && move_guard(base, committed, keep, slot_bytes)) return committed;
  if (!open && keep == 0) count_mappings(kSplitMappings, false);
  memory_released(len);
  unpoison(from, len);  // fresh pages for the next owner
  return keep;
}

// Releases every chunk of class k none of whose slots is in use (with `drop_pages`, also those
// whose parked slots hold pages, which go with it); a class left with none gives its bookkeeping's
// heap memory back too. With the pools' lock held. Returns the bytes of pages dropped.
std::size_t release_idle_chunks(SizeClass& sc, std::size_t k, bool drop_pages) noexcept {
  const std::size_t dropped = release_unused_chunks(sc, k, drop_pages);
  if (sc.chunks.empty()) {
    std::vector<Chunk>().swap(sc.chunks);
    std::vector<FreeSlot>().swap(sc.free);
  }
  return dropped;
}

// Parks a slot of class k with `committed` bytes committed: at most kPoolKeepPerSlot of them,
// and none once the resident limit is reached (`own` and `keep_all` as above).
void return_slot_to_pool(std::byte* base, std::size_t k, std::size_t committed, bool open,
                         bool guarded, std::size_t own, bool keep_all) noexcept {
  PoolState& p = pool_state();
  std::lock_guard lock(p.mutex);
  // 1. Keep at most kPoolKeepPerSlot committed, and nothing once the resident limit is reached.
  const std::size_t share = std::min(committed, round_down(kPoolKeepPerSlot, pal::page_size()));
  const std::size_t limit = p.resident_limit.load(std::memory_order_relaxed);
  const std::size_t keep = keep_all                            ? committed
                           : !open && mappings_short()         ? 0
                           : p.resident + own + share <= limit ? share
                                                               : 0;
  const std::size_t now = decommit_beyond(base, keep, committed, open, guarded, kClassBytes[k]);
  // 2. Park it: the free list has room for every slot carved (carve reserved it).
  poison(base, now);
  size_classes()[k].free.push_back(FreeSlot{base, now, open, guarded});
  p.resident += now;
  if (is_large(k)) count_pool_spare(stride_of(k), true);
  // With the pools off (after the library's teardown, provider.cpp), the chunk goes back to the
  // OS as soon as no arena holds a slot of it: nothing would trim it later.
  if (!p.enabled.load(std::memory_order_relaxed)) release_idle_chunks(size_classes()[k], k, false);
  p.note_resident();
}

}  // namespace

bool take_slot(std::size_t usable, std::size_t granule, std::size_t align, ThreadCache* own,
               std::byte** base, std::size_t* committed, bool* open, bool* guarded,
               std::error_code* error) noexcept {
  *error = {};
  const std::size_t k = class_of(usable);
  PoolState& p = pool_state();
  if (k == kClasses || !p.enabled.load(std::memory_order_relaxed) || align == 0 ||
      remainder_of(align_of(k), align) != 0)
    return false;
  // 0. The slot this thread gave back last, as step 1 below takes one from the pool. If the OS
  //    refuses to decommit what it has beyond the new arena's granules, it is parked in the pool
  //    as it is.
  if (own != nullptr) {
    own->lock();
    PoolCache* const c = &own->pool;
    const PoolCache::Page e = std::exchange(c->page[k], PoolCache::Page{});
    c->bytes -= e.committed;
    if (e.base != nullptr && is_large(k)) {
      c->spare.store(c->spare.load(std::memory_order_relaxed) - stride_of(k),
                     std::memory_order_relaxed);
    }
    own->unlock();
    if (e.base != nullptr) {
      const std::size_t fit = round_down(std::min(e.committed, usable), granule);
      const std::size_t now =
          decommit_beyond(e.base, fit, e.committed, e.open, e.guarded, kClassBytes[k]);
      if (now == fit) {
        unpoison(e.base, fit);
        *base = e.base;
        *committed = fit;
        *open = e.open;
        *guarded = e.guarded;
        return true;
      }
      return_slot_to_pool(e.base, k, e.committed, e.open, e.guarded, 0, false);
    }
  }
  std::lock_guard lock(p.mutex);
  SizeClass& sc = size_classes()[k];
  // 1. A free slot: its committed prefix, cut to whole granules of the new arena inside its
  //    reservation. What lies beyond is decommitted so the arena's view is the truth; if the OS
  //    refuses, the slot goes back and a fresh one is carved.
  while (!sc.free.empty()) {
    FreeSlot s = sc.free.back();
    sc.free.pop_back();
    p.resident -= s.committed;
    const std::size_t fit = round_down(std::min(s.committed, usable), granule);
    const std::size_t now =
        decommit_beyond(s.base, fit, s.committed, s.open, s.guarded, kClassBytes[k]);
    if (now != fit) {
      p.resident += s.committed;
      sc.free.push_back(s);  // cannot allocate: it was just popped
      break;
    }
    p.note_resident();
    if (is_large(k)) count_pool_spare(stride_of(k), false);
    unpoison(s.base, fit);
    *base = s.base;
    *committed = fit;
    *open = s.open;
    *guarded = s.guarded;
    return true;
  }
  p.note_resident();
  // 2. A never-used slot. A large class reserves no chunk under an address-space limit (each
  //    slot would count against it), and a refused one is no error: the caller reserves a
  //    mapping of its own, as it would without the pools.
  if (is_large(k) && (sc.chunks.empty() || sc.chunks.back().carved == sc.chunks.back().slots)) {
    if (pal::AddressSpaceLimit l;
        detail::recent_unlimited_address_space() == 0 && pal::address_space_limit(&l)) {
      return false;
    }
  }
  std::byte* fresh = carve(sc, k, error, open, guarded);
  if (fresh == nullptr) {
    if (is_large(k)) *error = {};
    return false;
  }
  if (is_large(k)) count_pool_spare(stride_of(k), false);
  *base = fresh;
  *committed = 0;
  return true;
}

void return_slot(std::byte* base, std::size_t usable, std::size_t committed, bool open,
                 bool guarded, ThreadCache* own) noexcept {
  const std::size_t k = class_of(usable);
  PoolState& p = pool_state();
  // The thread's cache first, keeping what the pool would keep: at most kPoolKeepPerSlot, while
  // everything parked stays under the resident limit. The decommit of the rest, if any, runs
  // under the cache's own lock, which only a trim, a reap or a fork waits for.
  std::size_t own_bytes = 0;
  if (own != nullptr) {
    own->lock();
    PoolCache* const c = &own->pool;
    if (c->page[k].base == nullptr) {
      const std::size_t share = std::min(committed, round_down(kPoolKeepPerSlot, pal::page_size()));
      const std::size_t limit = p.resident_limit.load(std::memory_order_relaxed);
      const std::size_t keep =
          !open && mappings_short()                                                     ? 0
          : p.resident_seen.load(std::memory_order_relaxed) + c->bytes + share <= limit ? share
                                                                                        : 0;
      const std::size_t now = decommit_beyond(base, keep, committed, open, guarded, kClassBytes[k]);
      poison(base, now);
      c->page[k] = PoolCache::Page{base, now, open, guarded};
      c->bytes += now;
      if (is_large(k)) {
        c->spare.store(c->spare.load(std::memory_order_relaxed) + stride_of(k),
                       std::memory_order_relaxed);
      }
      own->unlock();
      return;
    }
    own_bytes = c->bytes;
    own->unlock();
  }
  return_slot_to_pool(base, k, committed, open, guarded, own_bytes, false);
}

void return_cached_page_slots(PoolCache& c, bool keep_all) noexcept {
  for (std::size_t k = 0; k < kClasses; ++k) {
    const PoolCache::Page e = std::exchange(c.page[k], PoolCache::Page{});
    if (e.base != nullptr) {
      return_slot_to_pool(e.base, k, e.committed, e.open, e.guarded, 0, keep_all);
    }
  }
}
std::size_t trim_page_pools() noexcept {
  PoolState& p = pool_state();
  std::size_t released = 0;
  for (std::size_t k = 0; k < kClasses; ++k) {
    SizeClass& sc = size_classes()[k];
    // 1. A chunk none of whose slots is in use goes back to the OS, its parked pages with it
    //    (decommitting them first would be a call per slot for nothing).
    released += release_idle_chunks(sc, k, true);
    // 2. Every other parked slot gives its pages back.
    for (FreeSlot& s : sc.free) {
      const std::size_t now =
          decommit_beyond(s.base, 0, s.committed, s.open, s.guarded, kClassBytes[k]);
      p.resident -= s.committed - now;
      released += s.committed - now;
      s.committed = now;
    }
  }
  return released;
}

}  // namespace reservoir::detail
