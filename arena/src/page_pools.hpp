// The page pools (page_pools.cpp): page-granular slots carved from large chunks, for arenas up to
// kLargestPoolSlot and for default arrays' tiers. A source of the provider: it calls pal,
// address_space.hpp and pool_state.hpp, and fills the ThreadCache the provider hands it.
#pragma once

#include <cstddef>
#include <system_error>

#include "thread_cache.hpp"

namespace reservoir::detail {

// A slot for an arena of `usable` bytes (a page multiple) whose commit granule is `granule` and
// whose base must be a multiple of `align` (a power of two): `own`'s cached slot of the class
// first (own may be nullptr), then a parked one, then a fresh one. True with *base, and in
// *committed the prefix already committed (whole granules, at most usable), in *open whether the
// slot lies in an open reservation (pal::reserve_open: read-write already, so the arena commits
// without calling the OS and decommits with pal::discard). False with *error clear if no class
// fits or a large class's chunk could not be had (the caller reserves a mapping of its own),
// false with the OS's error if it refused the small chunk the slot would come from.
// *guarded says whether the slot's chunk is guarded (address_space.hpp's ChunkKind).
bool take_slot(std::size_t usable, std::size_t granule, std::size_t align, ThreadCache* own,
               std::byte** base, std::size_t* committed, bool* open, bool* guarded,
               std::error_code* error) noexcept;
// Gives back the slot of an arena of `usable` bytes with `committed` bytes committed (`open` as
// take_slot said): into `own`'s cache if it has room for the class, else to the pool. A closed
// slot goes back with nothing committed while the mappings are short (mappings_short), so that
// its prefix's mappings merge back into its chunk's.
void return_slot(std::byte* base, std::size_t usable, std::size_t committed, bool open,
                 bool guarded, ThreadCache* own) noexcept;
// Gives the page slots cached in `c` back to the pools and empties them, within the resident
// limit, or with `keep_all` parked as they are (a trim then releases them). Takes the pools'
// lock: the caller must not hold it.
void return_cached_page_slots(PoolCache& c, bool keep_all) noexcept;
// Decommits every parked slot and releases every chunk none of whose slots is in use; the bytes
// decommitted or released. With the pools' lock held.
std::size_t trim_page_pools() noexcept;

}  // namespace reservoir::detail
