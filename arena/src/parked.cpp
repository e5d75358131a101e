// The parked reservations: destroyed arenas park their own mapping here (in the destroying
// thread's cache, else a shared list) and new arenas of the same layout take one without a
// system call. It owns the list and the limits; it does not know how arenas lay out or commit
// memory, nor whose thread cache it is handed.
#include "parked.hpp"

#include <atomic>
#include <mutex>
#include <new>
#include <utility>

#include "address_space.hpp"
#include "memory_limit.hpp"

namespace reservoir::detail {
namespace {

// Everything parked, in thread caches and in the shared list, counts toward one limit of `limit`
// reservations and kCacheMaxCommitted committed bytes. The counters are claimed before a
// reservation is parked and given back when it leaves, so the limits hold at every moment.
struct ParkedList {
  std::mutex mutex;
  std::vector<Parked> entries;            // guarded by mutex
  std::atomic<std::size_t> limit{16};     // 0: parking is off
  std::atomic<std::size_t> count{0};      // parked reservations, caches and entries
  std::atomic<std::size_t> committed{0};  // their committed bytes

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

ParkedList& list() noexcept {
  // Never destroyed: an arena in a static object may be destroyed after any function-local static
  // and must still find it. What it holds at exit goes back with the process.
  // In static storage, so that it goes with the library when a shared object is unloaded.
  alignas(ParkedList) static std::byte storage[sizeof(ParkedList)];
  static ParkedList* const l = ::new (storage) ParkedList;
  return *l;
}

// Made before main, while no other thread can be inside the initializer when one forks.
[[maybe_unused]] const bool g_made_before_main = (list(), true);

}  // namespace

std::optional<Parked> take_parked(ThreadCache* own, std::size_t mapping_size,
                                  const ArenaOptions& options) noexcept {
  ParkedList& l = list();
  if (l.count.load(std::memory_order_relaxed) == 0) return std::nullopt;
  if (own != nullptr) {
    own->lock();
    if (own->parked && own->parked->mapping_size == mapping_size &&
        own->parked->options == options) {
      Parked p = *own->parked;
      own->parked.reset();
      own->unlock();
      l.unclaim(p.committed);
      count_parked(p.mapping_size, false);
      return p;
    }
    own->unlock();
  }
  std::lock_guard lock(l.mutex);
  for (std::size_t i = l.entries.size(); i-- > 0;) {
    if (l.entries[i].mapping_size == mapping_size && l.entries[i].options == options) {
      Parked p = l.entries[i];
      l.entries[i] = l.entries.back();
      l.entries.pop_back();
      l.unclaim(p.committed);
      count_parked(p.mapping_size, false);
      return p;
    }
  }
  return std::nullopt;
}

bool park(ThreadCache* own, const Parked& p) noexcept {
  ParkedList& l = list();
  if (!l.claim(p.committed)) return false;
  count_parked(p.mapping_size, true);  // before it can be taken, so the count never goes below 0
  if (own != nullptr) {
    own->lock();
    if (!own->parked) {
      own->parked = p;
      own->unlock();
      return true;
    }
    own->unlock();
  }
  std::lock_guard lock(l.mutex);
  try {
    l.entries.push_back(p);
  } catch (...) {
    l.unclaim(p.committed);
    count_parked(p.mapping_size, false);
    return false;  // no memory for the list's own bookkeeping: release instead
  }
  return true;
}

void adopt_parked(const Parked& p) noexcept {
  ParkedList& l = list();
  std::lock_guard lock(l.mutex);
  try {
    l.entries.push_back(p);
  } catch (...) {
    l.unclaim(p.committed);  // no memory for the list's own bookkeeping: release instead
    count_parked(p.mapping_size, false);
    release_mapping(p.mapping, p.mapping_size, p.committed != 0);
    memory_released(p.committed);
  }
}

std::vector<Parked> take_parked_list() noexcept {
  ParkedList& l = list();
  std::vector<Parked> gone;
  std::lock_guard lock(l.mutex);
  gone.swap(l.entries);
  return gone;
}

void drop_parked(const Parked& p) noexcept {
  list().unclaim(p.committed);
  count_parked(p.mapping_size, false);
  release_mapping(p.mapping, p.mapping_size, p.committed != 0);
  memory_released(p.committed);
}

std::size_t parked_count() noexcept {
  return list().count.load(std::memory_order_relaxed);
}

void set_parked_limit(std::size_t entries) noexcept {
  list().limit.store(entries, std::memory_order_relaxed);
}

bool parked_lock_free() noexcept {
  ParkedList& l = list();
  if (!l.mutex.try_lock()) return false;
  l.mutex.unlock();
  return true;
}

void parked_lock_for_fork() noexcept {
  list().mutex.lock();
}

void parked_unlock_after_fork() noexcept {
  list().mutex.unlock();
}

void parked_recount_in_child(const ThreadCache* mine) noexcept {
  ParkedList& l = list();
  std::lock_guard lock(l.mutex);
  std::size_t count = l.entries.size(), committed = 0;
  for (const Parked& p : l.entries)
    committed += p.committed;
  if (mine && mine->parked) {
    ++count;
    committed += mine->parked->committed;
  }
  l.count.store(count, std::memory_order_relaxed);
  l.committed.store(committed, std::memory_order_relaxed);
}

}  // namespace reservoir::detail
