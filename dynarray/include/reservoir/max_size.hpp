// reservoir/max_size.hpp - strong types for the size of a reservation.
//
// A container's reservation is fixed at construction and is not an element count, so it has its
// own types: `DynArray<T> a(reservoir::max_elements(n))` reserves room for n elements and
// `DynArray<T> a(reservoir::max_bytes(b))` for b / sizeof(T) of them, while `DynArray<T> a(n)`
// creates n elements, as std::vector does. Both may be followed by ArenaOptions.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

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

namespace detail {
// A max_bytes constructor delegates to the max_elements one: a std::length_error that names the
// latter (`reservoir::<from>: ...`) is thrown again naming the constructor the user called.
[[noreturn]] inline void rename_constructor_error(const std::length_error& e, std::string_view from,
                                                  std::string_view to) {
  const std::string prefix = "reservoir::" + std::string(from) + ": ";
  const std::string_view what = e.what();
  if (!what.starts_with(prefix)) throw;
  throw std::length_error("reservoir::" + std::string(to) + ": " +
                          std::string(what.substr(prefix.size())));
}
}  // namespace detail

}  // namespace reservoir
