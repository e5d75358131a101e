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
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <reservoir/arena_errors.hpp>
#include <reservoir/growth_policy.hpp>
#include <reservoir/memory_limit.hpp>
#include <reservoir/reservations.hpp>
#include <reservoir/settings.hpp>

namespace reservoir {

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
  //     Huge pages count from kDoublingStepLimit up (below it both policies take the same
  //     steps). The machine's huge-page setting is read only where it can change a step: with
  //     prefault, once an arena reaches kDoublingStepLimit; without it, once a step would reach
  //     past kHugePageThreshold.
  //   - bounded (prefault on and no huge pages, or a memory limit in force with
  //     respect_memory_limit): doubling up to kDoublingStepLimit, then at least that and at least
  //     committed()/8, never more than kBoundedStepLimit: every step is populated (and charged
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
  // per page; elsewhere the stores alone), so no append takes a page fault: a flat p99.99, paid
  // for with one append per step that waits for the step's population (bounded steps: at most
  // kBoundedStepLimit) and two system calls per step (one in an open pool chunk). On (the default
  // on Linux), where a page populated ahead costs less than a page fault, appends fill the array
  // faster than faults would (the figures that chose it: docs/big-arrays.md). Off (the default
  // elsewhere, where populating is the same first touches taken in the commit), committing is a
  // permission change in geometric steps (O(log n) calls) and each page is backed by the append
  // that first writes it, as std::vector's reserved buffer is. Under a memory limit steps are
  // bounded and populated either way, so that each is charged as it is backed. If the populate
  // call itself is refused (ENOMEM), the step is undone and reported as OsAllocationError; but
  // under a memory cgroup the populate meets the OOM killer exactly as a first touch would,
  // which is what respect_memory_limit prevents.
#if defined(__linux__)
  bool prefault = true;
#else
  bool prefault = false;
#endif

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

class Arena {
 public:
  // An empty arena: no reservation, reserved() == 0; every growth throws std::length_error.
  Arena() noexcept = default;

  // Reserves max_bytes (rounded up to the allocation granularity, plus guard pages) and commits
  // nothing. Throws std::invalid_argument for 0 or a commit_granule that overflows,
  // std::length_error when max_bytes exceeds what the address space can hold (checked before any
  // OS call), and OsAllocationError (a std::bad_alloc) when the OS refuses the reservation.
  explicit Arena(std::size_t max_bytes, ArenaOptions options = {});

  // The non-throwing forms: the arena, or std::nullopt with the reason in *error: an error code
  // (std::errc::invalid_argument, std::errc::value_too_large or the OS's error), or the refusal
  // with its figures (error->raise(call) throws what the constructor would, naming `call`).
  static std::optional<Arena> create(std::size_t max_bytes, ArenaOptions options,
                                     std::error_code* error) noexcept;
  static std::optional<Arena> create(std::size_t max_bytes, ArenaOptions options,
                                     ArenaError* error) noexcept;

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

  // How much of a commit() to back with RAM at once when options().prefault is on
  // (growth_policy.hpp).
  using Populate = reservoir::Populate;

  // Commits ahead so that committed() >= bytes (rounded up to the granule). Never moves anything.
  // Throws std::length_error past reserved(), OsAllocationError on refusal; arena unchanged then.
  // The memory-limit check counts only what is populated (all, the first step, or nothing):
  // committed pages that are not backed cost nothing until touched, and those later touches are
  // not checked (a first touch past a cgroup limit meets the OOM killer, as with std::vector).
  void commit(std::size_t bytes, Populate populate = Populate::all);
  bool try_commit(std::size_t bytes, Populate populate = Populate::all) noexcept;
  // As try_commit(), with the refusal in *error (Kind::none on success). It throws nothing, but
  // is not noexcept: the memory limit's reads of /proc and cgroup files are cancellation points,
  // and a thread cancelled there (pthread_cancel) unwinds through it to the caller's growth call.
  bool try_commit(std::size_t bytes, Populate populate, ArenaError* error);

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
  // The committed prefix's growth (arena_commit.cpp): asks the growth policy for each step, once
  // per growth, and takes it. Defined inside the library only.
  struct Growth;
  // Commits so that committed_ >= bytes (bytes <= reserved_ is the caller's check). On failure
  // *step_bytes is the length of the step that was refused first.
  std::error_code commit_to(std::size_t bytes, Populate populate, std::size_t* step_bytes) noexcept;
  // The paths of grow()/try_grow() that must commit or fail; kept out of line and cold. `call`
  // is the user's call that grew (grow_slow(n): "Arena::grow"), named by its exceptions.
  void* grow_slow(std::size_t n);
  void* grow_slow(std::size_t n, std::string_view call);
  // allocate(), its errors naming `call`, the user's call: ArenaResource's allocations name
  // ArenaResource::allocate, the call its users make.
  void* allocate_for(std::string_view call, std::size_t n, std::size_t alignment);
  friend class ArenaResource;
  void* try_grow_slow(std::size_t n) noexcept;
  // The refusal of a growth or commit to `bytes`: past the reservation if `ec` is empty, else
  // the commit step of `step_bytes` refused with `ec`.
  ArenaError growth_error(std::size_t bytes, std::error_code ec,
                          std::size_t step_bytes = 0) const noexcept;
  // Throws the exception for a failed growth to `bytes` with error `ec` (see growth_error),
  // naming `call`, the user's call ("Arena::commit").
  [[noreturn]] void throw_growth_error(std::string_view call, std::size_t bytes, std::error_code ec,
                                       std::size_t step_bytes = 0) const;
  // Gives the reservation back to the provider; the arena is empty afterwards.
  void release_all() noexcept;
  // Undoes this arena's huge-page advice, if it gave one (arena_commit.cpp), and stops counting
  // the mappings it split.
  void undo_huge_advice() noexcept;
  // A guarded slot's size: its class's, which may be more than reserved_.
  std::size_t guarded_slot_bytes() const noexcept;

  // The packed fields count in units of 4 KiB, which divides every supported page size.
  static constexpr std::size_t kUnit = 4096;
  enum Flag : std::uint16_t {
    kGuardPages = 1,
    kPrefault = 2,
    kReuseReservation = 4,
    kHugePages = 8,
    kRespectMemoryLimit = 16,
    kPooled = 32,  // the reservation is a pool slot (page_pools.cpp, sub_page_runs.cpp), not a
                   // mapping of its own
  };
  static constexpr unsigned kFlagBits = 6;
  static constexpr std::uint16_t kDefaultFlags = kGuardPages | kReuseReservation | kHugePages |
                                                 kRespectMemoryLimit |
                                                 (ArenaOptions{}.prefault ? kPrefault : 0);
  static std::uint16_t flags_of(const ArenaOptions& o) noexcept;

  // A pool slot's mapping is its pool's chunk, so it has no offset of its own: the offset field
  // says instead whether the chunk is an open reservation (read-write from the start: commits
  // call no OS function, decommits give pages back with pal::discard), and whether the open chunk
  // is guarded (a guard marker at base_ + committed_, moved by each commit and decommit).
  static constexpr std::uint16_t kOpenSlot = std::uint16_t{1} << kFlagBits;
  static constexpr std::uint16_t kGuardedSlot = std::uint16_t{1} << (kFlagBits + 2);
  // The top bit of granule_units_ (plan() keeps granules below it): this arena advised huge
  // pages past kHugePageThreshold, and counts the mappings the advice split, until it undoes it
  // (shrinking to the threshold, or released).
  static constexpr std::uint32_t kHugeAdvised = std::uint32_t{1} << 31;
  bool huge_advised() const noexcept { return (granule_units_ & kHugeAdvised) != 0; }

  bool has(Flag f) const noexcept { return (offset_flags_ & f) != 0; }
  // A sub-page slot: pooled, and smaller than any page (page slots are whole pages).
  bool sub_page() const noexcept { return has(kPooled) && reserved_ < kUnit; }
  bool open_slot() const noexcept { return has(kPooled) && (offset_flags_ & kOpenSlot) != 0; }
  bool guarded_slot() const noexcept { return has(kPooled) && (offset_flags_ & kGuardedSlot) != 0; }
  std::size_t granule() const noexcept {
    return std::size_t{granule_units_ & ~kHugeAdvised} * kUnit;
  }
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
  std::uint32_t granule_units_ = 0;             // first commit step, in kUnit; kHugeAdvised
  std::uint16_t max_step_granules_ = 0;         // largest commit step, in granules
  std::uint16_t offset_flags_ = kDefaultFlags;  // offset() in kUnit above kFlagBits of Flag
};

static_assert(sizeof(void*) != 8 || sizeof(Arena) == 40, "an Arena is five words");

namespace detail {
// A container's arena: as Arena(max_bytes, options), but the exceptions name `call`, the
// container's constructor that the user called.
inline Arena make_arena(std::size_t max_bytes, const ArenaOptions& options, std::string_view call) {
  ArenaError error;
  std::optional<Arena> arena = Arena::create(max_bytes, options, &error);
  if (!arena) error.raise(call);
  return std::move(*arena);
}
}  // namespace detail

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
