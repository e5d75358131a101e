// reservoir/reservations.hpp - where arenas' reservations come from, process-wide: the reservation
// cache, the slot pools, sub-page slots and the address-space budget with its default tiers.
// Included by <reservoir/arena.hpp>.
#pragma once

#include <cstddef>
#include <string>

#include <reservoir/settings.hpp>

namespace reservoir {

// The reservation cache: destroyed arenas (with reuse_reservation) park their reservation here,
// trimmed to at most kDoublingStepLimit committed (as reuse_reservation says), and new arenas of
// the same size and options take one instead of calling the OS. Each thread keeps one parked
// reservation of its own, reached without a lock, behind it a shared list; together they hold at
// most `entries` reservations (default 16) and at most 1 MiB of committed memory. When a thread
// has ended, the next operation that reaps ended threads moves its reservation to the list (or
// back to the OS), in any destruction order of thread_local objects; arenas destroyed during
// thread exit after that park in the list. Its limit is set_reservation_cache_limit()
// (settings.hpp). Thread-safe. Memory taken from the cache is not zeroed (like malloc): containers
// construct what they store.

// Releases every parked reservation (the shared list and every thread's own) to the OS.
void clear_reservation_cache() noexcept;
// Reservations parked in the cache: every thread's own plus the shared list.
std::size_t reservation_cache_size() noexcept;

// ---- the slot pools
// ------------------------------------------------------------------------------
//
// An arena whose reservation is at most kLargestPoolSlot (with reuse_reservation; DynArray with
// max_elements up to 256 Ki ints), and too large for a sub-page slot (or made with
// sub_page_slot = false), takes a page-granular slot of a size class (16 KiB, 64 KiB, 256 KiB,
// 1 MiB) carved from a large chunk: one OS mapping per chunk, not per arena, with
// a never-committed guard page between slots, so guard pages and stable addresses hold as for any
// arena. A destroyed arena's slot goes back to its pool keeping up to kPoolKeepPerSlot committed
// while all parked slots together keep at most the resident limit; the next arena of the class
// takes the most recently freed slot with those pages committed: no system call and no page fault
// for its first pages. Like malloc, such pages are not zeroed: they hold what the previous arena
// wrote (DynArray never reads an element it did not construct). An arena made with
// reuse_reservation = false never takes a slot and starts with zeroed pages. Thread-safe; a
// forked child finds the pools consistent.
//
// Each thread keeps the last slot of each class (sub-page classes too) that it gave back, parked
// as above, for its own next arena of that class: taking and returning it take no lock shared
// with other threads, so threads that create and destroy arrays at once do not contend. Another
// thread does not get that slot while its thread lives (except a large slot, taken back into the
// pools before a default array would be given a smaller tier); when the thread has ended, its slots
// go back to the pools (the next time any thread goes to them), and trim_pools() takes them from
// running threads too. A thread keeps pages in its cache only while the pools' parked bytes and
// its own stay under the resident limit (so all threads' caches together may exceed it by what
// each holds: at most one slot a class, each at most kPoolKeepPerSlot committed). A forked child
// gets the forking thread's cache and the slots of the other threads' caches (except one that
// was being changed at the fork, which is left out).
//
// The large classes (64-bit systems) hold the reservations of default arrays: an arena whose
// reservation is within 1/64 of 64 MiB, 1 GiB or 64 GiB (default_reservation_size's tiers) takes
// a slot of that size, 2 MiB-aligned, with a never-committed 2 MiB gap to the next one, from a
// chunk of 2 to 256 slots (at most 2 TiB; elsewhere than Linux 64 slots, 256 GiB), and is
// recycled as above. The address space of those chunks that no live arena holds is counted like
// parked reservations (it never makes the budget's tiers smaller). A chunk the OS refuses is no
// error (the arena reserves a mapping of its own), and under an address-space limit (RLIMIT_AS) no
// large chunk is reserved.
//
// By default every chunk is closed, as every reservation: PROT_NONE until committed, so a write
// past an arena's committed prefix faults, and core dumps hold every arena's committed pages.
// set_open_pool_chunks(true) opts in to open large chunks where the OS makes them (Linux, unless
// strict overcommit, a finite RLIMIT_DATA or locked memory rule them out), for the chunks reserved
// afterwards. What it buys: an arena in an open chunk commits and decommits without changing
// protection, so a fresh default array splits no kernel mapping (a closed chunk's array is two
// or three of the vm.max_map_count mappings) and its first commit is no mprotect call (its guard
// page is installed by one madvise as its slot is first carved instead, on Linux 6.13 and later).
// What it gives up: past its committed prefix such an arena reads zeros and takes writes (an
// overrun upward faults only at the next slot's guard page, up to 2 MiB past its reservation);
// and the chunk is left out of core dumps (MADV_DONTDUMP: the kernel would dump each written one
// whole, a page at a time), so a core holds nothing of an arena in a large slot (default arrays,
// and any arena whose reservation is within 1/64 below a tier); arenas with reuse_reservation =
// false are always dumped. Slots of chunks already reserved keep their kind (parked, cached by a
// thread, or not yet handed out): set it before the first such arena. The setting:
// set_open_pool_chunks() (settings.hpp).

// The smallest slot class that holds the reservation; larger arenas reserve their own mapping.
inline constexpr std::size_t kLargestPoolSlot = std::size_t{1} << 20;
// The most a parked slot keeps committed.
inline constexpr std::size_t kPoolKeepPerSlot = std::size_t{64} * 1024;
// The limit of committed memory in parked slots: set_pool_resident_limit() (settings.hpp).

// Committed bytes held by parked slots now, the threads' caches included.
std::size_t pool_resident_bytes() noexcept;
// Takes every thread's cached slots back into the pools, decommits every parked slot and
// releases every chunk (and every sub-page run) none of whose slots is in use: RAM and address
// space go back to the OS. Returns the bytes decommitted or released. Live arenas are untouched.
std::size_t trim_pools() noexcept;

// ---- sub-page slots ----------------------------------------------------------------------------
//
// An arena of at most kLargestSubPageSlot bytes (with reuse_reservation and sub_page_slot, the
// defaults) takes a slot of the smallest class that holds it (256 B, 512 B, 1 KiB, 2 KiB) from
// a run: 64 KiB of address space reserved, committed and populated at once, split into equal
// slots of one class. Its reserved() is the slot size (a DynArray's max_size() is still what it
// asked for), and all of it is committed from the start: commit(), trim(), shrink() and reset()
// change nothing (shrink_to_fit keeps the memory), and nothing can be refused after
// construction. Its base() is aligned to kSubPageSlotAlignment (not to a page).
//
// What such an arena gives up: there are no guard pages between slots, so a stray write just
// past the end or before the base lands in a neighbour's slot instead of faulting. In
// AddressSanitizer builds free slots are poisoned and every slot is followed by a poisoned red
// zone, so an overrun is reported there; elsewhere use sub_page_slot = false where an overrun
// must fault. A destroyed arena's slot goes back to its class's free list (the next arena takes
// the most recently freed one; its bytes are not zeroed: they hold what the previous arena
// wrote, as with malloc; fresh runs read as zeros). Slots that no live arena holds count in
// pool_resident_bytes(); when a slot is returned while that exceeds the resident limit and its
// run has no slot in use any more, the run goes back to the OS, as trim_pools() does with every
// such run. A run is charged against the memory limit (respect_memory_limit) when it is
// populated; if it cannot be made (the OS or the limit refuses), the arena is made
// page-granular instead and reports any refusal as before. Thread-safe, fork-safe.

// The largest arena that takes a sub-page slot.
inline constexpr std::size_t kLargestSubPageSlot = 2048;
// The alignment of a sub-page slot's base (DynArray keeps element types aligned beyond it
// page-granular).
inline constexpr std::size_t kSubPageSlotAlignment = 64;

// ---- the address-space budget -------------------------------------------------------------------
//
// Reserving is free in RAM but not in address space: 128 TiB (47-bit x86-64 and arm64) holds only
// 2048 reservations of 64 GiB, a 39-bit arm64 kernel's 512 GiB only 8, and every reservation is
// at least one kernel mapping (Linux allows 65530 by default, vm.max_map_count). Containers that
// are not given a size (default-constructed DynArray) therefore ask default_reservation_size(),
// which plans within a budget: the first arrays get the full default (64 GiB) while the address
// space reserved by all arenas stays under a quarter of the budget; after that a new default
// array reserves 1 GiB while the total stays under the budget, and 64 MiB beyond it. Arrays given
// reservoir::max_elements / max_bytes get exactly what they ask for, and count toward the total.

// The default tiers, largest first: what a default-sized container reserves while the budget has
// room (the full default), once a quarter of it is held (reduced), and beyond it (the least).
// default_reservation_size() grants them, DynArray asks for the first and falls back as far as
// the last, and the slot pools' large classes are these sizes: this table is the one place they
// are written.
inline constexpr std::size_t kDefaultTiers[] = {
    sizeof(void*) >= 8 ? (std::size_t{64} << 30) : (std::size_t{256} << 20),  // full
    std::size_t{1} << 30,                                                     // reduced
    std::size_t{64} << 20,                                                    // least
};
inline constexpr std::size_t kDefaultTierFull = kDefaultTiers[0];
inline constexpr std::size_t kDefaultTierReduced = kDefaultTiers[1];
inline constexpr std::size_t kDefaultTierLeast = kDefaultTiers[2];
static_assert(kDefaultTierLeast < kDefaultTierReduced && kDefaultTierLeast <= kDefaultTierFull);

// Address space reserved by every live Arena, parked reservations included.
std::size_t reserved_address_space() noexcept;
// The budget: address_space_budget() and set_address_space_budget() (settings.hpp).

// What a default-sized container should reserve now, given that it would like `preferred` bytes.
// Parked reservations (the cache) are not counted: they are released when a reservation needs
// their room: `preferred` while the live reservations + preferred stay within a quarter of the
// budget, else min(preferred, 1 GiB) while the total stays within the budget, else
// min(preferred, 64 MiB). Under an address-space limit (RLIMIT_AS, `ulimit -v`), where every
// mapping counts, no more than half of what the limit leaves (limit - VmSize), which replaces the
// 1 GiB tier where that does not fit; and 0 once 64 MiB or less is left (the container then
// refuses with Refusal::address_space_budget). Reading the limit is a system call: a reading that
// found none is reused for 20 ms (a limit set in that time is seen at its end; a reservation the
// kernel refuses meanwhile still falls back to less), a limit in force is read every time.
std::size_t default_reservation_size(std::size_t preferred) noexcept;
// The sentence a refused default reservation appends: what is reserved, the budget, the
// RLIMIT_AS in force and how to raise each.
std::string address_space_advice();

}  // namespace reservoir
