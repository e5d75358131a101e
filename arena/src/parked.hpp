// The parked reservations (parked.cpp): destroyed arenas' own mappings, kept for the next arena of
// the same layout and options in the destroying thread's cache or in a shared list, within one
// limit of count and committed bytes. A source of the provider: it calls address_space.hpp and
// fills the ThreadCache the provider hands it.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "thread_cache.hpp"

namespace reservoir::detail {

// The most committed memory all parked reservations may hold together.
inline constexpr std::size_t kCacheMaxCommitted = std::size_t{1} << 20;

// A parked reservation of exactly this mapping size and options: `own`'s first (may be
// nullptr), then the shared list's most recent.
std::optional<Parked> take_parked(ThreadCache* own, std::size_t mapping_size,
                                  const ArenaOptions& options) noexcept;
// Parks p in `own` if it holds none, else in the shared list; false if the limits are reached
// (or parking is off), and then the caller releases it.
bool park(ThreadCache* own, const Parked& p) noexcept;
// A reservation parked in an ended thread's cache moves to the shared list (still counted), or,
// if the list has no room for its bookkeeping, goes back to the OS.
void adopt_parked(const Parked& p) noexcept;
// Takes every reservation out of the shared list, still counted (see drop_parked).
std::vector<Parked> take_parked_list() noexcept;
// Uncounts a reservation taken out of the cache and releases it to the OS.
void drop_parked(const Parked& p) noexcept;
// The number of parked reservations (every thread's cache and the list), and its limit.
std::size_t parked_count() noexcept;
void set_parked_limit(std::size_t entries) noexcept;
// Whether the list's lock is free now (taken and let go at once).
bool parked_lock_free() noexcept;
// fork(): the list's lock is held across it; in the child the counts are taken again from what
// is left (the list, and `mine`: the forking thread's cache), since claims made by vanished
// threads will never complete.
void parked_lock_for_fork() noexcept;
void parked_unlock_after_fork() noexcept;
void parked_recount_in_child(const ThreadCache* mine) noexcept;

}  // namespace reservoir::detail
