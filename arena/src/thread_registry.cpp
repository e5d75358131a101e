// The thread registry: one ThreadCache per thread, reached without a shared lock, so a thread that
// creates and destroys arrays in a loop reuses its own reservation and slots cheaply. A cache is
// heap memory that a pal thread key leads to, not a thread_local object: MinGW-w64 GCC frees a
// thread's thread_local storage before it runs the destructors of the objects in it (see
// pal.hpp), so a thread_local cache would be emptied and unlinked after it was freed, and another
// thread's allocation could land in the middle of the registry.
//
// When the library is unloaded (a shared object that links it, dlclose'd) or the process exits,
// registry_tear_down() deletes the key, so that no thread that ends later calls into code that may
// be gone, and gives back what every cache holds. The entries of the first kStaticEntries threads
// live in the library's own static storage, which goes with the library: a live thread's entry
// cannot be freed then (its thread may still be inside an arena's call at process exit), and so
// costs nothing after an unload.
#include "thread_registry.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <optional>
#include <utility>

#include <reservoir/pal.hpp>

#include "bits.hpp"
#include "page_pools.hpp"
#include "parked.hpp"
#include "sub_page_runs.hpp"

namespace reservoir::detail {
namespace {

struct ThreadEntry : ThreadCache {
  std::atomic<bool> retired{false};  // its thread has ended; the next reap frees it
  ThreadEntry* prev = nullptr;       // the registry, guarded by its mutex
  ThreadEntry* next = nullptr;

  std::optional<Parked> take_parked() noexcept {
    lock();
    std::optional<Parked> p = std::exchange(parked, std::nullopt);
    unlock();
    return p;
  }
  // Empties the pool cache and gives its slots back to the pools (which takes their lock: the
  // caller may hold the registry's, taken before the pools' everywhere).
  void return_pool_slots(bool keep_all) noexcept {
    lock();
    PoolCache c = std::exchange(pool, PoolCache{});
    unlock();
    c.bytes = 0;
    c.spare.store(0, std::memory_order_relaxed);
    return_cached_sub_slots(c, keep_all);
    return_cached_page_slots(c, keep_all);
  }
};

struct Registry {
  std::mutex mutex;
  ThreadEntry* threads = nullptr;       // every live thread's entry (intrusive list), by mutex
  std::atomic<std::size_t> retired{0};  // at least the entries of ended threads not yet reaped
  std::uint64_t static_used = 0;        // which of g_static_entries are taken, by mutex
};

// Never destroyed, as the sources' state; in static storage, so that it goes with the library.
Registry& registry() noexcept {
  alignas(Registry) static std::byte storage[sizeof(Registry)];
  static Registry* const r = ::new (storage) Registry;
  return *r;
}

// Set once by registry_tear_down(): no entry is made or reached from then on.
std::atomic<bool> g_torn_down{false};

constexpr std::size_t kStaticEntries = 64;  // the bits of Registry::static_used
alignas(ThreadEntry) std::byte g_static_entries[kStaticEntries][sizeof(ThreadEntry)];

bool is_static(const ThreadEntry* e) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(e);
  const auto first = reinterpret_cast<std::uintptr_t>(&g_static_entries[0][0]);
  return at >= first && at - first < sizeof g_static_entries;
}

// An entry from the static storage while it has room, else from the heap; nullptr if neither.
// With the mutex held.
ThreadEntry* new_entry(Registry& r) noexcept {
  for (std::size_t i = 0; i < kStaticEntries; ++i) {
    if ((r.static_used & (std::uint64_t{1} << i)) == 0) {
      r.static_used |= std::uint64_t{1} << i;
      return ::new (g_static_entries[i]) ThreadEntry;
    }
  }
  return new (std::nothrow) ThreadEntry;
}

// With the mutex held.
void free_entry(Registry& r, ThreadEntry* e) noexcept {
  if (!is_static(e)) {
    delete e;
    return;
  }
  const auto i =
      static_cast<std::size_t>(reinterpret_cast<std::byte*>(e) - &g_static_entries[0][0]) /
      sizeof(ThreadEntry);
  e->~ThreadEntry();
  r.static_used &= ~(std::uint64_t{1} << i);
}

// Runs at the end of a thread that has an entry (the key's exit function). It takes no lock: on
// Windows it may run while the process exits, after the other threads were stopped holding
// whatever they held, and Wine runs it holding a lock every starting and ending thread takes. The
// entry keeps what it holds (still counted) until the next reap. The count goes up first, so it
// never reads 0 while a retired entry waits.
//
// It also leaves a marker as the thread's value, so that what runs later in the thread's exit
// makes no new entry (my_cache): one made then might never be retired (Windows runs the exit
// function once; its thread_local destructors may run after it), and what it cached would wait
// for a trim. POSIX runs the exit function once more with the marker (glibc's next round), which
// clears it: setting it again every round would run this in the last round too, after the
// sanitizers have torn the thread down. An entry made in a later round is retired in the round
// after it; only one made in the last round (glibc: the 4th) waits for trim_pools().
char g_thread_ended;  // its address is the marker: never an entry
void mark_thread_ended() noexcept;

void retire_entry(void* p) noexcept {
#if defined(RESERVOIR_ARENA_ASAN)
  // A cancelled thread (pthread_cancel) ends by a forced unwind, which leaves its frames' scope
  // poison on the stack (ASan clears it for C++ throws only); this runs on that stack.
  __asan_handle_no_return();
#endif
  // After the teardown (Windows: FlsFree runs this for every value left), nothing is reaped.
  if (p == &g_thread_ended || g_torn_down.load(std::memory_order_acquire)) return;
  mark_thread_ended();
  registry().retired.fetch_add(1, std::memory_order_relaxed);
  static_cast<ThreadEntry*>(p)->retired.store(true, std::memory_order_release);
}

// Unlinks and frees the entries of ended threads; their parked reservations move to the shared
// list (or back to the OS), and their cached pool slots go back to the pools (within the resident
// limit, or as they are for a trim). Called with the mutex held.
void reap_retired(Registry& r, bool keep_all_pool_slots = false) noexcept {
  if (r.retired.load(std::memory_order_relaxed) == 0) return;
  for (ThreadEntry* s = r.threads; s;) {
    ThreadEntry* const next = s->next;
    if (s->retired.load(std::memory_order_acquire)) {
      if (s->prev)
        s->prev->next = next;
      else
        r.threads = next;
      if (next) next->prev = s->prev;
      r.retired.fetch_sub(1, std::memory_order_relaxed);
      s->return_pool_slots(keep_all_pool_slots);
      if (std::optional<Parked> p = s->take_parked()) adopt_parked(*p);
      free_entry(r, s);
    }
    s = next;
  }
}

// The key that leads each thread to its entry; ok is false if the OS gave none, and then every
// thread uses the shared list.
struct ThreadKeyHolder {
  pal::ThreadKey key;
  bool ok = false;
};
const ThreadKeyHolder& thread_key() noexcept {
  static const ThreadKeyHolder k = [] {
    ThreadKeyHolder r;
    r.ok = !pal::create_thread_key(&retire_entry, &r.key);
    return r;
  }();
  return k;
}

void mark_thread_ended() noexcept {
  const ThreadKeyHolder& k = thread_key();
  if (k.ok) (void)pal::set_thread_value(k.key, &g_thread_ended);  // refused: no worse than before
}

ThreadEntry* my_entry(bool create) noexcept {
  const ThreadKeyHolder& k = thread_key();
  // A thread that read g_torn_down just before the teardown (at process exit) reads a deleted key:
  // glibc and Windows give nullptr for it (POSIX leaves it unspecified), and that thread goes on
  // to the check under the lock below.
  if (!k.ok || g_torn_down.load(std::memory_order_acquire)) return nullptr;
  void* const value = pal::thread_value(k.key);
  if (value == &g_thread_ended) return nullptr;
  auto* entry = static_cast<ThreadEntry*>(value);
  if (entry != nullptr || !create) return entry;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (g_torn_down.load(std::memory_order_relaxed)) return nullptr;  // the key is gone
  reap_retired(r);  // so the registry holds the live threads and those ended since the last reap
  entry = new_entry(r);
  if (entry == nullptr) return nullptr;
  if (pal::set_thread_value(k.key, entry)) {
    free_entry(r, entry);
    return nullptr;
  }
  entry->next = r.threads;
  if (entry->next) entry->next->prev = entry;
  r.threads = entry;
  return entry;
}

// The registry and its thread key are made before main, while no other thread runs: a fork while
// another thread ran a function-local static's initializer would leave the child waiting on that
// static's guard for good.
[[maybe_unused]] const bool g_made_before_main = (registry(), thread_key(), true);

}  // namespace

ThreadCache* my_cache(bool create) noexcept {
  return my_entry(create);
}

void reap_ended_threads() noexcept {
  Registry& r = registry();
  if (r.retired.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(r.mutex);
  reap_retired(r);
}

void return_all_cached_slots() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  reap_retired(r, true);  // ended threads' entries: their caches go back as they are freed
  for (ThreadEntry* s = r.threads; s; s = s->next)
    s->return_pool_slots(true);
}

std::vector<Parked> take_all_parked() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  reap_retired(r);
  std::vector<Parked> gone = take_parked_list();
  for (ThreadEntry* s = r.threads; s; s = s->next) {
    if (std::optional<Parked> p = s->take_parked()) {
      try {
        gone.push_back(*p);
      } catch (...) {
        drop_parked(*p);
      }
    }
  }
  return gone;
}

std::size_t cached_pool_bytes() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::size_t bytes = 0;
  for (ThreadEntry* s = r.threads; s; s = s->next) {
    s->lock();
    bytes += s->pool.bytes;
    s->unlock();
  }
  return bytes;
}

std::size_t own_cached_spare() noexcept {
  const ThreadEntry* const entry = my_entry(false);
  return entry != nullptr ? entry->pool.spare.load(std::memory_order_relaxed) : 0;
}

void reclaim_cached_spare() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  reap_retired(r);  // ended threads' caches go back as their slots are freed
  const ThreadEntry* const mine = my_entry(false);
  for (ThreadEntry* s = r.threads; s; s = s->next) {
    if (s == mine || s->pool.spare.load(std::memory_order_relaxed) == 0) continue;
    s->return_pool_slots(false);
  }
}

void registry_lock_for_fork() noexcept {
  registry().mutex.lock();
}

void registry_unlock_after_fork() noexcept {
  registry().mutex.unlock();
}

void registry_clean_up_in_child() noexcept {
  Registry& r = registry();
  ThreadEntry* const mine = my_entry(false);
  for (ThreadEntry* s = r.threads; s;) {
    ThreadEntry* const next = s->next;
    if (s != mine) {
      // A cache its thread held busy may be half-written: what it holds is left out.
      if (!s->busy.test(std::memory_order_acquire)) {
        PoolCache& c = s->pool;
        c.bytes = 0;
        c.spare.store(0, std::memory_order_relaxed);
        return_cached_sub_slots(c, false);
        return_cached_page_slots(c, false);
        if (s->parked) adopt_parked(*s->parked);
      }
      free_entry(r, s);
    }
    s = next;
  }
  r.threads = mine;
  if (mine) mine->prev = mine->next = nullptr;
  r.retired.store(0, std::memory_order_relaxed);
}

bool registry_tear_down() noexcept {
  Registry& r = registry();
  std::unique_lock lock(r.mutex, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (g_torn_down.exchange(true, std::memory_order_acq_rel)) return true;
  const ThreadKeyHolder& k = thread_key();
  // Deleted first: a thread that ends from now on runs nothing of ours (Windows runs retire_entry
  // here for each value left, which does nothing now).
  if (k.ok) (void)pal::delete_thread_key(k.key);  // refused: nothing else can be done
  for (ThreadEntry* s = r.threads; s;) {
    ThreadEntry* const next = s->next;
    // A cache held busy by a thread that was stopped (see provider.cpp) stays as it is.
    const bool emptied = !s->busy.test_and_set(std::memory_order_acquire);
    if (emptied) {
      s->unlock();
      s->return_pool_slots(false);
      if (std::optional<Parked> p = s->take_parked()) adopt_parked(*p);
    }
    // An ended thread's entry is freed. A live thread's stays as it is, empty: at process exit its
    // thread may still hold it inside an arena's call (my_entry gives it out no more). One in
    // static storage goes with the library; one on the heap is what an unload leaves.
    if (emptied && s->retired.load(std::memory_order_acquire)) free_entry(r, s);
    s = next;
  }
  r.threads = nullptr;
  r.retired.store(0, std::memory_order_relaxed);
  return true;
}

}  // namespace reservoir::detail
