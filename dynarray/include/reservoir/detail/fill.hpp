// reservoir/detail/fill.hpp - filling uninitialised elements with copies of one value, at memset's
// speed where the value is one byte repeated.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

namespace reservoir {
namespace detail {

// Whether every byte of a T is part of its value (no padding), so that a T whose bytes are all
// equal is, byte for byte, what memset of that byte writes.
template <class T>
inline constexpr bool fillable_by_bytes =
    std::is_trivially_copyable_v<T> &&
    (std::has_unique_object_representations_v<T> || std::is_same_v<std::remove_cv_t<T>, float> ||
     std::is_same_v<std::remove_cv_t<T>, double>);

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define RESERVOIR_FILL_REP_STOS 1
// Fills with `rep stosq`: what glibc's memset does for byte values at these sizes, for a pattern
// of 2, 4 or 8 bytes. The element loop compilers emit (16-byte stores at the baseline ISA) is
// slower where the bytes fit in cache; past the last-level cache it is the loop that is faster,
// hence the window (figures: docs/design.md, "Figures behind the constants").
inline constexpr std::size_t kRepStosMinBytes = std::size_t{1} << 10;
inline constexpr std::size_t kRepStosMaxBytes = std::size_t{16} << 20;

template <class T>
void fill_by_rep_stos(T* first, std::size_t count, const T& value) noexcept {
  static_assert(8 % sizeof(T) == 0);
  std::uint64_t pattern;
  for (std::size_t i = 0; i < 8; i += sizeof(T))
    std::memcpy(reinterpret_cast<unsigned char*>(&pattern) + i, std::addressof(value), sizeof(T));
  const std::size_t words = count * sizeof(T) / 8;
  void* dst = first;
  std::size_t n = words;
  __asm__ __volatile__("rep stosq" : "+D"(dst), "+c"(n) : "a"(pattern) : "memory");
  std::uninitialized_fill(first + words * (8 / sizeof(T)), first + count, value);
}
#endif

// std::uninitialized_fill_n(first, count, value), the same result. For a trivially copyable T
// without padding: where its bytes are all equal (0, -1, any char, 0.0) one memset; otherwise,
// on x86-64, `rep stosq` for 1 KiB to 16 MiB of 2-, 4- or 8-byte elements. Both write the bytes
// of trivially copyable elements, which begins their lifetime (implicit-lifetime types,
// [intro.object]), as memcpy does.
template <class T>
T* uninitialized_fill_n(T* first, std::size_t count, const T& value) {
  if constexpr (fillable_by_bytes<T>) {
    if (count == 0) return first;  // first may be null: memset must not see it
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, std::addressof(value), sizeof(T));
    if (std::all_of(bytes + 1, bytes + sizeof(T),
                    [&bytes](unsigned char b) { return b == bytes[0]; })) {
      std::memset(static_cast<void*>(first), bytes[0], count * sizeof(T));
      return first + count;
    }
#ifdef RESERVOIR_FILL_REP_STOS
    if constexpr (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
      const std::size_t size = count * sizeof(T);
      if (size >= kRepStosMinBytes && size < kRepStosMaxBytes) {
        fill_by_rep_stos(first, count, value);
        return first + count;
      }
    }
#endif
  }
  return std::uninitialized_fill_n(first, count, value);
}

}  // namespace detail
}  // namespace reservoir

#undef RESERVOIR_FILL_REP_STOS
