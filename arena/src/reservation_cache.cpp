// The reservation cache: destroyed arenas park their reservation here (a slot per thread, then a
// shared list) and new arenas of the same layout take one without a system call. It owns the
// parked reservations and their limits; it does not know how arenas lay out or commit memory.
#include <atomic>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "arena_internal.hpp"

namespace reservoir {
namespace detail {
namespace {

struct ThreadSlot;

// Everything parked, in per-thread slots and in the shared list, counts toward one limit of
// `limit` reservations and kCacheMaxCommitted committed bytes. The counters are claimed before a
// reservation is parked and given back when it leaves, so the limits hold at every moment.
struct ReservationCache {
  std::mutex mutex;
  std::vector<Parked> entries;  // guarded by mutex
  ThreadSlot* slots = nullptr;  // every live thread's slot (intrusive list), guarded by mutex
  std::atomic<std::size_t> limit{16};     // 0: the cache is off
  std::atomic<std::size_t> count{0};      // parked reservations, slots and entries
  std::atomic<std::size_t> committed{0};  // their committed bytes
  std::atomic<std::size_t> retired{0};    // at least the slots of ended threads not yet reaped

  // Claims room for one more parked reservation of `bytes` committed; false if it does not fit.
  bool claim(std::size_t bytes) noexcept {
    std::size_t n = count.load(std::memory_order_relaxed);
    do {
      if (n >= limit.load(std::memory_order_relaxed)) return false;
    } while (!count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    if (committed.fetch_add(bytes, std::memory_order_relaxed) + bytes > kCacheMaxCommitted) {
      unclaim(bytes);
      return false;
    }
    return true;
  }
  void unclaim(std::size_t bytes) noexcept {
    committed.fetch_sub(bytes, std::memory_order_relaxed);
    count.fetch_sub(1, std::memory_order_relaxed);
  }
};

ReservationCache& cache() {
  // Never destroyed: an arena in a static object may be destroyed after any function-local static
  // and must still find the cache. What it holds at exit goes back with the process. Without fork
  // handlers the cache is off, so a forked child never meets a slot another thread held.
  static ReservationCache* const c = [] {
    auto* r = new ReservationCache;
    if (!register_fork_handlers()) r->limit.store(0, std::memory_order_relaxed);
    return r;
  }();
  return *c;
}

// The per-thread part: one slot per thread, reached without the shared mutex, so a thread that
// creates and destroys arrays in a loop reuses one reservation cheaply. A slot is heap memory that
// a pal thread key leads to, not a thread_local object: MinGW-w64 GCC frees a thread's
// thread_local storage before it runs the destructors of the objects in it (see pal.hpp), so a
// thread_local slot would be emptied and unlinked after it was freed, and another thread's
// allocation could land in the middle of the registry. `busy` keeps the owner and a thread emptying
// the slot (take_all, reap_retired) apart; only the latter ever waits.
struct ThreadSlot {
  std::atomic_flag busy;             // clear from construction (C++20)
  std::atomic<bool> retired{false};  // its thread has ended; the next reap frees it
  std::optional<Parked> parked;
  PoolCache pool;              // the thread's cached pool slots (slot_pool.cpp), under `busy` too
  ThreadSlot* prev = nullptr;  // the registry, guarded by the cache's mutex
  ThreadSlot* next = nullptr;

  void lock() noexcept {
    while (busy.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() noexcept { busy.clear(std::memory_order_release); }

  std::optional<Parked> take() noexcept {
    lock();
    std::optional<Parked> p = std::exchange(parked, std::nullopt);
    unlock();
    return p;
  }
  // Empties the pool cache and gives its slots back to the pools (which takes their lock: the
  // caller may hold the cache's, taken before the pools' everywhere).
  void flush_pool(bool keep_all) noexcept {
    lock();
    PoolCache c = std::exchange(pool, PoolCache{});
    unlock();
    flush_pool_cache(c, keep_all);
  }
};

// Runs at the end of a thread that has a slot (the key's exit function). It takes no lock: on
// Windows it may run while the process exits, after the other threads were stopped holding
// whatever they held, and Wine runs it holding a lock every starting and ending thread takes. The
// slot keeps its parked reservation (still counted) until the next reap. The count goes up first,
// so it never reads 0 while a retired slot waits.
//
// It also leaves a marker as the thread's value, so that what runs later in the thread's exit
// makes no new slot (my_slot): one made then might never be retired (Windows runs the exit
// function once; its thread_local destructors may run after it), and what it cached would wait
// for a trim. POSIX runs the exit function once more with the marker (glibc's next round), which
// clears it: setting it again every round would run this in the last round too, after the
// sanitizers have torn the thread down. A slot made in a later round is retired in the round
// after it; only one made in the last round (glibc: the 4th) waits for trim_pools().
char g_thread_ended;  // its address is the marker: never a slot
void mark_thread_ended() noexcept;

void retire_slot(void* p) noexcept {
  if (p == &g_thread_ended) return;
  mark_thread_ended();
  cache().retired.fetch_add(1, std::memory_order_relaxed);
  static_cast<ThreadSlot*>(p)->retired.store(true, std::memory_order_release);
}

// Unlinks and frees the slots of ended threads; their parked reservations move to the shared
// list (they stay counted) or, if the list cannot take them, back to the OS, and their cached
// pool slots go back to the pools (within the resident limit, or as they are for a trim). Called
// with the mutex held, so no take_all is emptying these slots at the same time.
void reap_retired(ReservationCache& c, bool keep_all_pool_slots = false) noexcept {
  if (c.retired.load(std::memory_order_relaxed) == 0) return;
  for (ThreadSlot* s = c.slots; s;) {
    ThreadSlot* const next = s->next;
    if (s->retired.load(std::memory_order_acquire)) {
      if (s->prev)
        s->prev->next = next;
      else
        c.slots = next;
      if (next) next->prev = s->prev;
      c.retired.fetch_sub(1, std::memory_order_relaxed);
      s->flush_pool(keep_all_pool_slots);
      if (std::optional<Parked> p = s->take()) {
        try {
          c.entries.push_back(*p);
        } catch (...) {
          // no memory for the list's own bookkeeping: release instead
          c.unclaim(p->committed);
          count_parked(p->mapping_size, false);
          release_mapping(p->mapping, p->mapping_size);
        }
      }
      delete s;
    }
    s = next;
  }
}

// The key that leads each thread to its slot; ok is false if the OS gave none, and then every
// thread uses the shared list.
struct SlotKey {
  pal::ThreadKey key;
  bool ok = false;
};
const SlotKey& slot_key() noexcept {
  static const SlotKey k = [] {
    SlotKey r;
    r.ok = !pal::create_thread_key(&retire_slot, &r.key);
    return r;
  }();
  return k;
}

void mark_thread_ended() noexcept {
  const SlotKey& k = slot_key();
  if (k.ok) (void)pal::set_thread_value(k.key, &g_thread_ended);  // refused: no worse than before
}

// This thread's slot, made if `create` and there is none. nullptr without one: before the
// thread's first take (take_parked, or a take from the slot pools), once its slot is retired
// during thread exit (from then on none is made: see retire_slot), or if the OS or the heap
// refused. So arenas created or destroyed during thread exit after the slot was retired use the
// shared list and the pools, never a slot that would never be retired.
ThreadSlot* my_slot(bool create) noexcept {
  const SlotKey& k = slot_key();
  if (!k.ok) return nullptr;
  void* const value = pal::thread_value(k.key);
  if (value == &g_thread_ended) return nullptr;
  auto* slot = static_cast<ThreadSlot*>(value);
  if (slot != nullptr || !create) return slot;
  slot = new (std::nothrow) ThreadSlot;
  if (slot == nullptr) return nullptr;
  if (pal::set_thread_value(k.key, slot)) {
    delete slot;
    return nullptr;
  }
  ReservationCache& c = cache();
  std::lock_guard lock(c.mutex);
  reap_retired(c);  // so the registry holds the live threads and those ended since the last reap
  slot->next = c.slots;
  if (slot->next) slot->next->prev = slot;
  c.slots = slot;
  return slot;
}

// The cache, its thread key and the fork handlers are made before main, while no other thread
// runs: a fork while another thread ran a function-local static's initializer would leave the
// child waiting on that static's guard for good.
[[maybe_unused]] const bool g_made_before_main = (cache(), slot_key(), true);

}  // namespace

std::optional<Parked> take_parked(std::size_t mapping_size, const ArenaOptions& options) noexcept {
  ReservationCache& c = cache();
  ThreadSlot* const slot = my_slot(c.limit.load(std::memory_order_relaxed) != 0);
  if (c.count.load(std::memory_order_relaxed) == 0) return std::nullopt;
  if (slot != nullptr) {
    slot->lock();
    if (slot->parked && slot->parked->mapping_size == mapping_size &&
        slot->parked->options == options) {
      Parked p = *slot->parked;
      slot->parked.reset();
      slot->unlock();
      c.unclaim(p.committed);
      count_parked(p.mapping_size, false);
      return p;
    }
    slot->unlock();
  }
  std::lock_guard lock(c.mutex);
  reap_retired(c);
  for (std::size_t i = c.entries.size(); i-- > 0;) {
    if (c.entries[i].mapping_size == mapping_size && c.entries[i].options == options) {
      Parked p = c.entries[i];
      c.entries[i] = c.entries.back();
      c.entries.pop_back();
      c.unclaim(p.committed);
      count_parked(p.mapping_size, false);
      return p;
    }
  }
  return std::nullopt;
}

// Parks p in this thread's slot or the shared list; false if the limits are reached (or the
// cache is off), and then the caller releases it.
bool park(const Parked& p) noexcept {
  ReservationCache& c = cache();
  if (!c.claim(p.committed)) return false;
  count_parked(p.mapping_size, true);  // before it can be taken, so the count never goes below 0
  if (ThreadSlot* slot = my_slot(false)) {
    slot->lock();
    if (!slot->parked) {
      slot->parked = p;
      slot->unlock();
      return true;
    }
    slot->unlock();
  }
  std::lock_guard lock(c.mutex);
  try {
    c.entries.push_back(p);
  } catch (...) {
    c.unclaim(p.committed);
    count_parked(p.mapping_size, false);
    return false;  // no memory for the cache's own bookkeeping: release instead
  }
  return true;
}

PoolCache* lock_pool_cache(bool create) noexcept {
  ThreadSlot* const slot = my_slot(create);
  if (slot == nullptr) return nullptr;
  slot->lock();
  return &slot->pool;
}

void unlock_pool_cache() noexcept {
  if (ThreadSlot* const slot = my_slot(false)) slot->unlock();
}

void flush_all_pool_caches() noexcept {
  ReservationCache& c = cache();
  std::lock_guard lock(c.mutex);
  reap_retired(c, true);  // ended threads' slots: their caches go back as they are freed
  for (ThreadSlot* s = c.slots; s; s = s->next)
    s->flush_pool(true);
}

void reap_ended_threads() noexcept {
  ReservationCache& c = cache();
  if (c.retired.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(c.mutex);
  reap_retired(c);
}

std::size_t own_cached_spare() noexcept {
  const ThreadSlot* const slot = my_slot(false);
  return slot != nullptr ? slot->pool.spare.load(std::memory_order_relaxed) : 0;
}

std::size_t reclaim_cached_spare() noexcept {
  ReservationCache& c = cache();
  std::lock_guard lock(c.mutex);
  reap_retired(c);  // ended threads' caches go back as their slots are freed
  const ThreadSlot* const mine = my_slot(false);
  std::size_t bytes = 0;
  for (ThreadSlot* s = c.slots; s; s = s->next) {
    const std::size_t spare = s->pool.spare.load(std::memory_order_relaxed);
    if (s == mine || spare == 0) continue;
    bytes += spare;
    s->flush_pool(false);
  }
  return bytes;
}

std::size_t pool_cache_bytes() noexcept {
  ReservationCache& c = cache();
  std::lock_guard lock(c.mutex);
  std::size_t bytes = 0;
  for (ThreadSlot* s = c.slots; s; s = s->next) {
    s->lock();
    bytes += s->pool.bytes;
    s->unlock();
  }
  return bytes;
}

namespace {

// Takes every parked reservation out of the cache (the shared list and every thread's slot).
std::vector<Parked> take_all() noexcept {
  ReservationCache& c = cache();
  std::vector<Parked> gone;
  std::lock_guard lock(c.mutex);
  reap_retired(c);
  gone.swap(c.entries);
  for (ThreadSlot* s = c.slots; s; s = s->next) {
    if (std::optional<Parked> p = s->take()) {
      try {
        gone.push_back(*p);
      } catch (...) {
        c.unclaim(p->committed);
        count_parked(p->mapping_size, false);
        release_mapping(p->mapping, p->mapping_size);
      }
    }
  }
  for (const Parked& p : gone)
    c.unclaim(p.committed);
  return gone;
}

}  // namespace

// ---- fork: the cache's, the pools' and the memory limit's locks are held across it
// -------------------------

namespace {

void fork_prepare() {
  cache().mutex.lock();
  pool_lock_for_fork();
  memory_limit_lock_for_fork();
}

void fork_parent() {
  memory_limit_unlock_after_fork();
  pool_unlock_after_fork();
  cache().mutex.unlock();
}

// In the child only the forking thread exists: every other thread's slot has lost its owner,
// and one it held busy may be half-written. Those slots are unlinked and freed; the
// reservations of the ones left consistent (not busy) move to the shared list. The counters
// are recounted from what is left, since claims made by vanished threads will never complete.
void fork_child() {
  memory_limit_unlock_after_fork();
  pool_unlock_after_fork();
  ReservationCache& c = cache();
  ThreadSlot* const mine = my_slot(false);
  for (ThreadSlot* s = c.slots; s;) {
    ThreadSlot* const next = s->next;
    if (s != mine) {
      // A cache its thread held busy may be half-written: its slots are left out (lost to the
      // child, as that thread is).
      if (!s->busy.test(std::memory_order_acquire)) flush_pool_cache(s->pool, false);
      if (!s->busy.test(std::memory_order_acquire) && s->parked) {
        try {
          c.entries.push_back(*s->parked);
        } catch (...) {
          count_parked(s->parked->mapping_size, false);
          release_mapping(s->parked->mapping, s->parked->mapping_size);
        }
      }
      delete s;
    }
    s = next;
  }
  c.slots = mine;
  if (mine) mine->prev = mine->next = nullptr;
  std::size_t count = c.entries.size(), committed = 0;
  for (const Parked& p : c.entries)
    committed += p.committed;
  if (mine && mine->parked) {
    ++count;
    committed += mine->parked->committed;
  }
  c.count.store(count, std::memory_order_relaxed);
  c.committed.store(committed, std::memory_order_relaxed);
  c.retired.store(0, std::memory_order_relaxed);
  c.mutex.unlock();
}

}  // namespace

bool register_fork_handlers() noexcept {
  // Windows has no fork: nothing to register, and nothing for a child to meet.
  static const bool ok = [] {
    const std::error_code ec = pal::at_fork(&fork_prepare, &fork_parent, &fork_child);
    return !ec || ec == std::errc::not_supported;
  }();
  return ok;
}

[[noreturn]] void throw_plan_error(std::errc e, std::size_t max_bytes) {
  if (e == std::errc::invalid_argument) {
    throw std::invalid_argument(
        max_bytes == 0 ? "reservoir::Arena: max_bytes must be greater than 0"
                       : "reservoir::Arena: commit_granule or max_commit_step is too large to "
                         "round up to whole pages and granules");
  }
  throw std::length_error("reservoir::Arena: cannot reserve " + format_bytes(max_bytes) +
                          ": more than the address space can hold (limit " +
                          format_bytes(kMaxReservation) + ")");
}

}  // namespace detail

void set_reservation_cache_limit(std::size_t entries) noexcept {
  detail::cache().limit.store(entries, std::memory_order_relaxed);
  if (entries == 0) clear_reservation_cache();
}

void clear_reservation_cache() noexcept {
  for (const detail::Parked& p : detail::take_all()) {
    detail::count_parked(p.mapping_size, false);
    detail::release_mapping(p.mapping, p.mapping_size);
  }
}

std::size_t reservation_cache_size() noexcept {
  return detail::cache().count.load(std::memory_order_relaxed);
}

}  // namespace reservoir
