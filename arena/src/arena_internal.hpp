// What the Arena's source files share and nothing outside arena/src may use: the address-space
// accounting, the memory-limit check and the reservation cache, each owned by its own file.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <reservoir/arena.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define RESERVOIR_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RESERVOIR_ARENA_ASAN 1
#endif
#endif
#if defined(RESERVOIR_ARENA_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace reservoir::detail {

inline constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// The largest reservation we ask for: the user half of a 48-bit address space (128 TiB) on 64-bit
// systems, 2 GiB on 32-bit ones. Anything larger cannot succeed, so it is a length_error up front.
inline constexpr std::size_t kMaxReservation =
    sizeof(void*) >= 8 ? (std::size_t{1} << 47) : (std::size_t{1} << 31);

// Clears AddressSanitizer's poison from [p, p+n): a container's annotations may leave some
// behind (the part of an 8-byte granule past a capacity that ended inside it), and the next
// owner of a parked or re-mapped range must start from clean memory. Nothing without ASan.
inline void unpoison([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t n) noexcept {
#if defined(RESERVOIR_ARENA_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
}

// value % unit and value / unit for a unit > 0: a mask and a shift where the unit is a power of
// two (page sizes, allocation granularities and nearly every commit granule are), a division
// otherwise. A 64-bit division takes tens of cycles; a recycled array's create and destroy made a
// dozen of them, a quarter of its time.
// (Not std::has_single_bit: without a popcount instruction in the baseline ISA it is a call.)
inline bool power_of_two(std::size_t unit) noexcept {
  return (unit & (unit - 1)) == 0;
}
inline std::size_t remainder_of(std::size_t value, std::size_t unit) noexcept {
  return power_of_two(unit) ? value & (unit - 1) : value % unit;
}
inline std::size_t quotient_of(std::size_t value, std::size_t unit) noexcept {
  return power_of_two(unit) ? value >> std::countr_zero(unit) : value / unit;
}
// value rounded down to a multiple of a unit > 0.
inline std::size_t round_down(std::size_t value, std::size_t unit) noexcept {
  return value - remainder_of(value, unit);
}

// In an open reservation a transparent huge page backs a whole aligned 2 MiB, which may run past
// an arena's committed prefix (no mapping boundary stops it there). What an arena at `base` with
// `committed` bytes committed may have backed ends at the end of the 2 MiB page that holds its
// last committed byte, within `limit` (its slot): the end of what a discard must cover.
inline std::size_t backed_end(const std::byte* base, std::size_t committed,
                              std::size_t limit) noexcept {
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto end = reinterpret_cast<std::uintptr_t>(base) + committed;
  const std::uintptr_t huge_end = (end + kHuge - 1) & ~(kHuge - 1);
  return std::min<std::size_t>(committed + (huge_end - end), std::max(limit, committed));
}

// value rounded up to a multiple of `unit`, which need not be a power of two; false on overflow.
// A unit of 0 (an empty arena's granule) leaves the value as it is.
inline bool round_up(std::size_t value, std::size_t unit, std::size_t* out) noexcept {
  if (unit == 0) {
    *out = value;
    return true;
  }
  const std::size_t rem = remainder_of(value, unit);
  if (rem == 0) {
    *out = value;
    return true;
  }
  if (value > kMax - (unit - rem)) return false;
  *out = value + (unit - rem);
  return true;
}

// "0x7f12..." for messages ("%p" prints no 0x on Windows).
std::string hex_address(const void* p);

// ---- address_space.cpp: every reservation is made and released here, and counted ------------

// pal::reserve / pal::release, counted in reserved_address_space(). A refused reservation is
// tried again after the reservation cache is emptied, unless `release_parked` is false (the
// slot pools, which hold their lock: the fork handlers take the cache's lock first). With `open`
// (the slot pools' chunks), an open reservation (pal::reserve_open) where the OS makes them, a
// closed one (pal::reserve) elsewhere; *open says which.
std::error_code reserve_mapping(std::size_t size, void** out, bool release_parked = true,
                                bool* open = nullptr) noexcept;
// A refused release only leaks address space; nobody can be told (destructors), so the bytes are
// no longer counted either way.
void release_mapping(void* mapping, std::size_t size) noexcept;
// A reservation of `size` bytes enters (true) or leaves (false) the cache: parked reservations
// are counted apart, so they never shrink what a new default array is given.
void count_parked(std::size_t size, bool parked) noexcept;
// Address space in the slot pools' large chunks that no live arena holds (never-carved slots,
// and slots parked in the pools, not in a thread's cache) enters (true) or leaves (false): counted
// apart from parked reservations, which a refused reservation releases first (this it cannot: the
// pools' lock may be held), and, like them, never shrinking what a new default array is given.
void count_pool_spare(std::size_t size, bool spare) noexcept;

// The exception for a request plan() rejected (reservation_cache.cpp).
[[noreturn]] void throw_plan_error(std::errc e, std::size_t max_bytes);

// ---- memory_limit.cpp: the headroom under the process's memory limit ------------------------
//
// A commit step is charged before it is committed: charge() takes the bytes out of the
// process-wide headroom (failing, and taking nothing, if they do not fit) and counts them as in
// flight until settle() says they are populated (then the OS's usage figure includes them).
// refund() gives back a charge whose commit failed; credit() gives back decommitted bytes.

// Charges `populated` bytes about to be backed; true if they fit (or no limit applies).
// *charged is what was taken (0 when nothing is checked): what refund/credit may give back.
bool memory_limit_charge(std::size_t populated, std::size_t* charged) noexcept;
// Both checks of a commit step of `committed` bytes, `populated` of them backed at once and
// `backed` of them backed by the time the caller has written what it commits for:
// machine_can_back(), then memory_limit_charge(); the Refusal if either says no.
std::error_code charge_step(std::size_t committed, std::size_t populated, std::size_t backed,
                            std::size_t* charged) noexcept;
// The charged bytes are backed now (or will be by the caller's next stores).
void memory_limit_settle(std::size_t charged) noexcept;
// The charged step was not committed: its bytes go back to the headroom.
void memory_limit_refund(std::size_t charged) noexcept;
// True if commit steps are checked against a limit: one set by set_memory_limit(), or a cgroup's
// as of the latest reading (taken now if there is none yet).
bool memory_limit_in_force() noexcept;
// The sentence appended to a refused step's message: the limit, its source, the usage, the
// margin, and how to raise or turn off the check.
std::string memory_limit_advice();
// True unless a commit of `committed` bytes, `populated` of them backed at once, is more than
// the machine can back (checked for steps of at least an eighth of its RAM), or its `backed`
// bytes (what the caller will write) do not fit what the machine has left, less a margin
// (every step: the machine's headroom, re-read as it runs low).
bool machine_can_back(std::size_t committed, std::size_t populated, std::size_t backed) noexcept;
// The sentence for a step machine_can_back() refused.
std::string machine_memory_advice(std::size_t committed, std::size_t populated);
// fork(): the memory-limit locks held across it (prepare) and released (after, both sides).
void memory_limit_lock_for_fork() noexcept;
void memory_limit_unlock_after_fork() noexcept;
// Registers the process's fork handlers once (reservation_cache.cpp); every file whose locks
// they cover calls it before first taking them. False if they could not be registered (or the
// OS has no fork): then the cache stays off.
bool register_fork_handlers() noexcept;

// ---- slot_pool.cpp: small reservations carved from chunks, recycled with their pages -----------

// A slot for an arena of `usable` bytes (a page multiple) whose commit granule is `granule` and
// whose base must be a multiple of `align` (a power of two): true with *base, and in *committed
// the prefix already committed (whole granules, at most usable), in *open whether the slot lies
// in an open reservation (pal::reserve_open: read-write already, so the arena commits without
// calling the OS and decommits with pal::discard). False with *error clear if no class fits or a
// large class's chunk could not be had (the caller reserves a mapping of its own), false with the
// OS's error if it refused the small chunk the slot would come from.
bool take_slot(std::size_t usable, std::size_t granule, std::size_t align, std::byte** base,
               std::size_t* committed, bool* open, std::error_code* error) noexcept;
// Gives back the slot of an arena of `usable` bytes with `committed` bytes committed (`open` as
// take_slot said).
void return_slot(std::byte* base, std::size_t usable, std::size_t committed, bool open) noexcept;
// A sub-page slot for an arena of `bytes` (at most kLargestSubPageSlot): true with *base and the
// slot's size in *slot_bytes (all of it committed and readable). False if a new run was needed
// and could not be made (the OS refused, or with `charge` the memory limit did): the caller
// makes the arena page-granular instead. Nothing is left changed by a false.
bool take_sub_slot(std::size_t bytes, bool charge, std::byte** base,
                   std::size_t* slot_bytes) noexcept;
// Gives back a sub-page slot of `slot_bytes` (as take_sub_slot said).
void return_sub_slot(std::byte* base, std::size_t slot_bytes) noexcept;
// fork(): the pools' lock held across it.
void pool_lock_for_fork() noexcept;
void pool_unlock_after_fork() noexcept;

// A thread's own cache of pool slots: the last slot of each class it gave back, taken again by
// its next arena of that class without the pools' lock, so that threads creating and destroying
// arrays do not contend for it. It lives in the thread's reservation-cache slot (below), which
// gives it its lock, its registry and its end. A cached slot is parked as in the pool (poisoned
// under ASan, at most kPoolKeepPerSlot committed, counted in pool_resident_bytes()); a cached
// sub-page slot still counts as in use in its run, until it goes back to the pool. Its bytes are
// counted per thread, so that no shared counter moves at every array: a thread's cache keeps
// pages only while the pools' parked bytes and its own stay under the resident limit, so all
// threads' caches together may exceed the limit by what each holds (at most one slot a class).
inline constexpr std::size_t kPoolClassCount = 7;  // slot_pool.cpp's classes
inline constexpr std::size_t kPoolSubClassCount = 4;
struct PoolCache {
  struct Page {
    std::byte* base = nullptr;  // nullptr: none
    std::size_t committed = 0;
    bool open = false;  // its chunk is an open reservation
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
// Gives every slot of `c` back to the pools and empties it (slot_pool.cpp), within the resident
// limit, or with `keep_all` parked as they are (trim_pools then releases them and counts them).
// Takes the pools' lock: the caller may hold the cache's (always taken before the pools'), not
// the pools'.
void flush_pool_cache(PoolCache& c, bool keep_all) noexcept;
// The calling thread's pool cache, locked (its owner's lock: a trim, a reap or a fork waits for
// it, never the other way round), or nullptr: the thread has no reservation-cache slot (with
// `create`: the OS or the heap refused one; without: none was made yet, or the thread is
// ending). unlock_pool_cache() before taking the pools' lock.
PoolCache* lock_pool_cache(bool create) noexcept;
void unlock_pool_cache() noexcept;
// Gives every thread's cached pool slots back to the pools, ended threads' too, parked as they
// are (trim_pools).
void flush_all_pool_caches() noexcept;
// The committed bytes in every thread's pool cache (pool_resident_bytes).
std::size_t pool_cache_bytes() noexcept;
// The address space of the large-class slots in the calling thread's pool cache (PoolCache::spare):
// what its next default array takes back, so not counted as held when its tier is chosen.
std::size_t own_cached_spare() noexcept;
// Gives the pool caches of the other threads that hold large-class slots back to the pools, within
// the resident limit (and ended threads' caches, as a reap does): their address space then counts
// as the pools' spare and their slots go to the next default arrays of any thread. Returns the
// address space given back. Takes the registry's lock and walks every thread: for the rare choice
// of a smaller tier, not for every array.
std::size_t reclaim_cached_spare() noexcept;
// Gives the cached pool slots of threads that have ended back to the pools, if any thread has
// ended since the last time (one load otherwise). Called before a take goes to the pools.
void reap_ended_threads() noexcept;

// ---- reservation_cache.cpp: destroyed arenas' reservations, parked for the next arena ---------

struct Parked {
  void* mapping;
  std::size_t mapping_size;
  std::byte* base;
  std::size_t reserved;
  std::size_t committed;  // kept committed: whole granules (see Arena::park_in_cache)
  ArenaOptions options;
};

// The most committed memory all parked reservations may hold together.
inline constexpr std::size_t kCacheMaxCommitted = std::size_t{1} << 20;

// A parked reservation of exactly this mapping size and options, taken out of the cache.
std::optional<Parked> take_parked(std::size_t mapping_size, const ArenaOptions& options) noexcept;
// Parks p; false if the cache's limits are reached (or it is off), and then the caller releases.
bool park(const Parked& p) noexcept;

}  // namespace reservoir::detail
