// reservoir/detail/alignment.hpp - where a container's elements start inside its reservation.
//
// A reservation starts on a page boundary (4096 bytes at least on every supported OS). Elements
// aligned to at most that start at the base. A more strictly aligned element type (alignas(8192)
// and up) starts at the first suitably aligned address inside the reservation, which is reserved
// kAlignmentSlack<T> bytes larger for it; the pages before that start are committed with the
// first elements (less than alignof(T) bytes, once per array).
#pragma once

#include <cstddef>
#include <cstdint>

#include <reservoir/growth_policy.hpp>

namespace reservoir::detail {

// The least alignment of a reservation's base.
inline constexpr std::size_t kMinBaseAlignment = 4096;

// The strictest element alignment the containers accept: 2 MiB, the huge-page size. Beyond it
// the slack (address space, and committed memory ahead of the first element) stops being small
// next to an element.
inline constexpr std::size_t kMaxElementAlignment = kHugePageSize;

// Bytes reserved beyond the elements so that an aligned start always fits.
template <class T>
inline constexpr std::size_t kAlignmentSlack = alignof(T) > kMinBaseAlignment
                                                   ? alignof(T) - kMinBaseAlignment
                                                   : 0;

// Bytes from a reservation's base to its first element.
template <class T>
std::size_t element_offset([[maybe_unused]] const std::byte* base) noexcept {
  if constexpr (alignof(T) <= kMinBaseAlignment) {
    return 0;
  } else {
    return static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(base)) & (alignof(T) - 1);
  }
}

}  // namespace reservoir::detail
