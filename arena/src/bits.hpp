// The bottom layer of arena/src: arithmetic on sizes and addresses (with the huge-page size,
// detail::kHugePageSize of <reservoir/growth_policy.hpp>) and the AddressSanitizer hooks. It
// includes no other file of arena/src and calls no OS function.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <reservoir/growth_policy.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define RESERVOIR_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RESERVOIR_ARENA_ASAN 1
#endif
#endif
#if defined(RESERVOIR_ARENA_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace reservoir::detail {

inline constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// The largest reservation we ask for: the user half of a 48-bit address space (128 TiB) on 64-bit
// systems, 2 GiB on 32-bit ones. Anything larger cannot succeed, so it is a length_error up front.
inline constexpr std::size_t kMaxReservation =
    sizeof(void*) >= 8 ? (std::size_t{1} << 47) : (std::size_t{1} << 31);

// Every 4 KiB, the smallest page of any supported OS, whatever pal::page_size() says: the
// stride of the stores that populate pages, and the unit the Arena packs its sizes in.
inline constexpr std::size_t kSmallestPage = 4096;

// Clears AddressSanitizer's poison from [p, p+n): a container's annotations may leave some
// behind (the part of an 8-byte granule past a capacity that ended inside it), and the next
// owner of a parked or re-mapped range must start from clean memory. Nothing without ASan.
inline void unpoison([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t n) noexcept {
#if defined(RESERVOIR_ARENA_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
}

// Marks [p, p+n) as not to be touched (a parked slot, a red zone). Nothing without ASan.
inline void poison([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t n) noexcept {
#if defined(RESERVOIR_ARENA_ASAN)
  ASAN_POISON_MEMORY_REGION(p, n);
#endif
}

// value % unit and value / unit for a unit > 0: a mask and a shift where the unit is a power of
// two (page sizes, allocation granularities and nearly every commit granule are), a division
// otherwise: a 64-bit division is slow on paths that run at every array.
// (Not std::has_single_bit: without a popcount instruction in the baseline ISA it is a call.)
inline bool power_of_two(std::size_t unit) noexcept {
  return (unit & (unit - 1)) == 0;
}
inline std::size_t remainder_of(std::size_t value, std::size_t unit) noexcept {
  return power_of_two(unit) ? value & (unit - 1) : value % unit;
}
inline std::size_t quotient_of(std::size_t value, std::size_t unit) noexcept {
  return power_of_two(unit) ? value >> std::countr_zero(unit) : value / unit;
}
// value rounded down to a multiple of a unit > 0.
inline std::size_t round_down(std::size_t value, std::size_t unit) noexcept {
  return value - remainder_of(value, unit);
}

// value rounded up to a multiple of `unit`, which need not be a power of two; false on overflow.
// A unit of 0 (an empty arena's granule) leaves the value as it is.
inline bool round_up(std::size_t value, std::size_t unit, std::size_t* out) noexcept {
  if (unit == 0) {
    *out = value;
    return true;
  }
  const std::size_t rem = remainder_of(value, unit);
  if (rem == 0) {
    *out = value;
    return true;
  }
  if (value > kMax - (unit - rem)) return false;
  *out = value + (unit - rem);
  return true;
}

// The first multiple of `align` (a power of two) at or above p.
inline std::byte* align_up(std::byte* p, std::size_t align) noexcept {
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (start + align - 1) / align * align;
  return p + (aligned - start);
}

// In an open reservation a transparent huge page backs a whole aligned 2 MiB, which may run past
// an arena's committed prefix (no mapping boundary stops it there). What an arena at `base` with
// `committed` bytes committed may have backed ends at the end of the huge page that holds its
// last committed byte, within `limit` (its slot): the end of what a discard must cover.
inline std::size_t backed_end(const std::byte* base, std::size_t committed,
                              std::size_t limit) noexcept {
  const auto end = reinterpret_cast<std::uintptr_t>(base) + committed;
  const std::uintptr_t huge_end = (end + kHugePageSize - 1) & ~std::uintptr_t{kHugePageSize - 1};
  return std::min<std::size_t>(committed + (huge_end - end), std::max(limit, committed));
}

}  // namespace reservoir::detail
