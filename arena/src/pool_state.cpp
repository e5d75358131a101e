// The pools' shared lock and resident count (see pool_state.hpp).
#include "pool_state.hpp"

#include <cstddef>
#include <new>

namespace reservoir::detail {

// In static storage, as every never-destroyed state of the library: it goes with the library when
// a shared object that links it is unloaded, where a heap object would stay behind.
PoolState& pool_state() noexcept {
  alignas(PoolState) static std::byte storage[sizeof(PoolState)];
  static PoolState* const p = ::new (storage) PoolState;
  return *p;
}

namespace {
// Made before main, while no other thread can be inside the initializer when one forks.
[[maybe_unused]] const bool g_made_before_main = (pool_state(), true);
}  // namespace

}  // namespace reservoir::detail
