// The reservation provider: the order in which the sources are tried, the one retry after freeing
// parked reservations, where a reservation goes back, the process-wide functions that reach every
// source, and the fork handlers that keep all their locks usable in a child. The sources
// (sub_page_runs.cpp, page_pools.cpp, parked.cpp, address_space.cpp) know nothing of each other.
#include "provider.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "address_space.hpp"
#include "bits.hpp"
#include "growth.hpp"
#include "memory_limit.hpp"
#include "page_pools.hpp"
#include "parked.hpp"
#include "pool_state.hpp"
#include "sub_page_runs.hpp"
#include "thread_registry.hpp"

namespace reservoir {
namespace detail {
namespace {

// fork(): every lock of the provider's sources is held across it, always taken in this order
// (the registry's, the parked list's, the pools', the memory limit's).
void fork_prepare() {
  registry_lock_for_fork();
  parked_lock_for_fork();
  pool_state().mutex.lock();
  memory_limit_lock_for_fork();
}

void fork_parent() {
  memory_limit_unlock_after_fork();
  pool_state().mutex.unlock();
  parked_unlock_after_fork();
  registry_unlock_after_fork();
}

// In the child only the forking thread exists: every other thread's cache has lost its owner.
// What those caches held goes back to the list and the pools (registry_clean_up_in_child), and
// the parked count is taken again from what is left.
void fork_child() {
  memory_limit_unlock_after_fork();
  pool_state().mutex.unlock();
  parked_unlock_after_fork();
  registry_clean_up_in_child();
  parked_recount_in_child(my_cache(false));
  registry_unlock_after_fork();
}

// Registers the fork handlers once. Without them (an OS refusal) parking and the pools stay off,
// so a forked child never meets a cache or a slot another thread held. Windows has no fork:
// nothing to register, and nothing for a child to meet.
bool fork_handlers_registered() noexcept {
  static const bool ok = [] {
    const std::error_code ec = pal::at_fork(&fork_prepare, &fork_parent, &fork_child);
    const bool registered = !ec || ec == std::errc::not_supported;
    if (!registered) {
      set_parked_limit(0);
      pool_state().enabled.store(false, std::memory_order_relaxed);
    }
    return registered;
  }();
  return ok;
}

// Made before main, while no other thread runs (see thread_registry.cpp).
[[maybe_unused]] const bool g_made_before_main = fork_handlers_registered();

// The library's teardown, when a shared object that links it is unloaded or the process exits
// (the destructor of a static object of the library's). The thread key is deleted, so a thread
// that ends afterwards calls nothing of the library's, which may be gone by then; everything no
// live arena holds goes back to the OS: the threads' cached slots and parked reservations, the
// parked list, idle chunks and runs. Caching is turned off first, so whatever an arena destroyed
// afterwards gives back (a static object of another translation unit, destroyed later) goes back
// to the OS at once, the last slot of a chunk with the chunk. Arrays keep working afterwards,
// without caches or pools: safe for other threads and static objects still using them at exit.
// The fork handlers are not undone: the C library drops those of an unloaded object (glibc does;
// docs/guarantees.md).
//
// At process exit a Windows DLL's static objects are destroyed after the OS stopped the other
// threads, wherever they were: one may hold a lock of the sources for good. So the teardown takes
// no lock it has not found free: if one is held, nothing is done (the process is ending; the
// unload this is for has no thread inside the library).
bool sources_locks_free() noexcept {
  PoolState& p = pool_state();
  if (!p.mutex.try_lock()) return false;
  p.mutex.unlock();
  return parked_lock_free();
}

struct TearDownAtUnload {
  TearDownAtUnload() = default;
  TearDownAtUnload(const TearDownAtUnload&) = delete;
  TearDownAtUnload& operator=(const TearDownAtUnload&) = delete;
  ~TearDownAtUnload() {
    if (!sources_locks_free()) return;
    set_parked_limit(0);
    PoolState& p = pool_state();
    p.resident_limit.store(0, std::memory_order_relaxed);
    p.enabled.store(false, std::memory_order_relaxed);
    if (!registry_tear_down()) return;
    clear_reservation_cache();
    (void)trim_pools();
  }
};
// Constructed after the state above (the function-local statics it reaches are made before it
// or never destroyed), so destroyed after every static object made later.
const TearDownAtUnload g_tear_down_at_unload;

// Parked reservations hold address space only for reuse: a new arena needs it more. True if
// there were any to free (then the caller tries once more).
bool free_parked() noexcept {
  if (parked_count() == 0) return false;
  clear_reservation_cache();
  return true;
}

// Parks a mapping of its own, keeping what the growth policy says (parked_keep: the doubling
// steps, which the next arena then takes with no commit call and no page fault). False if it is not
// parked (a refused decommit, or the limits): the caller releases it.
bool park_mapping(const Reservation& r) noexcept {
  const ArenaOptions& o = r.options;
  const std::size_t granule = o.commit_granule;
  const std::size_t keep_limit = parked_keep(granule, o.max_commit_step);
  // While the mappings are short a parked mapping would keep its own (and its prefix's): released.
  if (!o.reuse_reservation || keep_limit > kCacheMaxCommitted || mappings_short()) return false;
  const std::size_t keep = std::min(r.committed, keep_limit);
  if (r.committed > keep && pal::decommit(r.base + keep, r.committed - keep)) return false;
  // What went back is counted once parked; if not parked, the caller counts all of it.
  if (!park(my_cache(false), Parked{r.mapping, r.mapping_size, r.base, r.reserved, keep, o}))
    return false;
  memory_released(r.committed - keep);
  return true;
}

}  // namespace

std::error_code acquire(const ReservationRequest& q, Reservation* out) noexcept {
  (void)fork_handlers_registered();
  ArenaOptions options = q.options;
  ThreadCache* const own = options.reuse_reservation ? my_cache(true) : nullptr;
  if (options.reuse_reservation) reap_ended_threads();  // so that their slots are found below
  // 1. A tiny reservation takes a sub-page slot, all of it committed, with no guard pages
  //    (ArenaOptions::sub_page_slot). If no run can be made, it goes on as any small arena.
  if (options.reuse_reservation && options.sub_page_slot && q.max_bytes <= kLargestSubPageSlot) {
    std::byte* base = nullptr;
    std::size_t slot_bytes = 0;
    if (take_sub_slot(q.max_bytes, options.respect_memory_limit, own, &base, &slot_bytes)) {
      options.guard_pages = false;
      *out =
          Reservation{base, 0, base, slot_bytes, slot_bytes, Source::sub_page_run, false, options};
      return {};
    }
  }
  // Every other arena reports sub_page_slot = false; parked ones match on that.
  options.sub_page_slot = false;
  if (options.reuse_reservation) {
    // 2. A small reservation, or one of the default tiers, takes a pool slot. Its base honours
    //    base_align (large slots are huge-page aligned, or a page past it in an open chunk,
    //    whose guard page takes that page; take_slot refuses a class that is neither). Before
    //    the parked list: a larger arena parked there may have the same mapping size (Windows
    //    rounds to 64 KiB).
    std::byte* base = nullptr;
    std::size_t committed = 0;
    bool open = false;
    bool guarded = false;
    std::error_code ec;
    const auto take = [&] {
      return take_slot(q.usable, q.granule, q.base_align, own, &base, &committed, &open, &guarded,
                       &ec);
    };
    if (take() || (ec && free_parked() && take())) {
      *out = Reservation{base, 0,       base,   q.usable, committed, Source::page_pool,
                         open, options, guarded};
      return {};
    }
    if (ec) return ec;  // the OS refused a small pool's chunk (at its smallest): no address space
    // 3. A parked reservation of the same layout and options costs no system call.
    if (std::optional<Parked> p = take_parked(own, q.mapping, options)) {
      *out = Reservation{p->mapping,   p->mapping_size, p->base, p->reserved,
                         p->committed, Source::mapping, false,   options};
      return {};
    }
  }
  // 4. A fresh mapping: [guard page][alignment padding][usable ...][guard page].
  void* mapping = nullptr;
  std::error_code ec = reserve_mapping(q.mapping, &mapping);
  if (ec && free_parked()) ec = reserve_mapping(q.mapping, &mapping);
  if (ec) return ec;
  auto* const start = static_cast<std::byte*>(mapping);
  std::byte* const base = align_up(start + q.guard, q.base_align);
  const auto reserved = static_cast<std::size_t>(start + q.mapping - q.guard - base);
  *out = Reservation{mapping, q.mapping, base, reserved, 0, Source::mapping, false, options};
  return {};
}

void release(const Reservation& r) noexcept {
  switch (r.source) {
    case Source::sub_page_run:
      return_sub_slot(r.base, r.reserved, my_cache(false));
      return;
    case Source::page_pool:
      return_slot(r.base, r.reserved, r.committed, r.open, r.guarded, my_cache(false));
      return;
    case Source::mapping:
      if (!park_mapping(r)) {
        release_mapping(r.mapping, r.mapping_size, r.committed != 0);
        memory_released(r.committed);
      }
      return;
  }
}

}  // namespace detail

void set_reservation_cache_limit(std::size_t entries) noexcept {
  detail::set_parked_limit(entries);
  if (detail::parked_count() <= entries) return;
  // More are parked than the new limit: the first `entries` taken stay, the rest are released.
  std::vector<detail::Parked> all = detail::take_all_parked();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i < entries)
      detail::adopt_parked(all[i]);
    else
      detail::drop_parked(all[i]);
  }
}

void clear_reservation_cache() noexcept {
  for (const detail::Parked& p : detail::take_all_parked())
    detail::drop_parked(p);
}

std::size_t reservation_cache_size() noexcept {
  return detail::parked_count();
}

void set_pool_resident_limit(std::size_t bytes) noexcept {
  detail::pool_state().resident_limit.store(bytes, std::memory_order_relaxed);
}

std::size_t pool_resident_limit() noexcept {
  return detail::pool_state().resident_limit.load(std::memory_order_relaxed);
}

std::size_t pool_resident_bytes() noexcept {
  return detail::pool_state().resident_seen.load(std::memory_order_relaxed) +
         detail::cached_pool_bytes();
}

std::size_t trim_pools() noexcept {
  detail::return_all_cached_slots();  // every thread's cached slots, into the pools first
  detail::PoolState& p = detail::pool_state();
  std::lock_guard lock(p.mutex);
  const std::size_t released = detail::trim_page_pools() + detail::trim_sub_page_runs();
  p.note_resident();
  return released;
}

}  // namespace reservoir
