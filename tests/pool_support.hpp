// What the pool suites (slot_pool, sub_page) share: the library's kernel calls counted, the pools
// emptied around each test case, and whether default arrays get the full default reservation.
#pragma once

#include <cstdint>

#include <doctest/doctest.h>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

namespace test {

// Every pal operation that enters the kernel.
inline constexpr reservoir::pal::Op kOsOps[] = {
    reservoir::pal::Op::reserve, reservoir::pal::Op::commit,   reservoir::pal::Op::decommit,
    reservoir::pal::Op::release, reservoir::pal::Op::prefault, reservoir::pal::Op::guard};

inline std::uint64_t os_calls() {
  std::uint64_t n = 0;
  for (reservoir::pal::Op op : kOsOps)
    n += reservoir::pal::testing::calls(op);
  return n;
}

// Each test case starts and ends with empty pools, the default resident limit and no failure
// armed.
struct FreshPools {
  FreshPools() {
    reservoir::set_pool_resident_limit(reservoir::kDefaultPoolResidentLimit);
    reservoir::trim_pools();
  }
  ~FreshPools() {
    reservoir::pal::testing::clear();
    reservoir::set_pool_resident_limit(reservoir::kDefaultPoolResidentLimit);
    reservoir::trim_pools();
  }
  FreshPools(const FreshPools&) = delete;
  FreshPools& operator=(const FreshPools&) = delete;
};

// True if a default array gets its full default reservation here (not under valgrind, which
// refuses huge reservations, nor under a small RLIMIT_AS): the large classes' chunks are then
// reserved too. Otherwise it says so in the calling test case, which skips.
inline bool full_default_here() {
  // The tests hold up to eight default arrays at once, each of which gets the full default only
  // while live arrays use at most a quarter of the budget.
  if (reservoir::address_space_budget() / 4 < 8 * reservoir::kDefaultReserveBytes) {
    MESSAGE("the address-space budget (" << (reservoir::address_space_budget() >> 30)
                                         << " GiB; ThreadSanitizer builds count 1 TiB of address "
                                            "space) holds too few full default reservations");
    return false;
  }
  reservoir::DynArray<int> probe;
  probe.push_back(1);
  if (probe.max_size() == reservoir::DynArray<int>::default_max_size()) return true;
  MESSAGE("the default reservation is refused here (valgrind, RLIMIT_AS): nothing pooled");
  return false;
}

}  // namespace test
