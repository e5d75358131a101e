// The sub-page runs (sub_page_runs.cpp): slots of 256 B to kLargestSubPageSlot in runs that are
// committed and populated at once. A source of the provider: it calls pal, address_space.hpp,
// populate.hpp and pool_state.hpp, and fills the ThreadCache the provider hands it.
#pragma once

#include <cstddef>

#include "thread_cache.hpp"

namespace reservoir::detail {

// A sub-page slot for an arena of `bytes` (at most kLargestSubPageSlot): `own`'s cached slot of
// the class first (own may be nullptr), then a free one, then one of a new run. True with *base
// and the slot's size in *slot_bytes (all of it committed and readable). False if a new run was
// needed and could not be made (the OS refused, or with `charge` the memory limit did): the
// caller makes the arena page-granular instead. Nothing is left changed by a false.
bool take_sub_slot(std::size_t bytes, bool charge, ThreadCache* own, std::byte** base,
                   std::size_t* slot_bytes) noexcept;
// Gives back a sub-page slot of `slot_bytes` (as take_sub_slot said): into `own`'s cache while
// it and the pools hold less than the resident limit, else to its run.
void return_sub_slot(std::byte* base, std::size_t slot_bytes, ThreadCache* own) noexcept;
// Gives the sub-page slots cached in `c` back to their runs and empties them (`keep_all`: no run
// is released here, a trim does it). Takes the pools' lock: the caller must not hold it.
void return_cached_sub_slots(PoolCache& c, bool keep_all) noexcept;
// Releases every run none of whose slots is in use; the bytes released. With the pools' lock
// held.
std::size_t trim_sub_page_runs() noexcept;

}  // namespace reservoir::detail
