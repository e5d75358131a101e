// What the Arena's source files share and nothing outside arena/src may use: the address-space
// accounting, the memory-limit check and the reservation cache, each owned by its own file.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <reservoir/arena.hpp>

namespace reservoir::detail {

inline constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// The largest reservation we ask for: the user half of a 48-bit address space (128 TiB) on 64-bit
// systems, 2 GiB on 32-bit ones. Anything larger cannot succeed, so it is a length_error up front.
inline constexpr std::size_t kMaxReservation =
    sizeof(void*) >= 8 ? (std::size_t{1} << 47) : (std::size_t{1} << 31);

// "0x7f12..." for messages ("%p" prints no 0x on Windows).
std::string hex_address(const void* p);

// ---- address_space.cpp: every reservation is made and released here, and counted ------------

// pal::reserve / pal::release, counted in reserved_address_space().
std::error_code reserve_mapping(std::size_t size, void** out) noexcept;
// A refused release only leaks address space; nobody can be told (destructors), so the bytes are
// no longer counted either way.
void release_mapping(void* mapping, std::size_t size) noexcept;

// ---- memory_limit.cpp: the headroom under the process's memory limit ------------------------

// True if committing `len` more bytes keeps the process within its memory limit (minus the
// margin); counts the bytes against the current reading.
bool memory_limit_allows(std::size_t len) noexcept;
// The category of the error a refused step reports, so the message can name the limit.
const std::error_category& memory_limit_category() noexcept;
// The sentence appended to a refused step's message: the limit, its source, the usage, the
// margin, and how to raise or turn off the check.
std::string memory_limit_advice();

// ---- reservation_cache.cpp: destroyed arenas' reservations, parked for the next arena ---------

struct Parked {
  void* mapping;
  std::size_t mapping_size;
  std::byte* base;
  std::size_t reserved;
  std::size_t committed;  // kept committed: whole granules (see Arena::park_in_cache)
  ArenaOptions options;
};

// The most committed memory all parked reservations may hold together.
inline constexpr std::size_t kCacheMaxCommitted = std::size_t{1} << 20;

// A parked reservation of exactly this mapping size and options, taken out of the cache.
std::optional<Parked> take_parked(std::size_t mapping_size, const ArenaOptions& options) noexcept;
// Parks p; false if the cache's limits are reached (or it is off), and then the caller releases.
bool park(const Parked& p) noexcept;

}  // namespace reservoir::detail
