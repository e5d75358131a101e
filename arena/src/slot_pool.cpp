// The slot pools: reservations for small arenas carved from large chunks (one OS mapping per
// chunk, not per arena), and the slots of destroyed arenas kept with their first pages still
// committed, so that the next small arena costs no system call and no page fault.
//
// A chunk of class c is laid out as [guard][slot 0][guard][slot 1][guard]...[slot n-1][guard]:
// every slot is c bytes, every guard one page that is never committed, so touching a byte just
// before or after a slot faults exactly as an arena's own guard pages do. A slot's arena commits
// and decommits inside its slot with the ordinary calls; only the chunk is reserved and released.
//
// Arenas of at most kLargestSubPageSlot bytes take a sub-page slot instead: runs of 64 KiB,
// committed and populated at once, split into equal slots of one class ([slot 0][slot 1]...;
// with AddressSanitizer [red zone][slot 0][red zone][slot 1]...[red zone], every red zone and
// every free slot poisoned). Such a slot is committed for its whole life, so its arena never
// calls the OS; a run goes back to the OS once none of its slots is in use, on trim_pools() or
// when the pools hold more than the resident limit (except the run each class carves from).
//
// The large classes hold default arrays (DynArray without max_elements): their slots are the
// tiers default_reservation_size() grants (64 MiB, 1 GiB, 64 GiB), and only reservations within
// 1/64 of a tier take one, so a slot never holds much more address space than its arena asked
// for. Their slots start on kLargeAlign boundaries (what Arena's plan() asks of reservations of
// 4 MiB and more, for huge pages) and are kLargeAlign apart, the gap never committed: a chunk is
// [guard][pad][slot 0][gap][slot 1][gap]...[slot n-1][gap], pad + guard < kLargeAlign.
//
// With set_open_pool_chunks(true), where the OS makes them (Linux), a large chunk is an open
// reservation (pal::reserve_open): read-write from the start, so an arena in one of its slots
// commits without a system call. By default it is closed, as every other reservation. In a
// closed chunk each live slot's committed prefix is a kernel mapping of its own, made by the
// commit that splits the chunk's (measured: 7.2-7.8 us for a fresh default array against
// 4.2-4.5 without the call, 1e4 arrays 1 GiB apart). An open chunk is one mapping; each slot
// starts a page past its kLargeAlign boundary and that page is its guard
// ([pad][guard|slot 0][gap][guard|slot 1][gap]...[guard]): a stray access below a slot faults,
// one past its end runs through the read-write gap into the next slot's guard (or the chunk's
// last page). Past the committed prefix the slot reads and writes as memory that was never
// touched: zeros, backed on first touch (docs/guarantees.md).
//
// The address space of a large chunk that no live arena holds (slots never carved, and parked ones)
// is counted as spare (count_pool_spare), as parked reservations are, so it never makes a new
// default array's tier smaller. A slot in a thread's cache (PoolCache) counts as spare for that
// thread's own next default array only (own_cached_spare), as held for the others' (as it was a
// moment before): a shared counter that every thread writes at every array would cost more than
// the array (its cache line moving between cores), and a thread caches one slot a tier at most.
// Before another thread's default array is given a smaller tier, the other threads' cached large
// slots go back to the pools (reclaim_cached_spare), so live threads' caches never shrink it. A
// large chunk the OS refuses is no error: the arena reserves a mapping of its own, as it would
// without the pools; nor is one asked for under an address-space limit (RLIMIT_AS), where every
// reserved slot would count against the limit.
//
// Locking: one mutex guards every class. A take or a return is a few loads and stores under it;
// the OS is called under it only to reserve a new chunk, to decommit what a returned slot keeps
// beyond its share, and in trim_pools(). The fork handlers (reservation_cache.cpp) hold it across
// fork(), so a child finds the pools consistent.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "arena_internal.hpp"

namespace reservoir {
namespace detail {
namespace {

// Slot sizes, smallest first. An arena takes the smallest class that holds its reservation. The
// classes from kFirstLarge on are the large ones (64-bit systems only: 0 elsewhere, never taken).
constexpr bool k64Bit = sizeof(void*) >= 8;
constexpr std::size_t kClassBytes[] = {
    std::size_t{16} << 10,
    std::size_t{64} << 10,
    std::size_t{256} << 10,
    std::size_t{1} << 20,
    k64Bit ? std::size_t{64} << 20 : 0,
    k64Bit ? std::size_t{1} << 30 : 0,
    k64Bit ? static_cast<std::size_t>(std::uint64_t{64} << 30) : 0};
constexpr std::size_t kClasses = std::size(kClassBytes);
static_assert(kClasses == kPoolClassCount);
constexpr std::size_t kFirstLarge = 4;
static_assert(kClassBytes[kFirstLarge - 1] == kLargestPoolSlot);

// A large slot's base alignment and the gap after each one: the 2 MiB huge page (Arena's
// plan() never asks more of a reservation's base).
constexpr std::size_t kLargeAlign = std::size_t{2} << 20;
// A large class's first chunk holds this many slots, each later one twice the previous, up to
// kMaxLargeChunkSlots and kMaxLargeChunkBytes. A new chunk costs about a dozen system calls (on
// Linux the open-chunk checks read two /proc files), several times a default array's own cost,
// so on Linux, where a chunk is one read-write MAP_NORESERVE mapping that costs nothing until
// touched, the caps are large: 64 GiB slots up to 31 to a chunk, 1 GiB and 64 MiB slots up to 256.
// Elsewhere a chunk is not free in proportion to its size: XNU splits an anonymous mapping into
// 128 MiB map entries, FreeBSD charges swap for the whole object at the first mprotect of a
// clipped entry, Wine keeps a byte per reserved page (64 MiB for 256 GiB): there the caps are
// 256 GiB and 64 slots (64 GiB slots: 3 to a chunk). The byte cap also bounds the spare address
// space a class can hold.
constexpr std::size_t kFirstLargeChunkSlots = 2;
#if defined(__linux__)
constexpr std::size_t kMaxLargeChunkSlots = 256;
constexpr std::size_t kMaxLargeChunkBytes = std::size_t{1} << (k64Bit ? 41 : 30);
#else
constexpr std::size_t kMaxLargeChunkSlots = 64;
constexpr std::size_t kMaxLargeChunkBytes = std::size_t{1} << (k64Bit ? 38 : 30);
#endif
constexpr std::size_t kLargeChunkShare = 16;

constexpr bool is_large(std::size_t k) noexcept {
  return k >= kFirstLarge;
}

// A class's first chunk spans about 2 MiB, each later one twice the previous, up to 64 MiB: a
// program with a few small arrays reserves little, one with many makes few mappings.
constexpr std::size_t kFirstChunkBytes = std::size_t{2} << 20;
constexpr std::size_t kMaxChunkBytes = std::size_t{64} << 20;
constexpr std::size_t kMinChunkSlots = 4;

// The first chunk size of class k: bytes (small classes) or slots (large ones).
constexpr std::size_t first_chunk(std::size_t k) noexcept {
  return is_large(k) ? kFirstLargeChunkSlots : kFirstChunkBytes;
}

struct Chunk {
  std::byte* base;
  std::size_t bytes;   // as reserved
  std::byte* first;    // slot 0
  std::size_t slots;   // how many fit
  std::size_t carved;  // slots handed out at least once; the rest were never touched
  bool open;           // an open reservation (pal::reserve_open): read-write, guards installed
};

struct FreeSlot {
  std::byte* base;
  std::size_t committed;  // committed prefix, still read-write (ASan: poisoned while parked)
  bool open;              // its chunk is open
};

struct SizeClass {
  std::vector<Chunk> chunks;        // carving happens in the last one
  std::vector<FreeSlot> free;       // LIFO: the most recently used slot is the warmest
  std::size_t next_chunk_size = 0;  // first_chunk(k) at first: bytes, or slots (large classes)
};

// ---- sub-page classes
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

struct Pools {
  std::mutex mutex;
  SizeClass classes[kClasses];  // guarded by mutex
  SubClass sub[kSubClasses];    // guarded by mutex
  std::size_t resident = 0;     // committed bytes in free slots, sub-page slots too; by mutex
  std::atomic<std::size_t> resident_limit{kDefaultPoolResidentLimit};
  std::atomic<std::size_t> resident_seen{0};  // `resident` for readers without the lock
  bool enabled = true;                        // false without fork handlers
};

Pools& pools() {
  // Never destroyed: an arena in a static object may be destroyed after any function-local static.
  static Pools* const p = [] {
    auto* r = new Pools;
    for (std::size_t k = 0; k < kClasses; ++k)
      r->classes[k].next_chunk_size = first_chunk(k);
    r->enabled = register_fork_handlers();
    return r;
  }();
  return *p;
}

// Made before main, while no other thread can be inside the initializer when one forks.
[[maybe_unused]] const bool g_made_before_main = (pools(), true);

// The class for a reservation of `usable` bytes (a page multiple), or kClasses if none fits: the
// smallest small class that holds it, or the large class it fills to within 1/64.
std::size_t class_of(std::size_t usable) noexcept {
  const std::size_t page = pal::page_size();
  for (std::size_t i = 0; i < kClasses; ++i) {
    const std::size_t size = kClassBytes[i];
    if (size == 0 || remainder_of(size, page) != 0 || usable > size) continue;
    if (!is_large(i) || usable >= size - size / 64) return i;
  }
  return kClasses;
}

// The slot pitch and base alignment of class k.
std::size_t stride_of(std::size_t k) noexcept {
  return kClassBytes[k] + (is_large(k) ? kLargeAlign : pal::page_size());
}
std::size_t align_of(std::size_t k) noexcept {
  return is_large(k) ? kLargeAlign : pal::page_size();
}

void poison([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t n) noexcept {
#if defined(RESERVOIR_ARENA_ASAN)
  ASAN_POISON_MEMORY_REGION(p, n);
#endif
}

void note_resident(Pools& p) noexcept {
  p.resident_seen.store(p.resident, std::memory_order_relaxed);
}

// Slots in all the class's chunks: the most the free list can ever hold.
std::size_t slots_total(const SizeClass& sc) noexcept {
  std::size_t n = 0;
  for (const Chunk& c : sc.chunks)
    n += c.slots;
  return n;
}

// Reserves a chunk for the class: of about `target` bytes (small classes) or of `target` slots
// (large ones). With the mutex held.
std::error_code add_chunk(SizeClass& sc, std::size_t k, std::size_t target) noexcept {
  const std::size_t page = pal::page_size();
  const std::size_t stride = stride_of(k);
  const std::size_t slots =
      is_large(k) ? target : std::max(kMinChunkSlots, (target - page) / stride);
  // Small: [guard][slot][guard]...: page + slots * stride. Large: slot 0 starts at the first
  // kLargeAlign boundary past the guard page, at most kLargeAlign into the mapping, so
  // slots * stride + page hold every slot, its gap and the guard page after the last gap; one
  // page more holds an open chunk's slots, each a page past its boundary, and its last guard.
  std::size_t bytes = 0;
  const std::size_t extra = is_large(k) ? 2 * page : page;
  if (slots > (kMax - extra) / stride ||
      !round_up(extra + slots * stride, pal::allocation_granularity(), &bytes)) {
    return std::make_error_code(std::errc::value_too_large);
  }
  // A large chunk takes at most a sixteenth of the address space (a 39-bit arm64 kernel's
  // 512 GiB: 32 GiB, so 64 GiB slots are not pooled there), so that spare slots never crowd out
  // the rest of the program.
  if (is_large(k) && bytes > pal::address_space_size() / kLargeChunkShare) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
  const std::size_t fit = is_large(k) ? slots : (bytes - page) / stride;
  try {
    sc.chunks.reserve(sc.chunks.size() + 1);
    sc.free.reserve(slots_total(sc) + fit);  // so that returning a slot never allocates
  } catch (...) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
  void* mapping = nullptr;
  bool open = false;
  if (std::error_code ec = reserve_mapping(bytes, &mapping, false, is_large(k) ? &open : nullptr))
    return ec;
  auto* const base = static_cast<std::byte*>(mapping);
  std::byte* first = base + page;
  if (is_large(k)) {
    const auto start = reinterpret_cast<std::uintptr_t>(first);
    const std::uintptr_t aligned = (start + kLargeAlign - 1) / kLargeAlign * kLargeAlign;
    first += aligned - start;
  }
  // An open chunk's last page is its guard (what lies below slot 0 is no other arena's).
  if (open) {
    if (std::error_code ec = pal::guard(base + bytes - page, page)) {
      release_mapping(mapping, bytes);
      return ec;
    }
  }
  if (is_large(k)) count_pool_spare(bytes, true);  // no live arena holds any of it yet
  sc.chunks.push_back(Chunk{base, bytes, first, fit, 0, open});
  return {};
}

// The next chunk size after one of `now`: twice as large, up to the class's cap.
std::size_t next_chunk(std::size_t k, std::size_t now) noexcept {
  if (!is_large(k)) return std::min(kMaxChunkBytes, now * 2);
  const std::size_t most =
      std::min(kMaxLargeChunkBytes, pal::address_space_size() / kLargeChunkShare);
  const std::size_t cap =
      std::max(kFirstLargeChunkSlots,
               std::min(kMaxLargeChunkSlots, (most - pal::page_size()) / stride_of(k)));
  return std::min(cap, now * 2);
}

// Carves a never-used slot (nothing committed), reserving a new chunk when the last one is full:
// chunks grow geometrically; if the OS refuses a larger one, the smallest is tried once more.
// In an open chunk the slot starts a page past its kLargeAlign boundary, and that page is made
// its guard first (refused: the slot stays uncarved). The guard then shares its page-table page
// with the slot's first pages: a guard elsewhere would cost a page-table page of its own, which
// measured as most of what opening the chunk saves.
// With the mutex held. nullptr with the error if the OS refuses or the bookkeeping has no memory;
// *open says whether the slot's chunk is open.
std::byte* carve(SizeClass& sc, std::size_t k, std::error_code* error, bool* open) noexcept {
  if (sc.chunks.empty() || sc.chunks.back().carved == sc.chunks.back().slots) {
    std::error_code ec = add_chunk(sc, k, sc.next_chunk_size);
    if (ec && sc.next_chunk_size > first_chunk(k)) {
      sc.next_chunk_size = first_chunk(k);
      ec = add_chunk(sc, k, sc.next_chunk_size);
    }
    if (ec) {
      *error = ec;
      return nullptr;
    }
    sc.next_chunk_size = next_chunk(k, sc.next_chunk_size);
  }
  Chunk& c = sc.chunks.back();
  std::byte* slot = c.first + c.carved * stride_of(k);
  if (c.open) {
    const std::size_t page = pal::page_size();
    if (std::error_code ec = pal::guard(slot, page)) {
      *error = ec;
      return nullptr;
    }
    slot += page;
  }
  ++c.carved;
  *open = c.open;
  return slot;
}

// Decommits [base + keep, base + committed) (in an open chunk: gives its pages back, the range
// stays read-write); the committed prefix that is true afterwards (all of it if the OS refused:
// the pages stay read-write, nothing is lost, and the count is honest).
std::size_t decommit_beyond(std::byte* base, std::size_t keep, std::size_t committed, bool open,
                            std::size_t slot_bytes) noexcept {
  if (committed <= keep) return committed;
  std::byte* const from = base + keep;
  const std::size_t len = committed - keep;
  // In an open chunk the rest of a huge page past the prefix goes too (backed_end).
  if (open ? pal::discard(from, backed_end(base, committed, slot_bytes) - keep)
           : pal::decommit(from, len)) {
    return committed;
  }
  unpoison(from, len);  // fresh pages for the next owner
  return keep;
}

// ---- sub-page runs (with the mutex held) ----

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
bool add_run(Pools& p, SubClass& sc, std::size_t stride, bool charge) noexcept {
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
  if (reserve_mapping(bytes, &mapping, false)) return false;
  auto* base = static_cast<std::byte*>(mapping);
  std::size_t charged = 0;
  bool ok = !charge || !charge_step(bytes, bytes, bytes, &charged);
  if (ok && pal::commit(base, bytes)) ok = false;
  if (ok) {
    // Backed now, as a commit step is (arena_commit.cpp): one populate call, then a store per
    // page, where the host's fault lands on a VM that takes free pages back.
    const std::error_code ec = pal::prefault(base, bytes);
    ok = !ec || ec == std::errc::not_supported;
  }
  if (!ok) {
    memory_limit_refund(charged);
    release_mapping(mapping, bytes);
    return false;
  }
  constexpr std::size_t kTouchStride = 4096;
  auto* first = static_cast<volatile unsigned char*>(mapping);
  for (std::size_t off = 0; off < bytes; off += kTouchStride)
    first[off] = 0;
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
std::size_t release_idle_runs(Pools& p, SubClass& sc, std::size_t stride,
                              const Run* only = nullptr) noexcept {
  const auto idle = [only](const Run& r) {
    return r.in_use == 0 && (only == nullptr || &r == only);
  };
  sc.free.erase(std::remove_if(sc.free.begin(), sc.free.end(),
                               [&](std::byte* s) { return idle(run_of(sc, s)); }),
                sc.free.end());
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
  }
  sc.runs.erase(std::remove_if(sc.runs.begin(), sc.runs.end(), idle), sc.runs.end());
  return released;
}

}  // namespace

bool take_sub_slot(std::size_t bytes, bool charge, std::byte** base,
                   std::size_t* slot_bytes) noexcept {
  Pools& p = pools();
  if (!p.enabled) return false;
  const std::size_t k = sub_class_of(bytes);
  const std::size_t size = kSubClassBytes[k];
  const std::size_t stride = size + kRedZone;
  if (PoolCache* const c = lock_pool_cache(true)) {
    std::byte* const cached = std::exchange(c->sub[k], nullptr);
    if (cached != nullptr) c->bytes -= stride;
    unlock_pool_cache();
    if (cached != nullptr) {
      unpoison(cached, size);
      *base = cached;
      *slot_bytes = size;
      return true;
    }
  }
  reap_ended_threads();  // their caches first, so that their slots are found below
  std::lock_guard lock(p.mutex);
  SubClass& sc = p.sub[k];
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
  note_resident(p);
  unpoison(slot, size);
  *base = slot;
  *slot_bytes = size;
  return true;
}

namespace {

// Gives a sub-page slot back to its pool. `own`: the parked bytes in the calling thread's cache,
// counted with the pools' against the resident limit. `keep_all`: for trim_pools, which releases
// what is parked itself (and counts it).
void return_sub_slot_to_pool(std::byte* base, std::size_t slot_bytes, std::size_t own,
                             bool keep_all) noexcept {
  const std::size_t k = sub_class_of(slot_bytes);
  const std::size_t stride = slot_bytes + kRedZone;
  Pools& p = pools();
  std::lock_guard lock(p.mutex);
  SubClass& sc = p.sub[k];
  poison(base, slot_bytes);
  sc.free.push_back(base);  // cannot allocate: add_run reserved room for every slot
  p.resident += stride;
  Run& r = run_of(sc, base);
  // The run being carved stays even when idle (trim_pools() releases it): releasing it would
  // make an array created and destroyed in a loop map, populate and unmap a run every time.
  const bool carving = sc.end == r.base + r.bytes;
  if (--r.in_use == 0 && !carving && !keep_all &&
      p.resident + own > p.resident_limit.load(std::memory_order_relaxed)) {
    release_idle_runs(p, sc, stride, &r);
  }
  note_resident(p);
}

// Parks a slot of class k with `committed` bytes committed: at most kPoolKeepPerSlot of them,
// and none once the resident limit is reached (`own` and `keep_all` as above).
void return_slot_to_pool(std::byte* base, std::size_t k, std::size_t committed, bool open,
                         std::size_t own, bool keep_all) noexcept {
  Pools& p = pools();
  std::lock_guard lock(p.mutex);
  // 1. Keep at most kPoolKeepPerSlot committed, and nothing once the resident limit is reached.
  const std::size_t share = std::min(committed, round_down(kPoolKeepPerSlot, pal::page_size()));
  const std::size_t limit = p.resident_limit.load(std::memory_order_relaxed);
  const std::size_t keep = keep_all ? committed : p.resident + own + share <= limit ? share : 0;
  const std::size_t now = decommit_beyond(base, keep, committed, open, kClassBytes[k]);
  // 2. Park it: the free list has room for every slot carved (carve reserved it).
  poison(base, now);
  p.classes[k].free.push_back(FreeSlot{base, now, open});
  p.resident += now;
  if (is_large(k)) count_pool_spare(stride_of(k), true);
  note_resident(p);
}

}  // namespace

void flush_pool_cache(PoolCache& c, bool keep_all) noexcept {
  c.bytes = 0;
  c.spare.store(0, std::memory_order_relaxed);
  for (std::size_t k = 0; k < kSubClasses; ++k) {
    if (std::byte* const slot = std::exchange(c.sub[k], nullptr))
      return_sub_slot_to_pool(slot, kSubClassBytes[k], 0, keep_all);
  }
  for (std::size_t k = 0; k < kClasses; ++k) {
    const PoolCache::Page e = std::exchange(c.page[k], PoolCache::Page{});
    if (e.base != nullptr) return_slot_to_pool(e.base, k, e.committed, e.open, 0, keep_all);
  }
}

void return_sub_slot(std::byte* base, std::size_t slot_bytes) noexcept {
  // The thread's cache first, while the pools and it hold less than the resident limit: no lock.
  const std::size_t k = sub_class_of(slot_bytes);
  const std::size_t stride = slot_bytes + kRedZone;
  const Pools& p = pools();
  std::size_t own = 0;
  if (PoolCache* const c = lock_pool_cache(false)) {
    const bool room = c->sub[k] == nullptr &&
                      p.resident_seen.load(std::memory_order_relaxed) + c->bytes + stride <=
                          p.resident_limit.load(std::memory_order_relaxed);
    if (room) {
      poison(base, slot_bytes);
      c->sub[k] = base;
      c->bytes += stride;
    }
    own = c->bytes;
    unlock_pool_cache();
    if (room) return;
  }
  return_sub_slot_to_pool(base, slot_bytes, own, false);
}

bool take_slot(std::size_t usable, std::size_t granule, std::size_t align, std::byte** base,
               std::size_t* committed, bool* open, std::error_code* error) noexcept {
  *error = {};
  const std::size_t k = class_of(usable);
  Pools& p = pools();
  if (k == kClasses || !p.enabled || align == 0 || remainder_of(align_of(k), align) != 0)
    return false;
  // 0. The slot this thread gave back last, as step 1 below takes one from the pool. If the OS
  //    refuses to decommit what it has beyond the new arena's granules, it is parked in the pool
  //    as it is.
  if (PoolCache* const c = lock_pool_cache(true)) {
    const PoolCache::Page e = std::exchange(c->page[k], PoolCache::Page{});
    c->bytes -= e.committed;
    if (e.base != nullptr && is_large(k)) {
      c->spare.store(c->spare.load(std::memory_order_relaxed) - stride_of(k),
                     std::memory_order_relaxed);
    }
    unlock_pool_cache();
    if (e.base != nullptr) {
      const std::size_t fit = round_down(std::min(e.committed, usable), granule);
      const std::size_t now = decommit_beyond(e.base, fit, e.committed, e.open, kClassBytes[k]);
      if (now == fit) {
        unpoison(e.base, fit);
        *base = e.base;
        *committed = fit;
        *open = e.open;
        return true;
      }
      return_slot_to_pool(e.base, k, e.committed, e.open, 0, false);
    }
  }
  reap_ended_threads();  // their caches first, so that their slots are found below
  std::lock_guard lock(p.mutex);
  SizeClass& sc = p.classes[k];
  // 1. A free slot: its committed prefix, cut to whole granules of the new arena inside its
  //    reservation. What lies beyond is decommitted so the arena's view is the truth; if the OS
  //    refuses, the slot goes back and a fresh one is carved.
  while (!sc.free.empty()) {
    FreeSlot s = sc.free.back();
    sc.free.pop_back();
    p.resident -= s.committed;
    const std::size_t fit = round_down(std::min(s.committed, usable), granule);
    const std::size_t now = decommit_beyond(s.base, fit, s.committed, s.open, kClassBytes[k]);
    if (now != fit) {
      p.resident += s.committed;
      sc.free.push_back(s);  // cannot allocate: it was just popped
      break;
    }
    note_resident(p);
    if (is_large(k)) count_pool_spare(stride_of(k), false);
    unpoison(s.base, fit);
    *base = s.base;
    *committed = fit;
    *open = s.open;
    return true;
  }
  note_resident(p);
  // 2. A never-used slot. A large class reserves no chunk under an address-space limit (each
  //    slot would count against it), and a refused one is no error: the caller reserves a
  //    mapping of its own, as it would without the pools.
  if (is_large(k) && (sc.chunks.empty() || sc.chunks.back().carved == sc.chunks.back().slots)) {
    if (pal::AddressSpaceLimit l; pal::address_space_limit(&l)) return false;
  }
  std::byte* fresh = carve(sc, k, error, open);
  if (fresh == nullptr) {
    if (is_large(k)) *error = {};
    return false;
  }
  if (is_large(k)) count_pool_spare(stride_of(k), false);
  *base = fresh;
  *committed = 0;
  return true;
}

void return_slot(std::byte* base, std::size_t usable, std::size_t committed, bool open) noexcept {
  const std::size_t k = class_of(usable);
  Pools& p = pools();
  // The thread's cache first, keeping what the pool would keep: at most kPoolKeepPerSlot, while
  // everything parked stays under the resident limit. The decommit of the rest, if any, runs
  // under the cache's own lock, which only a trim, a reap or a fork waits for.
  std::size_t own = 0;
  if (PoolCache* const c = lock_pool_cache(false)) {
    if (c->page[k].base == nullptr) {
      const std::size_t share = std::min(committed, round_down(kPoolKeepPerSlot, pal::page_size()));
      const std::size_t limit = p.resident_limit.load(std::memory_order_relaxed);
      const std::size_t keep =
          p.resident_seen.load(std::memory_order_relaxed) + c->bytes + share <= limit ? share : 0;
      const std::size_t now = decommit_beyond(base, keep, committed, open, kClassBytes[k]);
      poison(base, now);
      c->page[k] = PoolCache::Page{base, now, open};
      c->bytes += now;
      if (is_large(k)) {
        c->spare.store(c->spare.load(std::memory_order_relaxed) + stride_of(k),
                       std::memory_order_relaxed);
      }
      unlock_pool_cache();
      return;
    }
    own = c->bytes;
    unlock_pool_cache();
  }
  return_slot_to_pool(base, k, committed, open, own, false);
}

void pool_lock_for_fork() noexcept {
  pools().mutex.lock();
}

void pool_unlock_after_fork() noexcept {
  pools().mutex.unlock();
}

}  // namespace detail

void set_pool_resident_limit(std::size_t bytes) noexcept {
  detail::pools().resident_limit.store(bytes, std::memory_order_relaxed);
}

std::size_t pool_resident_limit() noexcept {
  return detail::pools().resident_limit.load(std::memory_order_relaxed);
}

std::size_t pool_resident_bytes() noexcept {
  return detail::pools().resident_seen.load(std::memory_order_relaxed) + detail::pool_cache_bytes();
}

std::size_t trim_pools() noexcept {
  using detail::kMax;
  detail::Pools& p = detail::pools();
  std::size_t released = 0;
  detail::flush_all_pool_caches();  // every thread's cached slots, into the pools first
  std::lock_guard lock(p.mutex);
  for (std::size_t k = 0; k < detail::kClasses; ++k) {
    detail::SizeClass& sc = p.classes[k];
    // 1. Every parked slot gives its pages back.
    for (detail::FreeSlot& s : sc.free) {
      const std::size_t now =
          detail::decommit_beyond(s.base, 0, s.committed, s.open, detail::kClassBytes[k]);
      p.resident -= s.committed - now;
      released += s.committed - now;
      s.committed = now;
    }
    // 2. A chunk none of whose slots is in use goes back to the OS. A slot is in use if it was
    //    carved and is not in the free list; slots that kept pages (a refused decommit) keep
    //    their chunk too.
    std::sort(sc.free.begin(), sc.free.end(),
              [](const detail::FreeSlot& a, const detail::FreeSlot& b) { return a.base < b.base; });
    std::vector<detail::Chunk> kept;
    try {
      kept.reserve(sc.chunks.size());
    } catch (...) {
      continue;  // no memory to sort the chunks out: they stay, their pages are back already
    }
    const auto by_base = [](const detail::FreeSlot& f, const std::byte* b) { return f.base < b; };
    for (const detail::Chunk& c : sc.chunks) {
      const auto lo = std::lower_bound(sc.free.begin(), sc.free.end(), c.base, by_base);
      const auto hi = std::lower_bound(lo, sc.free.end(), c.base + c.bytes, by_base);
      const bool holds_pages =
          std::any_of(lo, hi, [](const detail::FreeSlot& f) { return f.committed != 0; });
      if (static_cast<std::size_t>(hi - lo) == c.carved && !holds_pages) {
        detail::release_mapping(c.base, c.bytes);
        if (detail::is_large(k)) detail::count_pool_spare(c.bytes, false);
        for (auto it = lo; it != hi; ++it)
          it->committed = kMax;  // removed below (the order by base stays intact)
        continue;
      }
      kept.push_back(c);
    }
    sc.free.erase(std::remove_if(sc.free.begin(), sc.free.end(),
                                 [](const detail::FreeSlot& f) { return f.committed == kMax; }),
                  sc.free.end());
    // Only the last chunk can have uncarved slots, and the order is kept, so carving goes on
    // where it was (or reserves a new chunk). A class left with nothing starts small again.
    sc.chunks.swap(kept);
    if (sc.chunks.empty()) sc.next_chunk_size = detail::first_chunk(k);
  }
  for (std::size_t k = 0; k < detail::kSubClasses; ++k) {
    released +=
        detail::release_idle_runs(p, p.sub[k], detail::kSubClassBytes[k] + detail::kRedZone);
  }
  detail::note_resident(p);
  return released;
}

}  // namespace reservoir
