// The thread registry (thread_registry.cpp): one ThreadCache per thread, found through a pal
// thread key, listed so that a trim, a clear or a fork can reach every thread's, and reaped when
// its thread has ended. The provider's; it calls the sources to give back what a cache holds.
#pragma once

#include <cstddef>
#include <vector>

#include "thread_cache.hpp"

namespace reservoir::detail {

// The calling thread's cache, made if `create` and there is none. nullptr without one: before
// the thread's first take, once it is retired during thread exit (from then on none is made), or
// if the OS or the heap refused. So arenas created or destroyed during thread exit after that use
// the shared list and the pools, never a cache that would never be reaped.
ThreadCache* my_cache(bool create) noexcept;
// Gives the caches of threads that have ended back (their parked reservations to the shared
// list, their pool slots to the pools), if any thread has ended since the last time (one load
// otherwise).
void reap_ended_threads() noexcept;
// Gives every thread's cached pool slots back to the pools, ended threads' too, parked as they
// are (trim_pools).
void return_all_cached_slots() noexcept;
// Takes the parked reservations out of every thread's cache and the shared list, still counted
// (parked.hpp's drop_parked gives each back).
std::vector<Parked> take_all_parked() noexcept;
// The committed bytes in every thread's pool cache (pool_resident_bytes).
std::size_t cached_pool_bytes() noexcept;
// The address space of the large-class slots in the calling thread's cache (PoolCache::spare):
// what its next default array takes back, so not counted as held when its tier is chosen.
std::size_t own_cached_spare() noexcept;
// Gives the pool caches of the other threads that hold large-class slots back to the pools, within
// the resident limit (and ended threads' caches, as a reap does): their address space then counts
// as the pools' spare and their slots go to the next default arrays of any thread. Takes the
// registry's lock and walks every thread: for the rare choice of a smaller tier, not for every
// array.
void reclaim_cached_spare() noexcept;
// At unload or process exit (provider.cpp): deletes the thread key, so that a thread ending later
// calls nothing of the library's, and gives every thread's cached slots and parked reservation
// back to the pools and the shared list. From then on no thread has a cache (my_cache returns
// nullptr). Once; later calls do nothing. False, with nothing done, if the registry's lock is held
// (by a thread the OS stopped at process exit, which will never let it go); a cache held busy then
// is left as it is.
bool registry_tear_down() noexcept;
// fork(): the registry's lock held across it. In the child only the forking thread exists: every
// other thread's cache is emptied (what it held goes back, except a cache its thread held busy,
// which may be half-written and is lost to the child, as that thread is) and freed.
void registry_lock_for_fork() noexcept;
void registry_unlock_after_fork() noexcept;
void registry_clean_up_in_child() noexcept;

}  // namespace reservoir::detail
