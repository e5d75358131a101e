// The pools' shared lock and resident count (see pool_state.hpp).
#include "pool_state.hpp"

namespace reservoir::detail {

PoolState& pool_state() noexcept {
  static PoolState* const p = new PoolState;
  return *p;
}

namespace {
// Made before main, while no other thread can be inside the initializer when one forks.
[[maybe_unused]] const bool g_made_before_main = (pool_state(), true);
}  // namespace

}  // namespace reservoir::detail
