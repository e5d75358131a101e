// reservoir/max_size.hpp - strong types for the size of a reservation.
//
// A container's reservation is fixed at construction and is not an element count, so it has its
// own types: `DynArray<T> a(reservoir::max_elements(n))` reserves room for n elements and
// `DynArray<T> a(reservoir::max_bytes(b))` for b / sizeof(T) of them, while `DynArray<T> a(n)`
// creates n elements, as std::vector does. Both may be followed by ArenaOptions.
#pragma once

#include <cstddef>

namespace reservoir {

// The most elements a container may ever hold.
struct max_elements {
  constexpr explicit max_elements(std::size_t n) noexcept : count(n) {}
  std::size_t count;
};

// The most bytes a container's elements may ever occupy (rounded down to whole elements).
struct max_bytes {
  constexpr explicit max_bytes(std::size_t n) noexcept : bytes(n) {}
  std::size_t bytes;
};

}  // namespace reservoir
