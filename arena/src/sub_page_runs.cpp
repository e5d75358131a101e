// The sub-page runs: arenas of at most kLargestSubPageSlot bytes take a slot in a run of 64 KiB,
// committed and populated at once, split into equal slots of one class ([slot 0][slot 1]...;
// with AddressSanitizer [red zone][slot 0][red zone][slot 1]...[red zone], every red zone and
// every free slot poisoned). Such a slot is committed for its whole life, so its arena never
// calls the OS; a run goes back to the OS once none of its slots is in use, on trim_pools() or
// when the pools hold more than the resident limit (except the run each class carves from).
// A source of the provider, sharing the page pools' lock and resident count (pool_state.hpp).
#include "sub_page_runs.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "address_space.hpp"
#include "bits.hpp"
#include "memory_limit.hpp"
#include "pool_state.hpp"
#include "populate.hpp"

namespace reservoir::detail {
namespace {

constexpr std::size_t kSubClassBytes[] = {256, 512, 1024, 2048};
constexpr std::size_t kSubClasses = std::size(kSubClassBytes);
static_assert(kSubClasses == kPoolSubClassCount);
static_assert(kSubClassBytes[kSubClasses - 1] == kLargestSubPageSlot);
static_assert(kSubClassBytes[0] % kSubPageSlotAlignment == 0);

// A run spans this much (or a page, or the allocation granularity, if larger).
constexpr std::size_t kRunBytes = std::size_t{64} << 10;

// Poisoned bytes before every slot and after the last one, so that an overrun of a slot whose
// neighbour is in use is still reported. A multiple of kSubPageSlotAlignment: slots stay aligned.
#if defined(RESERVOIR_ARENA_ASAN)
constexpr std::size_t kRedZone = kSubPageSlotAlignment;
#else
constexpr std::size_t kRedZone = 0;
#endif

struct Run {
  std::byte* base;
  std::size_t bytes;   // as reserved, all committed
  std::size_t in_use;  // slots live arenas hold
};

struct SubClass {
  std::vector<Run> runs;         // ordered by base
  std::vector<std::byte*> free;  // LIFO; room for every slot of every run (so returns never fail)
  std::size_t slots = 0;         // in all runs
  std::byte* cursor = nullptr;   // the next never-used slot of the run being carved
  std::byte* end = nullptr;      // that run's end
};

// The classes, guarded by pool_state().mutex. Never destroyed, as the pools' state, and in static
// storage, so that they go with the library when a shared object is unloaded.
SubClass* sub_classes() noexcept {
  alignas(SubClass) static std::byte storage[sizeof(SubClass) * kSubClasses];
  static SubClass* const c = [] {
    for (std::size_t k = 0; k < kSubClasses; ++k)
      ::new (storage + k * sizeof(SubClass)) SubClass;
    return std::launder(reinterpret_cast<SubClass*>(storage));
  }();
  return c;
}

// Made before main, while no other thread can be inside the initializer when one forks.
[[maybe_unused]] const bool g_made_before_main = (sub_classes(), true);

std::size_t sub_class_of(std::size_t bytes) noexcept {
  std::size_t k = 0;
  while (k + 1 < kSubClasses && kSubClassBytes[k] < bytes)
    ++k;
  return k;
}

std::size_t run_slots(const Run& r, std::size_t stride) noexcept {
  return (r.bytes - kRedZone) / stride;
}

// The run that holds `slot`.
Run& run_of(SubClass& sc, const std::byte* slot) noexcept {
  auto it = std::upper_bound(sc.runs.begin(), sc.runs.end(), slot,
                             [](const std::byte* s, const Run& r) { return s < r.base; });
  return *(it - 1);
}

// Reserves, commits and populates a run and makes it the one slots are carved from; false (and
// nothing changed) if the OS, the memory limit (with `charge`) or the bookkeeping refuses.
bool add_run(PoolState& p, SubClass& sc, std::size_t stride, bool charge) noexcept {
  std::size_t bytes = 0;
  if (!round_up(std::max(kRunBytes, pal::page_size()), pal::allocation_granularity(), &bytes)) {
    return false;
  }
  const std::size_t slots = (bytes - kRedZone) / stride;
  try {
    sc.runs.reserve(sc.runs.size() + 1);
    sc.free.reserve(sc.slots + slots);
  } catch (...) {
    return false;
  }
  void* mapping = nullptr;
  if (reserve_mapping(bytes, &mapping)) return false;
  auto* base = static_cast<std::byte*>(mapping);
  // Backed now, as a commit step is (populate.hpp).
  std::size_t charged = 0;
  if (charge_and_commit(base, bytes, bytes, bytes, charge, false, &charged)) {
    release_mapping(mapping, bytes);
    return false;
  }
  if (populate(base, bytes)) {
    memory_limit_refund(charged, charge ? bytes : 0);
    release_mapping(mapping, bytes);
    return false;
  }
  memory_limit_settle(charged);
  poison(base, bytes);
  const Run run{base, bytes, 0};
  sc.runs.insert(std::upper_bound(sc.runs.begin(), sc.runs.end(), run,
                                  [](const Run& a, const Run& b) { return a.base < b.base; }),
                 run);  // cannot allocate: reserved above
  sc.slots += slots;
  sc.cursor = base + kRedZone;
  sc.end = base + bytes;
  p.resident += slots * stride;
  return true;
}

// Releases the runs no live arena holds a slot of (all of them, or with `only` just that one),
// taking their slots out of the free list. Returns the bytes released.
std::size_t release_idle_runs(PoolState& p, SubClass& sc, std::size_t stride,
                              const Run* only = nullptr) noexcept {
  const auto idle = [only](const Run& r) {
    return r.in_use == 0 && (only == nullptr || &r == only);
  };
  if (only != nullptr) {
    // One run: all its slots are in the free list (none is in use, none in a thread's cache).
    // They went back last, most often, so the search runs from the back and the list is
    // compacted from the first of them only: destroying many arrays in a row releases each run
    // at the cost of its own slots, not of the whole list.
    const std::byte* const lo = only->base;
    const std::byte* const hi = lo + only->bytes;
    const auto inside = [lo, hi](const std::byte* s) { return s >= lo && s < hi; };
    std::size_t left = run_slots(*only, stride);
    std::size_t from = sc.free.size();
    for (std::size_t i = sc.free.size(); i > 0 && left > 0; --i) {
      if (inside(sc.free[i - 1])) {
        from = i - 1;
        --left;
      }
    }
    const auto first = sc.free.begin() + static_cast<std::ptrdiff_t>(from);
    sc.free.erase(std::remove_if(first, sc.free.end(), inside), sc.free.end());
  } else {
    sc.free.erase(std::remove_if(sc.free.begin(), sc.free.end(),
                                 [&](std::byte* s) { return idle(run_of(sc, s)); }),
                  sc.free.end());
  }
  std::size_t released = 0;
  for (const Run& r : sc.runs) {
    if (!idle(r)) continue;
    if (sc.cursor != nullptr && sc.cursor >= r.base && sc.cursor < r.base + r.bytes) {
      sc.cursor = sc.end = nullptr;  // the next take starts a new run
    }
    const std::size_t slots = run_slots(r, stride);
    sc.slots -= slots;
    p.resident -= slots * stride;
    released += r.bytes;
    unpoison(r.base, r.bytes);  // the next mapping here starts clean
    release_mapping(r.base, r.bytes);
    memory_released(r.bytes);
  }
  sc.runs.erase(std::remove_if(sc.runs.begin(), sc.runs.end(), idle), sc.runs.end());
  return released;
}

// A class with no run left gives its bookkeeping's heap memory back. With the pools' lock held.
void free_empty_bookkeeping(SubClass& sc) noexcept {
  if (!sc.runs.empty()) return;
  std::vector<Run>().swap(sc.runs);
  std::vector<std::byte*>().swap(sc.free);
}

// Gives a sub-page slot back to its pool. `own`: the parked bytes in the calling thread's cache,
// counted with the pools' against the resident limit. `keep_all`: for trim_pools, which releases
// what is parked itself (and counts it).
void return_sub_slot_to_pool(std::byte* base, std::size_t slot_bytes, std::size_t own,
                             bool keep_all) noexcept {
  const std::size_t k = sub_class_of(slot_bytes);
  const std::size_t stride = slot_bytes + kRedZone;
  PoolState& p = pool_state();
  std::lock_guard lock(p.mutex);
  SubClass& sc = sub_classes()[k];
  poison(base, slot_bytes);
  sc.free.push_back(base);  // cannot allocate: add_run reserved room for every slot
  p.resident += stride;
  Run& r = run_of(sc, base);
  // The run being carved stays even when idle (trim_pools() releases it): releasing it would
  // make an array created and destroyed in a loop map, populate and unmap a run every time. With
  // the pools off (after the library's teardown, provider.cpp) it goes too: nothing would trim it.
  const bool carving = sc.end == r.base + r.bytes && p.enabled.load(std::memory_order_relaxed);
  if (--r.in_use == 0 && !carving && !keep_all &&
      p.resident + own > p.resident_limit.load(std::memory_order_relaxed)) {
    release_idle_runs(p, sc, stride, &r);
    if (!p.enabled.load(std::memory_order_relaxed)) free_empty_bookkeeping(sc);
  }
  p.note_resident();
}

}  // namespace

bool take_sub_slot(std::size_t bytes, bool charge, ThreadCache* own, std::byte** base,
                   std::size_t* slot_bytes) noexcept {
  PoolState& p = pool_state();
  if (!p.enabled.load(std::memory_order_relaxed)) return false;
  const std::size_t k = sub_class_of(bytes);
  const std::size_t size = kSubClassBytes[k];
  const std::size_t stride = size + kRedZone;
  if (own != nullptr) {
    own->lock();
    PoolCache* const c = &own->pool;
    std::byte* const cached = std::exchange(c->sub[k], nullptr);
    if (cached != nullptr) c->bytes -= stride;
    own->unlock();
    if (cached != nullptr) {
      unpoison(cached, size);
      *base = cached;
      *slot_bytes = size;
      return true;
    }
  }
  std::lock_guard lock(p.mutex);
  SubClass& sc = sub_classes()[k];
  std::byte* slot = nullptr;
  if (!sc.free.empty()) {
    slot = sc.free.back();
    sc.free.pop_back();
  } else {
    if (sc.cursor == nullptr || static_cast<std::size_t>(sc.end - sc.cursor) < stride) {
      if (!add_run(p, sc, stride, charge)) return false;
    }
    slot = sc.cursor;
    sc.cursor += stride;
  }
  ++run_of(sc, slot).in_use;
  p.resident -= stride;
  p.note_resident();
  unpoison(slot, size);
  *base = slot;
  *slot_bytes = size;
  return true;
}

void return_sub_slot(std::byte* base, std::size_t slot_bytes, ThreadCache* own) noexcept {
  // The thread's cache first, while the pools and it hold less than the resident limit: no lock.
  const std::size_t k = sub_class_of(slot_bytes);
  const std::size_t stride = slot_bytes + kRedZone;
  const PoolState& p = pool_state();
  std::size_t own_bytes = 0;
  if (own != nullptr) {
    own->lock();
    PoolCache* const c = &own->pool;
    const bool room = c->sub[k] == nullptr &&
                      p.resident_seen.load(std::memory_order_relaxed) + c->bytes + stride <=
                          p.resident_limit.load(std::memory_order_relaxed);
    if (room) {
      poison(base, slot_bytes);
      c->sub[k] = base;
      c->bytes += stride;
    }
    own_bytes = c->bytes;
    own->unlock();
    if (room) return;
  }
  return_sub_slot_to_pool(base, slot_bytes, own_bytes, false);
}

void return_cached_sub_slots(PoolCache& c, bool keep_all) noexcept {
  for (std::size_t k = 0; k < kSubClasses; ++k) {
    if (std::byte* const slot = std::exchange(c.sub[k], nullptr))
      return_sub_slot_to_pool(slot, kSubClassBytes[k], 0, keep_all);
  }
}

std::size_t trim_sub_page_runs() noexcept {
  PoolState& p = pool_state();
  std::size_t released = 0;
  for (std::size_t k = 0; k < kSubClasses; ++k) {
    SubClass& sc = sub_classes()[k];
    released += release_idle_runs(p, sc, kSubClassBytes[k] + kRedZone);
    free_empty_bookkeeping(sc);
  }
  return released;
}

}  // namespace reservoir::detail
