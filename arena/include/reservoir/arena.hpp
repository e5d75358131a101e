// reservoir/arena.hpp - Arena: one reservation, a byte length, a committed prefix that grows.
//
// An Arena reserves max_bytes of address space once and commits pages at the end of its committed
// prefix as its length grows. Memory never moves: every address handed out stays valid until the
// length shrinks below it or the arena is destroyed. Past the committed prefix the reservation is
// inaccessible, so an overrun faults instead of corrupting a neighbour; optional guard pages make
// the bytes just before base() and just after the reservation fault too.
#pragma once

// reservoir needs C++20 or newer and never chooses the standard for its user (the CMake target
// asks for at least C++20, the pkg-config file adds no -std): a consumer compiled as C++17 stops
// here with one clear line instead of pages of errors. MSVC reports the standard in _MSVC_LANG.
#if defined(_MSVC_LANG) && _MSVC_LANG < 202002L
#error "reservoir requires C++20 or newer: compile with /std:c++20 or a later standard"
#elif !defined(_MSVC_LANG) && __cplusplus < 202002L
#error "reservoir requires C++20 or newer: compile with -std=c++20 or a later standard"
#endif

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include <reservoir/pal.hpp>

namespace reservoir {
enum class Refusal : int;
}  // namespace reservoir
template <>
struct std::is_error_code_enum<reservoir::Refusal> : std::true_type {};

namespace reservoir {

// Thrown when the OS refuses to reserve or commit memory. It is a std::bad_alloc, so code that
// handles out-of-memory already handles it; what() names the operation, the size, the address and
// the OS's own words: "cannot commit 64 KiB at 0x7f12...: Cannot allocate memory (ENOMEM)".
class OsAllocationError : public std::bad_alloc {
 public:
  OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                    std::error_code error);
  // The same, with a sentence appended that names the limit met and the remedy.
  OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                    std::error_code error, const std::string& advice);
  const char* what() const noexcept override { return message_.c_str(); }
  const std::error_code& code() const noexcept { return error_; }

 private:
  std::string message_;
  std::error_code error_;
};

// Refusals reservoir decides itself, before or instead of an OS call: the error code of an
// OsAllocationError whose cause is one of its own limits rather than an OS error. The message
// names the limit, its figure and how to raise it.
enum class Refusal : int {
  // A default array cannot be given even the smallest default reservation: the address-space
  // budget or the process's address-space limit (RLIMIT_AS, `ulimit -v`) is spent.
  address_space_budget = 1,
  // The commit step would take the process past its memory limit (a cgroup's, or
  // set_memory_limit()) minus the margin.
  memory_limit,
  // The commit step asks for more than the machine can back (RAM and swap).
  machine_memory,
  // A default array reached the end of a reservation that was made smaller than the default
  // because address space was short: out of memory for it, as for std::vector.
  default_reservation_full,
};
// The category of Refusal codes ("reservoir").
const std::error_category& refusal_category() noexcept;
std::error_code make_error_code(Refusal r) noexcept;

// "64 KiB", "1.5 GiB", "100 B": IEC units for messages.
std::string format_bytes(std::size_t bytes);

struct ArenaOptions {
  // The first commit step and the unit of decommit, in bytes (rounded up to the page size); 0
  // means kDefaultCommitGranule (one page). Every commit call covers at least this much.
  std::size_t commit_granule = 0;

  // Steps grow with the arena, each a power-of-two number of granules, up to this cap (rounded up
  // to whole granules, and at most 65535 granules). Two policies, chosen at each step:
  //   - geometric: each step doubles the committed prefix (one granule, then 1, 2, 4, ...
  //     granules), so growing to n bytes takes O(log n) commit calls. Used where committing is
  //     only a permission change: prefault off, or huge pages in effect (huge_pages and
  //     huge_pages_in_effect()), where the part of a step past kHugePageThreshold is backed by
  //     first touches of 2 MiB pages, one 2 MiB page per fault; below it a step is populated
  //     as prefault says, but no more than half of itself beyond the bytes asked for (so at
  //     most 1.5x the bytes in use are resident), and at most kPopulatedStepLimit at a time.
  //   - bounded (prefault on and no huge pages, or a memory limit in force with
  //     respect_memory_limit): doubling up to kDoublingStepLimit, then at least that and at least
  //     committed()/8, never more than kPopulatedStepLimit: every step is populated (and charged
  //     against the memory limit) at once, so no step may cost more than that.
  // A geometric step the OS or the limit refuses is retried as the smallest step that fits the
  // request. 0 means kDefaultMaxCommitStep; set it equal to commit_granule for fixed steps.
  // Arenas of 4 MiB or more whose cap reaches 2 MiB are aligned to 2 MiB, so that their steps
  // past the first 2 MiB are whole huge pages.
  std::size_t max_commit_step = 0;

  // Keep one never-committed page directly below base() and directly above the reservation, so
  // that touching a byte just outside the arena faults.
  bool guard_pages = true;

  // Back each newly committed step with RAM at once (Linux MADV_POPULATE_WRITE, then a store
  // per page; elsewhere the stores alone), so no append takes a page fault: 3-4x faster growth on
  // Linux and a flat latency tail (see the README). If the populate call itself is refused
  // (ENOMEM), the step is undone and reported as OsAllocationError; but under a memory cgroup
  // the populate meets the OOM killer exactly as a first touch would, which is what
  // respect_memory_limit prevents. Cost: the step's pages are backed before they are used, and
  // the commit call itself takes longer (up to a few ms for 2 MiB).
  bool prefault = true;

  // On destruction, keep the reservation in a small process-wide cache, with up to
  // kDoublingStepLimit of it still committed (whole granules, at least one, at most one
  // max_commit_step), so that the next arena of the same size and options takes it with no system
  // call and no page fault for its first pages. See set_reservation_cache_limit().
  bool reuse_reservation = true;

  // Ask for transparent huge pages (Linux MADV_HUGEPAGE) for the part of the reservation past
  // kHugePageThreshold, once the committed prefix first reaches past it (one madvise call), and
  // use geometric steps (see max_commit_step). Arenas that stay below the threshold never get a
  // huge page. A hint, subject to set_huge_pages(): where huge_pages_in_effect() is false (THP
  // `never` or absent, another OS, a host that reclaims free 2 MiB blocks) nothing changes.
  bool huge_pages = true;

  // Refuse a commit step that would take the process past its memory limit (minus a margin),
  // with OsAllocationError naming the limit, instead of letting the kernel's OOM killer end the
  // process when the pages are touched. The limit is the Linux memory cgroup's (containers:
  // Docker, Kubernetes) or one set by set_memory_limit(). See memory_limit_headroom().
  bool respect_memory_limit = true;

  // With reuse_reservation, an arena of at most kLargestSubPageSlot bytes (DynArray: up to 512
  // ints) takes a sub-page slot: a slot of 256 B, 512 B, 1 KiB or 2 KiB inside pages that are
  // shared with other small arenas and already committed, so making one costs no system call
  // and, most of the time, no page fault (see the sub-page slots below). Such an arena has no
  // guard pages: a byte just past its reservation belongs to a neighbour (AddressSanitizer
  // builds still catch the overrun). false keeps it page-granular, with guard pages on both
  // sides as guard_pages says. options() reports true only for an arena in a sub-page slot.
  bool sub_page_slot = true;

  bool operator==(const ArenaOptions&) const = default;
};

// The reservation cache: destroyed arenas (with reuse_reservation) park their reservation here,
// trimmed to at most kDoublingStepLimit committed (as reuse_reservation says), and new arenas of
// the same size and options take one instead of calling the OS. Each thread has one slot reached
// without a lock, behind it a shared list; slots and list together hold at most `entries`
// reservations (default 16) and at most 1 MiB of committed memory. A thread's end retires its
// slot, and the next operation that takes the list's lock moves the slot's reservation to the
// list (or back to the OS), in any destruction order of thread_local objects; arenas destroyed
// during thread exit after that park in the list. 0 turns the cache off and releases everything
// parked, in every thread's slot. Thread-safe. Memory taken from the cache is not zeroed (like
// malloc): containers construct what they store.
void set_reservation_cache_limit(std::size_t entries) noexcept;
// Releases every parked reservation (the shared list and every thread's slot) to the OS.
void clear_reservation_cache() noexcept;
// Reservations parked in the cache: every thread's slot plus the shared list.
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
// thread, or not yet handed out): set it before the first such arena. Thread-safe.
void set_open_pool_chunks(bool open) noexcept;
bool open_pool_chunks() noexcept;

// The smallest slot class that holds the reservation; larger arenas reserve their own mapping.
inline constexpr std::size_t kLargestPoolSlot = std::size_t{1} << 20;
// The most a parked slot keeps committed.
inline constexpr std::size_t kPoolKeepPerSlot = std::size_t{64} * 1024;
// The default limit of committed memory in parked slots (all classes, all threads).
inline constexpr std::size_t kDefaultPoolResidentLimit = std::size_t{64} << 20;
// Sets the limit of committed bytes parked slots keep; slots returned beyond it are decommitted.
// 0 parks every slot decommitted (its address space is still reused). Thread-safe.
void set_pool_resident_limit(std::size_t bytes) noexcept;
std::size_t pool_resident_limit() noexcept;
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

// Address space reserved by every live Arena, parked reservations included.
std::size_t reserved_address_space() noexcept;
// The budget: half of pal::address_space_size() (which follows RLIMIT_AS), unless set by hand.
std::size_t address_space_budget() noexcept;
// Sets the budget in bytes; 0 goes back to the automatic one. Thread-safe.
void set_address_space_budget(std::size_t bytes) noexcept;
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

// ---- memory limits -----------------------------------------------------------------------------
//
// Under a memory cgroup limit, touching a page past the limit runs the OOM killer: SIGKILL, for
// std::vector and for us alike (populating a step does the same). So before each commit step an
// arena (with respect_memory_limit, the default) compares the step with the headroom left under
// the effective limit minus a margin (1/32 of the limit, at least 8 MiB) and refuses the step with
// OsAllocationError (Refusal::memory_limit) if it does not fit. The headroom is one figure for
// the whole process: each step takes its bytes from it with a compare-and-swap that fails rather
// than go below the re-read threshold, so threads racing the limit cannot overshoot it together;
// readings are taken one at a time and subtract what other threads charged but have not yet
// populated. The margin covers what the kernel counts beyond the arenas' pages (page tables,
// stacks, the allocator): 4 MiB measured with 16 threads at a 512 MiB limit
// (docs/memory-limit.md). Only bytes populated at once or about to be written are charged
// (reserve() charges its first step): committed pages nobody touches cost nothing, and later
// first touches of them are not checked. Decommits give their charge back. The cgroup's files
// are read at most once per commit step; a reading is reused for later steps while the headroom
// it left stays above a quarter of the limit and it is younger than 20 ms (1 s when no limit is
// set). Memory the rest of the program allocates in between is not seen until the next reading.
// Independently of any limit, a step of an eighth of the RAM or more is refused
// (Refusal::machine_memory) if it commits more than RAM + swap under heuristic overcommit, or
// backs more than MemAvailable + SwapFree: std::vector's allocation would be refused too.

// Kinds of limit for set_memory_limit().
inline constexpr std::size_t kMemoryLimitAuto = 0;  // the cgroup's (the default)
inline constexpr std::size_t kMemoryLimitOff = static_cast<std::size_t>(-1);  // no check
// Sets the limit commit steps are checked against: kMemoryLimitAuto, kMemoryLimitOff, or a
// number of bytes the process's resident set (pal::current_rss()) must stay under. Thread-safe.
void set_memory_limit(std::size_t bytes) noexcept;
// The headroom left for commits as of a fresh reading (limit - usage - margin), or
// kMemoryLimitOff if no limit applies.
std::size_t memory_limit_headroom() noexcept;

// Whether arenas with ArenaOptions::huge_pages use transparent huge pages (and the geometric
// commit steps that go with them). Process-wide; the default is automatic.
enum class HugePages {
  // Where they pay: Linux with THP in `always` or `madvise` mode
  // (pal::transparent_huge_pages()), except on a virtual machine whose host takes back free
  // memory in 2 MiB blocks (pal::host_reclaims_free_pages()). There each huge page is a block
  // the host faults in again, and filling 1e8 ints took 2.2x as long as with 4 KiB pages
  // (docs/big-arrays.md).
  automatic,
  // Wherever THP honours MADV_HUGEPAGE, on such virtual machines too.
  on,
  // Never: every arena uses 4 KiB pages and bounded, populated steps.
  off,
};
// Sets the mode for commit steps taken from now on (arenas already past the huge-page threshold
// keep their advice). Thread-safe.
void set_huge_pages(HugePages mode) noexcept;
HugePages huge_pages() noexcept;
// True if an arena with ArenaOptions::huge_pages gets huge pages here under the current mode.
bool huge_pages_in_effect() noexcept;

// The first commit step: one page (4 KiB, or the page size where pages are larger). A new array
// pays for its first step in page faults and RAM (with prefault, every page of it at once), so a
// program with thousands of small arrays pays one page for each, not 16; doubling steps
// (kDoublingStepLimit) still reach 64 KiB in five commit calls.
inline constexpr std::size_t kDefaultCommitGranule = 4096;

// Below this many committed bytes a commit step doubles the committed prefix under either policy;
// from here on a step is at least this large. It is also the smallest step worth a populate call
// (MADV_POPULATE_WRITE): smaller steps are backed by one store per page alone, a few page faults
// that cost less than the call.
inline constexpr std::size_t kDoublingStepLimit = std::size_t{64} * 1024;

// The largest commit step: 128 MiB (32768 granules of 4 KiB). With geometric steps a step
// commits as much as is already committed, so an array grows to 128 MiB in 16 commit calls and
// then in 128 MiB steps: 1e8 ints (381 MiB) in 18. Committing costs no RAM on Linux (pages are
// backed on first touch); on Windows it charges the commit limit, which this cap bounds.
inline constexpr std::size_t kDefaultMaxCommitStep = std::size_t{128} << 20;

// The most one commit step backs with RAM at once (the bounded policy's cap, and what
// Populate::first_step backs): 2 MiB, the x86-64 and arm64 huge-page size, so the append that
// pays for a step waits for at most 2 MiB of page population.
inline constexpr std::size_t kPopulatedStepLimit = std::size_t{2} << 20;

// With huge_pages, the offset from which the reservation is advised for transparent huge pages.
// Below it an array uses 4 KiB pages only, so one that holds less than 4 MiB has the RSS it had
// without huge pages; past it RSS is round_up(size, 2 MiB) at most: at most 2 MiB, under 1/2 of
// the data at 4 MiB and under 1/16 from 32 MiB up.
inline constexpr std::size_t kHugePageThreshold = std::size_t{4} << 20;

class Arena {
 public:
  // An empty arena: no reservation, reserved() == 0; every growth throws std::length_error.
  Arena() noexcept = default;

  // Reserves max_bytes (rounded up to the allocation granularity, plus guard pages) and commits
  // nothing. Throws std::invalid_argument for 0 or a commit_granule that overflows,
  // std::length_error when max_bytes exceeds what the address space can hold (checked before any
  // OS call), and OsAllocationError (a std::bad_alloc) when the OS refuses the reservation.
  explicit Arena(std::size_t max_bytes, ArenaOptions options = {});

  // The non-throwing form: the arena, or std::nullopt with the reason in *error.
  static std::optional<Arena> create(std::size_t max_bytes, ArenaOptions options,
                                     std::error_code* error) noexcept;

  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Releases the reservation; every pointer into the arena dangles afterwards.
  ~Arena();

  // ---- length ----

  // Extends the length by n bytes and returns the start of the new bytes (the old end). Commits
  // only the steps needed. Throws std::length_error past reserved(), OsAllocationError if the OS
  // refuses to commit; in both cases the arena is unchanged. grow(0) returns the current end.
  void* grow(std::size_t n);
  // As grow(), but returns nullptr instead of throwing; the arena is then unchanged.
  void* try_grow(std::size_t n) noexcept;

  // Bump allocation: pads the length to `alignment` (a power of two, at most the page size), then
  // grows by n. Same errors and guarantees as grow(); an invalid alignment is
  // std::invalid_argument.
  void* allocate(std::size_t n, std::size_t alignment = alignof(std::max_align_t));
  void* try_allocate(std::size_t n, std::size_t alignment = alignof(std::max_align_t)) noexcept;

  // Sets the length to new_size (<= size(), else std::invalid_argument) and decommits the steps
  // no longer needed. Policy: no slack is kept; committed() becomes round_up(new_size, granule)
  // (or stays larger if the OS refuses to decommit: that error is returned, nothing is lost, and
  // committed() still tells the truth). Pointers at or past new_size are invalidated.
  std::error_code shrink(std::size_t new_size);

  // shrink(0): everything is decommitted; the reservation stays.
  std::error_code reset() noexcept;

  // The scratch-arena pattern: mark() is the current length; rewind(mark) sets the length back to
  // it and keeps the memory committed, so the next frame or request reuses it with no system
  // call. mark > size() is std::invalid_argument. Invalidates pointers at or past mark.
  std::size_t mark() const noexcept { return size_; }
  void rewind(std::size_t mark);

  // ---- committed prefix (for containers that track their own length, like DynArray) ----

  // How much of a commit() to back with RAM at once when options().prefault is on.
  enum class Populate {
    // All of it: for bytes about to be written (an append of known length).
    all,
    // Only the next kPopulatedStepLimit (2 MiB) past the committed prefix; the rest is
    // committed but backed on first touch, as std::vector::reserve is under overcommit. For an
    // upper bound that may never be reached: DynArray::reserve(1e9 ints) costs 2 MiB of RSS, not
    // 4 GB.
    first_step,
    // None of it: committed, backed on first touch, as if prefault were off for this call. For
    // memory that may never be written.
    none,
  };

  // Commits ahead so that committed() >= bytes (rounded up to the granule). Never moves anything.
  // Throws std::length_error past reserved(), OsAllocationError on refusal; arena unchanged then.
  // The memory-limit check counts only what is populated (all, the first step, or nothing):
  // committed pages that are not backed cost nothing until touched, and those later touches are
  // not checked (a first touch past a cgroup limit meets the OOM killer, as with std::vector).
  void commit(std::size_t bytes, Populate populate = Populate::all);
  bool try_commit(std::size_t bytes, Populate populate = Populate::all) noexcept;

  // Deprecated names of commit() and try_commit(), kept for one release: reserve means address
  // space everywhere else.
  [[deprecated("use commit(): Arena::reserve commits pages")]] void reserve(
      std::size_t bytes, Populate populate = Populate::all) {
    commit(bytes, populate);
  }
  [[deprecated("use try_commit(): Arena::try_reserve commits pages")]] bool try_reserve(
      std::size_t bytes, Populate populate = Populate::all) noexcept {
    return try_commit(bytes, populate);
  }

  // Decommits every step beyond round_up(max(size(), keep_bytes), granule).
  std::error_code trim(std::size_t keep_bytes = 0) noexcept;

  // ---- observers ----
  std::byte* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }            // the length in bytes
  std::size_t committed() const noexcept { return committed_; }  // readable/writable prefix
  std::size_t reserved() const noexcept { return reserved_; }    // the most size() can reach
  std::size_t commit_granule() const noexcept { return granule(); }
  // The step the next commit will use (grows from commit_granule() to the max_commit_step).
  std::size_t commit_step() const noexcept;
  // The options in force: commit_granule and max_commit_step as rounded (see ArenaOptions).
  ArenaOptions options() const noexcept;
  // True if [p, p+n) lies inside the arena's current length.
  bool contains(const void* p, std::size_t n = 1) const noexcept;

  friend void swap(Arena& a, Arena& b) noexcept;

 private:
  // True while steps may double (see ArenaOptions::max_commit_step).
  bool geometric_steps() const noexcept;
  // The step under the bounded policy: at most kPopulatedStepLimit.
  std::size_t bounded_step() const noexcept;
  // The committed length that covers `bytes` in whole `step`s, capped at reserved_.
  std::size_t commit_target(std::size_t bytes, std::size_t step) const noexcept;
  std::size_t commit_target(std::size_t bytes) const noexcept {
    return commit_target(bytes, commit_step());
  }
  // Commits [committed_, target) and backs what `populate` asks for; committed_ = target.
  std::error_code commit_range(std::size_t bytes, std::size_t target, Populate populate,
                               bool geometric) noexcept;
  // Commits so that committed_ >= bytes. bytes <= reserved_ is the caller's check.
  std::error_code commit_to(std::size_t bytes, Populate populate = Populate::all) noexcept;
  // The paths of grow()/try_grow() that must commit or fail; kept out of line and cold.
  void* grow_slow(std::size_t n);
  void* try_grow_slow(std::size_t n) noexcept;
  // Throws the exception for a failed growth to `bytes` with error `ec`.
  [[noreturn]] void throw_growth_error(std::size_t bytes, std::error_code ec) const;
  void release_all() noexcept;
  // Gives the reservation to the cache (true) or leaves it to the caller to release (false).
  bool park_in_cache() noexcept;

  // The packed fields count in units of 4 KiB, which divides every supported page size.
  static constexpr std::size_t kUnit = 4096;
  enum Flag : std::uint16_t {
    kGuardPages = 1,
    kPrefault = 2,
    kReuseReservation = 4,
    kHugePages = 8,
    kRespectMemoryLimit = 16,
    kPooled = 32,  // the reservation is a pool slot (slot_pool.cpp), not a mapping of its own
  };
  static constexpr unsigned kFlagBits = 6;
  static constexpr std::uint16_t kDefaultFlags =
      kGuardPages | kPrefault | kReuseReservation | kHugePages | kRespectMemoryLimit;
  static std::uint16_t flags_of(const ArenaOptions& o) noexcept;

  // A pool slot's mapping is its pool's chunk, so it has no offset of its own: the offset field
  // says instead whether the chunk is an open reservation (read-write from the start: commits
  // call no OS function, decommits give pages back with pal::discard), and whether this arena
  // advised huge pages past kHugePageThreshold (undone when the slot goes back, so that its next
  // arena starts as in a fresh slot).
  static constexpr std::uint16_t kOpenSlot = std::uint16_t{1} << kFlagBits;
  static constexpr std::uint16_t kHugeAdvisedSlot = std::uint16_t{1} << (kFlagBits + 1);

  bool has(Flag f) const noexcept { return (offset_flags_ & f) != 0; }
  // A sub-page slot: pooled, and smaller than any page (page slots are whole pages).
  bool sub_page() const noexcept { return has(kPooled) && reserved_ < kUnit; }
  bool open_slot() const noexcept { return has(kPooled) && (offset_flags_ & kOpenSlot) != 0; }
  std::size_t granule() const noexcept { return std::size_t{granule_units_} * kUnit; }
  std::size_t max_step() const noexcept { return granule() * max_step_granules_; }
  // The reservation as pal::reserve made it: [guard][alignment padding][usable...][guard].
  std::size_t offset() const noexcept {
    return has(kPooled) ? 0 : static_cast<std::size_t>(offset_flags_ >> kFlagBits) * kUnit;
  }
  std::byte* mapping() const noexcept { return base_ - offset(); }
  std::size_t mapping_size() const noexcept;

  // Five words: a DynArray is this plus three more. Granule, step, the base's offset in its
  // mapping and the options are packed into the last one; plan() rejects what does not fit.
  std::byte* base_ = nullptr;                   // first usable byte (after the lower guard page)
  std::size_t size_ = 0;                        // length
  std::size_t committed_ = 0;                   // bytes from base_ that are committed
  std::size_t reserved_ = 0;                    // usable bytes from base_
  std::uint32_t granule_units_ = 0;             // first commit step, in kUnit
  std::uint16_t max_step_granules_ = 0;         // largest commit step, in granules
  std::uint16_t offset_flags_ = kDefaultFlags;  // offset() in kUnit above kFlagBits of Flag
};

static_assert(sizeof(void*) != 8 || sizeof(Arena) == 40, "an Arena is five words");

// ---- inline fast paths: a compare and an add while the committed prefix has room ----------------

inline void* Arena::grow(std::size_t n) {
  if (n <= committed_ - size_) [[likely]] {
    std::byte* p = base_ + size_;
    size_ += n;
    return p;
  }
  return grow_slow(n);
}

inline void* Arena::try_grow(std::size_t n) noexcept {
  if (n <= committed_ - size_) [[likely]] {
    std::byte* p = base_ + size_;
    size_ += n;
    return p;
  }
  return try_grow_slow(n);
}

}  // namespace reservoir
