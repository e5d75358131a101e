// reservoir/detail/atomic_byte.hpp - atomic access to a plain byte, for ConcurrentDynArray's ready
// marks: loads acquire, stores release.
#pragma once

#include <atomic>

namespace reservoir::detail {

#if defined(__cpp_lib_atomic_ref)
inline constexpr bool kByteAtomicsLockFree =
    std::atomic_ref<unsigned char>::is_always_lock_free &&
    std::atomic_ref<unsigned char>::required_alignment == 1;
inline unsigned char load_byte_acquire(unsigned char* p) noexcept {
  return std::atomic_ref<unsigned char>(*p).load(std::memory_order_acquire);
}
inline void store_byte_release(unsigned char* p, unsigned char v) noexcept {
  std::atomic_ref<unsigned char>(*p).store(v, std::memory_order_release);
}
#else  // standard libraries without std::atomic_ref (libc++ before 19): the GCC/Clang builtins
inline constexpr bool kByteAtomicsLockFree = __atomic_always_lock_free(1, 0);
inline unsigned char load_byte_acquire(unsigned char* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline void store_byte_release(unsigned char* p, unsigned char v) noexcept {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
#endif

}  // namespace reservoir::detail
