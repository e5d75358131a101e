// reservoir/detail/annotations.hpp - telling AddressSanitizer and valgrind which part of a
// container's committed memory holds live elements.
//
// A DynArray's committed memory is [data(), data() + capacity()); only [data(), data() + size())
// holds elements. Reads of the rest are bugs no page protection can see, so:
//   - under AddressSanitizer the array annotates it with __sanitizer_annotate_contiguous_container
//     (reported as container-overflow, as libc++ and MSVC STL do for std::vector). On by default
//     when ASan instruments the translation unit; RESERVOIR_SANITIZER_ANNOTATIONS=0 turns it off.
//     As with std::vector's annotations, every translation unit that modifies an array must be
//     instrumented, or an instrumented one may see the elements another one appended as overflow.
//   - under valgrind memcheck the same range is marked no-access with client requests, when
//     <valgrind/memcheck.h> is available and RESERVOIR_VALGRIND_ANNOTATIONS is 1. Off by default:
//     a client request costs a few instructions on every append even outside valgrind. The CMake
//     option RESERVOIR_VALGRIND_ANNOTATIONS sets it for the library's users.
#pragma once

#include <cstddef>

#if !defined(RESERVOIR_SANITIZER_ANNOTATIONS)
#if defined(__SANITIZE_ADDRESS__)
#define RESERVOIR_SANITIZER_ANNOTATIONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RESERVOIR_SANITIZER_ANNOTATIONS 1
#endif
#endif
#endif
#if !defined(RESERVOIR_SANITIZER_ANNOTATIONS)
#define RESERVOIR_SANITIZER_ANNOTATIONS 0
#endif

#if !defined(RESERVOIR_VALGRIND_ANNOTATIONS)
#define RESERVOIR_VALGRIND_ANNOTATIONS 0
#endif
#if RESERVOIR_VALGRIND_ANNOTATIONS && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define RESERVOIR_HAS_VALGRIND_ANNOTATIONS 1
#endif
#endif
#if !defined(RESERVOIR_HAS_VALGRIND_ANNOTATIONS)
#define RESERVOIR_HAS_VALGRIND_ANNOTATIONS 0
#endif

#if RESERVOIR_SANITIZER_ANNOTATIONS
extern "C" void __sanitizer_annotate_contiguous_container(const void* beg, const void* end,
                                                          const void* old_mid, const void* new_mid);
#endif

namespace reservoir::detail {

inline constexpr bool kAnnotateContainers =
    RESERVOIR_SANITIZER_ANNOTATIONS != 0 || RESERVOIR_HAS_VALGRIND_ANNOTATIONS != 0;

// The committed memory [begin, end) holds live data up to old_mid; make that new_mid. Bytes
// in [begin, mid) are accessible, [mid, end) reported when touched. begin is page-aligned.
inline void annotate_contiguous(const void* begin, const void* end, const void* old_mid,
                                const void* new_mid) noexcept {
  if (begin == nullptr || begin == end || old_mid == new_mid) return;
#if RESERVOIR_SANITIZER_ANNOTATIONS
  __sanitizer_annotate_contiguous_container(begin, end, old_mid, new_mid);
#endif
#if RESERVOIR_HAS_VALGRIND_ANNOTATIONS
  const auto* o = static_cast<const char*>(old_mid);
  const auto* n = static_cast<const char*>(new_mid);
  if (n < o) {
    (void)VALGRIND_MAKE_MEM_NOACCESS(n, static_cast<std::size_t>(o - n));
  } else {
    // Addressable, contents not yet written.
    (void)VALGRIND_MAKE_MEM_UNDEFINED(o, static_cast<std::size_t>(n - o));
  }
#endif
  (void)end;
}

}  // namespace reservoir::detail
