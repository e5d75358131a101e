// reservoir/settings.hpp - every process-wide setting of reservoir, in one place: each with its
// default and its contract. Included by <reservoir/arena.hpp>, and by the headers of the
// subsystems they tune (reservations.hpp, memory_limit.hpp, growth_policy.hpp), which explain
// those subsystems.
//
// Every setting is thread-safe and governs every arena of the process from the call on.
//
// | setting              | set with                         | read with              | default   |
// |----------------------|----------------------------------|------------------------|-----------|
// | reservation cache    | set_reservation_cache_limit(n)   | -                      | 16        |
// | slot pools' RAM      | set_pool_resident_limit(bytes)   | pool_resident_limit()  | 64 MiB    |
// | open pool chunks     | set_open_pool_chunks(open)       | open_pool_chunks()     | false     |
// | address-space budget | set_address_space_budget(bytes)  | address_space_budget() | 0: auto   |
// | memory limit         | set_memory_limit(bytes)          | memory_limit_headroom()| 0: auto   |
// | huge pages           | set_huge_pages(mode)             | huge_pages()           | automatic |
//
// The defaults: 16 reservations, at most 1 MiB committed; kDefaultPoolResidentLimit; closed
// chunks; half of the address space; kMemoryLimitAuto, the cgroup's limit;
// HugePages::automatic. Each declaration below states its contract.
//
// What reads or acts on the same process-wide state, declared with its subsystem:
// reservation_cache_size() and clear_reservation_cache(), pool_resident_bytes() and trim_pools(),
// reserved_address_space(), default_reservation_size() and address_space_advice()
// (reservations.hpp); huge_pages_in_effect() (growth_policy.hpp). Settings that exist for tests
// only are not here: they belong to the fault-injection seam (pal/testing/pal_testing.hpp).
#pragma once

#include <cstddef>

namespace reservoir {

// ---- the reservation cache (reservations.hpp) ---------------------------------------------------

// The most reservations parked in the cache, every thread's own and the shared list together
// (default 16, and at most 1 MiB of committed memory whatever the limit). 0 turns the cache off
// and releases everything parked, every thread's own too.
void set_reservation_cache_limit(std::size_t entries) noexcept;

// ---- the slot pools (reservations.hpp) ----------------------------------------------------------

// The default limit of committed memory in parked slots (all classes, all threads).
inline constexpr std::size_t kDefaultPoolResidentLimit = std::size_t{64} << 20;
// Sets the limit of committed bytes parked slots keep; slots returned beyond it are decommitted.
// 0 parks every slot decommitted (its address space is still reused).
void set_pool_resident_limit(std::size_t bytes) noexcept;
std::size_t pool_resident_limit() noexcept;

// Whether the large chunks reserved from now on are open (read-write from the start, where the
// OS makes them: Linux) or closed (PROT_NONE until committed, the default). Slots of chunks
// already reserved keep their kind: set it before the first such arena. reservations.hpp says
// what an open chunk buys and what it gives up.
void set_open_pool_chunks(bool open) noexcept;
bool open_pool_chunks() noexcept;

// ---- the address-space budget (reservations.hpp) ------------------------------------------------

// The budget default-sized containers plan within (default_reservation_size): half of
// pal::address_space_size() (which follows RLIMIT_AS), unless set by hand.
std::size_t address_space_budget() noexcept;
// Sets the budget in bytes; 0 goes back to the automatic one.
void set_address_space_budget(std::size_t bytes) noexcept;

// ---- the memory limit (memory_limit.hpp) --------------------------------------------------------

// Kinds of limit for set_memory_limit().
inline constexpr std::size_t kMemoryLimitAuto = 0;  // the cgroup's (the default)
inline constexpr std::size_t kMemoryLimitOff = static_cast<std::size_t>(-1);  // no check
// Sets the limit commit steps are checked against: kMemoryLimitAuto, kMemoryLimitOff, or a
// number of bytes the process's resident set (pal::current_rss()) must stay under.
void set_memory_limit(std::size_t bytes) noexcept;
// The headroom left for commits as of a fresh reading (limit - usage - margin), or
// kMemoryLimitOff if no limit applies.
std::size_t memory_limit_headroom() noexcept;

// ---- huge pages (growth_policy.hpp) -------------------------------------------------------------

// Whether arenas with ArenaOptions::huge_pages use transparent huge pages (and the geometric
// commit steps that go with them). The default is automatic.
enum class HugePages {
  // Where they pay: Linux with THP in `always` or `madvise` mode
  // (/sys/kernel/mm/transparent_hugepage/enabled), except on a virtual machine whose host takes
  // back free memory in 2 MiB blocks. There each huge page is a block the host faults in again,
  // which costs more than the same memory in 4 KiB pages (figures: docs/big-arrays.md).
  automatic,
  // Wherever THP honours MADV_HUGEPAGE, on such virtual machines too.
  on,
  // Never: every arena uses 4 KiB pages and bounded, populated steps.
  off,
};
// Sets the mode for commit steps taken from now on (arenas already past the huge-page threshold
// keep their advice).
void set_huge_pages(HugePages mode) noexcept;
HugePages huge_pages() noexcept;

}  // namespace reservoir
