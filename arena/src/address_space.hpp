// The address-space count (address_space.cpp): every mapping the arena files make or give back
// goes through here and is counted. It calls pal and nothing above it.
#pragma once

#include <cstddef>
#include <string>
#include <system_error>

namespace reservoir::detail {

// What a pool chunk is (pool_chunks.cpp): closed (pal::reserve: PROT_NONE, each committed prefix
// a mapping of its own), open (the set_open_pool_chunks opt-in, large classes only: read-write, a
// guard below each slot) or guarded (read-write, a guard marker below each slot and one at its
// committed end, moved as it commits: pal::guard_markers() kernels only).
enum class ChunkKind : unsigned char { closed, open, guarded };

// pal::reserve, counted in reserved_address_space() and as one kernel mapping; refused with
// Refusal::mapping_budget if that one does not fit in the mapping budget. With `kind` (the pools'
// chunks) an open reservation (pal::reserve_open) where the OS makes them and either
// set_open_pool_chunks asks for one or the chunk can be guarded (pal::guard_markers(), and the
// library already holds a quarter of its mapping budget: below that closed chunks cost nothing
// that counts, and keep the arrays in core dumps), a closed one elsewhere; *kind says which. A
// refusal is returned as it is: the provider decides whether to free parked reservations and try
// again.
// `may_open` false (the small classes' chunks): closed or guarded, never open.
std::error_code reserve_mapping(std::size_t size, void** out, ChunkKind* kind = nullptr,
                                bool may_open = true) noexcept;
// pal::release, and the mapping no longer counted, nor, with `split`, the two more a committed
// prefix amid its inaccessible range made. A refused release only leaks address space; nobody can
// be told (destructors), so the bytes are no longer counted either way.
void release_mapping(void* mapping, std::size_t size, bool split = false) noexcept;

// ---- the mapping budget ----
// The library counts the kernel mappings it holds, conservatively: one per reservation (a chunk,
// a sub-page run, an arena's own mapping) and kSplitMappings more for each committed prefix amid
// an inaccessible range (a closed reservation's, made by its first commit, gone when it is
// decommitted to nothing or released), and for each guard a kernel without guard markers makes by
// mprotect. It never holds more than half of pal::max_map_count(), so that the rest of the
// program (threads, dlopen, malloc, other libraries) keeps the other half. No budget where there
// is no such count (pal::max_map_count() 0). The count is read only once the library holds a few
// hundred mappings, so that a program with a few arrays reads no /proc file for them.
inline constexpr std::size_t kSplitMappings = 2;
// Adds (true) or removes (false) n mappings from the count.
void count_mappings(std::size_t n, bool add) noexcept;
// A live arena in a closed reservation with nothing committed enters (true) or leaves (false):
// its first commit will split a mapping. Such arenas count as kSplitMappings each when the
// chunks' kind is chosen (arrays made first and filled later would otherwise all take closed
// slots), not against the budget.
void count_pending_split(bool add) noexcept;
std::size_t mappings_held() noexcept;
// True if n more mappings stay within the budget (the limit is read again before saying no).
bool mappings_fit(std::size_t n) noexcept;
// True while the library holds more than 7/8 of its budget: a slot given back then gives its
// committed prefix back too, so that its mappings merge back and count no more.
bool mappings_short() noexcept;
// The words after a Refusal::mapping_budget: what the library holds, the limit, the remedies.
std::string mapping_budget_advice();
// A reservation of `size` bytes enters (true) or leaves (false) the parked list: parked
// reservations are counted apart, so they never shrink what a new default array is given.
void count_parked(std::size_t size, bool parked) noexcept;
// Address space in the pools' large chunks that no live arena holds (never-carved slots, and
// slots parked in the pools, not in a thread's cache) enters (true) or leaves (false): counted
// apart, as parked reservations are.
void count_pool_spare(std::size_t size, bool spare) noexcept;
// The bytes counted by count_parked and by count_pool_spare.
std::size_t parked_bytes() noexcept;
std::size_t pool_spare_bytes() noexcept;

// pal::address_space_size() if a reading of the address-space limit (RLIMIT_AS) taken at most
// 20 ms ago, by any thread, found none (budget.cpp keeps it), else 0: then the caller reads the
// limit itself. Spares the pools the system calls that the sizing of a default array has usually
// just made (default_reservation_size()); how stale it may be: budget.cpp.
std::size_t recent_unlimited_address_space() noexcept;

}  // namespace reservoir::detail
