// The address-space count (address_space.cpp): every mapping the arena files make or give back
// goes through here and is counted. It calls pal and nothing above it.
#pragma once

#include <cstddef>
#include <system_error>

namespace reservoir::detail {

// pal::reserve, counted in reserved_address_space(). With `open` (the pools' large chunks), an
// open reservation (pal::reserve_open) where the OS makes them and set_open_pool_chunks allows,
// a closed one (pal::reserve) elsewhere; *open says which. A refusal is returned as it is: the
// provider decides whether to free parked reservations and try again.
std::error_code reserve_mapping(std::size_t size, void** out, bool* open = nullptr) noexcept;
// pal::release. A refused release only leaks address space; nobody can be told (destructors), so
// the bytes are no longer counted either way.
void release_mapping(void* mapping, std::size_t size) noexcept;
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
