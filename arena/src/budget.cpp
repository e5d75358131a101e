// The address-space budget: what a default-sized container reserves (default_reservation_size),
// planned from the address space counted in address_space.cpp. Parked reservations and the
// pools' spare chunks are counted apart there, so they never shrink what a new array is given.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "address_space.hpp"
#include "bits.hpp"
#include "thread_registry.hpp"

namespace reservoir {
namespace {

using detail::kMax;

std::atomic<std::size_t> g_budget{0};  // set by hand; 0: automatic

// The last reading that found no address-space limit (RLIMIT_AS): the address space's size then,
// and until when (steady_clock nanoseconds) it stands in for a new reading. Reading the limit is
// a system call (two: pal::address_space_limit and pal::address_space_size), more than a recycled
// default array costs otherwise; a limit set later is seen by default arrays made
// kNoLimitReadingAge after the last reading at most (until then a reservation the kernel refuses
// still falls back to a smaller one). The pools' large chunks take the same reading
// (detail::recent_unlimited_address_space), so a limit set within that time may also meet a new
// chunk reserved as if there were none: the kernel refuses it if it does not fit (the array then
// reserves a mapping of its own), and if it fits its spare slots count against the limit until
// trim_pools(). A limit in force is read every time: what it leaves changes with every mapping.
constexpr std::int64_t kNoLimitReadingAge = 20'000'000;  // 20 ms
std::atomic<std::int64_t> g_no_limit_until{0};
std::atomic<std::size_t> g_no_limit_size{0};

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::size_t detail::recent_unlimited_address_space() noexcept {
  return now_ns() < g_no_limit_until.load(std::memory_order_acquire)
             ? g_no_limit_size.load(std::memory_order_relaxed)
             : 0;
}

std::size_t address_space_budget() noexcept {
  const std::size_t set = g_budget.load(std::memory_order_relaxed);
  return set ? set : pal::address_space_size() / 2;
}

void set_address_space_budget(std::size_t bytes) noexcept {
  g_budget.store(bytes, std::memory_order_relaxed);
}

std::size_t default_reservation_size(std::size_t preferred) noexcept {
  // Under an address-space limit (RLIMIT_AS) every mapping counts, reserved or not, and the
  // budget (half the limit) is small: no array gets more than half of what the limit leaves (as
  // std::vector, which holds its old and new buffer at once, reaches about half), and while that
  // fits in the budget an array gets it even where the 1 GiB tier would not fit. When no more
  // than kDefaultTierLeast is left: 0, a refusal decided here rather than by a failing mmap.
  std::size_t cap = kMax;
  // pal::address_space_size(), when a recent reading found no limit
  std::size_t space = detail::recent_unlimited_address_space();
  if (space == 0) {
    if (pal::AddressSpaceLimit l; pal::address_space_limit(&l)) {
      const std::size_t in_use = l.in_use ? l.in_use : reserved_address_space();
      const std::size_t left = l.limit > in_use ? l.limit - in_use : 0;
      if (left <= kDefaultTierLeast) return 0;
      cap = std::max(left / 2 / 4096 * 4096, kDefaultTierLeast);
    } else {
      space = pal::address_space_size();
      g_no_limit_size.store(space, std::memory_order_relaxed);
      g_no_limit_until.store(now_ns() + kNoLimitReadingAge, std::memory_order_release);
    }
  }
  const std::size_t set = g_budget.load(std::memory_order_relaxed);
  const std::size_t budget = set ? set : space ? space / 2 : address_space_budget();
  // What live arrays hold: everything reserved but what is parked or spare in the pools, and the
  // slots in the calling thread's pool cache (its next default array takes one back). Slots in
  // other threads' caches hold no live array either: before a smaller tier is given, they go back
  // to the pools, where they count as spare and this array can take one.
  const auto held = [] {
    const std::size_t reserved = reserved_address_space();
    const std::size_t spare =
        detail::parked_bytes() + detail::pool_spare_bytes() + detail::own_cached_spare();
    return reserved - std::min(spare, reserved);
  };
  const auto full = [&](std::size_t used) {
    return used <= budget / 4 && preferred <= budget / 4 - used && preferred <= cap;
  };
  std::size_t used = held();
  if (full(used)) return preferred;
  // Other threads' cached slots, and those of threads that have ended (reaped on the way),
  // go back to the pools, where they count as spare: then count again.
  detail::reclaim_cached_spare();
  used = held();
  if (full(used)) return preferred;
  const std::size_t small = std::min({preferred, kDefaultTierReduced, cap});
  if (used <= budget && small <= budget - used) return small;
  return std::min({preferred, kDefaultTierLeast, cap});
}

std::string address_space_advice() {
  std::string s = format_bytes(reserved_address_space()) + " are reserved by reservoir (" +
                  format_bytes(detail::parked_bytes() + detail::pool_spare_bytes()) +
                  " of it parked for reuse), its budget is " +
                  format_bytes(address_space_budget()) + " (reservoir::set_address_space_budget)";
  if (pal::AddressSpaceLimit l; pal::address_space_limit(&l)) {
    s += "; the process's address-space limit (RLIMIT_AS) is " + format_bytes(l.limit);
    if (l.in_use) s += ", of which " + format_bytes(l.in_use) + " are mapped";
    s += " (raise it: ulimit -v)";
  }
  // At the mapping budget the mappings, not the address space, are what is short.
  if (!detail::mappings_fit(detail::kSplitMappings + 1))
    return s + "; " + detail::mapping_budget_advice();
  return s +
         "; on Linux each array is also one or two of the vm.max_map_count mappings. Give "
         "arrays an explicit reservoir::max_elements(n), or raise the limits (ulimit -v, "
         "sysctl vm.max_map_count)";
}

}  // namespace reservoir
