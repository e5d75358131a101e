// The address-space budget: every reservation an arena makes or gives back goes through here and
// is counted, so default-sized containers can plan within what the process may still reserve.
// It knows nothing of arenas, commits or the cache; parked reservations count as live ones.
#include <algorithm>
#include <atomic>

#include "arena_internal.hpp"

namespace reservoir {
namespace {

std::atomic<std::size_t> g_reserved{0};  // bytes reserved by live arenas and parked reservations
std::atomic<std::size_t> g_budget{0};    // set by hand; 0: automatic

}  // namespace

namespace detail {

std::error_code reserve_mapping(std::size_t size, void** out) noexcept {
  std::error_code ec = pal::reserve(size, out);
  if (!ec) g_reserved.fetch_add(size, std::memory_order_relaxed);
  return ec;
}

void release_mapping(void* mapping, std::size_t size) noexcept {
  (void)pal::release(mapping, size);
  g_reserved.fetch_sub(size, std::memory_order_relaxed);
}

}  // namespace detail

std::size_t reserved_address_space() noexcept {
  return g_reserved.load(std::memory_order_relaxed);
}

std::size_t address_space_budget() noexcept {
  const std::size_t set = g_budget.load(std::memory_order_relaxed);
  return set ? set : pal::address_space_size() / 2;
}

void set_address_space_budget(std::size_t bytes) noexcept {
  g_budget.store(bytes, std::memory_order_relaxed);
}

std::size_t default_reservation_size(std::size_t preferred) noexcept {
  constexpr std::size_t kSmall = std::size_t{1} << 30;
  constexpr std::size_t kTiny = std::size_t{64} << 20;
  const std::size_t budget = address_space_budget();
  const std::size_t used = reserved_address_space();
  if (used <= budget / 4 && preferred <= budget / 4 - used) return preferred;
  if (used <= budget && std::min(preferred, kSmall) <= budget - used) {
    return std::min(preferred, kSmall);
  }
  return std::min(preferred, kTiny);
}

}  // namespace reservoir
