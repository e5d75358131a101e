// The chunks of the page pools (pool_chunks.cpp): the size classes, and the large mappings their
// slots are carved from. Below page_pools.cpp, which parks and hands out the slots; it calls pal
// and address_space.hpp. Everything here runs with pool_state().mutex held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <system_error>
#include <vector>

#include <reservoir/arena.hpp>

#include "thread_cache.hpp"

namespace reservoir::detail {

// Slot sizes, smallest first. An arena takes the smallest class that holds its reservation. The
// classes from kFirstLarge on are the large ones (64-bit systems only: 0 elsewhere, never taken).
inline constexpr bool k64Bit = sizeof(void*) >= 8;
inline constexpr std::size_t kClassBytes[] = {
    std::size_t{16} << 10,        std::size_t{64} << 10,          std::size_t{256} << 10,
    std::size_t{1} << 20,         k64Bit ? kDefaultTierLeast : 0, k64Bit ? kDefaultTierReduced : 0,
    k64Bit ? kDefaultTierFull : 0};
inline constexpr std::size_t kClasses = std::size(kClassBytes);
static_assert(kClasses == kPoolClassCount);
inline constexpr std::size_t kFirstLarge = 4;
static_assert(kClassBytes[kFirstLarge - 1] == kLargestPoolSlot);
// The large classes are the default tiers, smallest first (reservations.hpp).
static_assert(!k64Bit || (kClassBytes[kFirstLarge] == kDefaultTierLeast &&
                          kClassBytes[kFirstLarge + 1] == kDefaultTierReduced &&
                          kClassBytes[kFirstLarge + 2] == kDefaultTierFull));
inline constexpr bool is_large(std::size_t k) noexcept {
  return k >= kFirstLarge;
}

struct Chunk {
  std::byte* base;
  std::size_t bytes;   // as reserved
  std::byte* first;    // slot 0
  std::size_t slots;   // how many fit
  std::size_t carved;  // slots handed out at least once; the rest were never touched
  bool open;           // an open reservation (pal::reserve_open): read-write, guards installed
  bool guarded;        // and its slots' committed ends carry guard markers (ChunkKind::guarded)
  std::size_t maps;    // mappings counted for it beyond its own: guards made by mprotect
};

struct FreeSlot {
  std::byte* base;
  std::size_t committed;  // committed prefix, still read-write (ASan: poisoned while parked)
  bool open;              // its chunk is open
  bool guarded;           // its chunk is guarded: a guard marker at base + committed
};

struct SizeClass {
  std::vector<Chunk> chunks;        // carving happens in the last one
  std::vector<FreeSlot> free;       // LIFO: the most recently used slot is the warmest
  std::size_t next_chunk_size = 0;  // first_chunk(k) at first: bytes, or slots (large classes)
  // next_chunk_size is the last chunk's size, to be grown before the next chunk is reserved (not
  // after each chunk: growing it reads the machine's capabilities, which a first array need not).
  bool grow_next = false;
};

// The classes, guarded by pool_state().mutex.
SizeClass* size_classes() noexcept;
// The class for a reservation of `usable` bytes (a page multiple), or kClasses if none fits: the
// smallest small class that holds it, or the large class it fills to within 1/64.
std::size_t class_of(std::size_t usable) noexcept;
// The slot pitch and base alignment of class k.
std::size_t stride_of(std::size_t k) noexcept;
std::size_t align_of(std::size_t k) noexcept;
// Carves a never-used slot (nothing committed), reserving a new chunk when the last one is full:
// chunks grow geometrically; if the OS refuses a larger one, the smallest is tried once more.
// In an open chunk the slot starts a page past its kHugePageSize boundary, and that page is made
// its guard first (refused: the slot stays uncarved); in a guarded chunk the slot's first page too
// (its committed end while nothing is committed), in the same call. The guard then shares its
// page-table page with the slot's first pages: a guard elsewhere would cost a page-table page of
// its own, most of what opening the chunk saves.
// With the mutex held. nullptr with the error if the OS refuses, the bookkeeping has no memory or
// guards made by mprotect would pass the mapping budget; *open and *guarded say what the slot's
// chunk is.
std::byte* carve(SizeClass& sc, std::size_t k, std::error_code* error, bool* open,
                 bool* guarded) noexcept;
// Releases every chunk of class k none of whose slots is in use (a slot is in use if it was
// carved and is not in the free list), taking its slots out of the free list. A chunk whose parked
// slots hold pages is kept unless `drop_pages`; with it, their pages go with the chunk's mapping
// (counted as given back: no call decommits them first). Returns the bytes of pages dropped.
std::size_t release_unused_chunks(SizeClass& sc, std::size_t k, bool drop_pages) noexcept;

}  // namespace reservoir::detail
