// What the pool suites (slot_pool, sub_page) share: the library's kernel calls counted, and the
// pools emptied around each test case.
#pragma once

#include <cstdint>

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

}  // namespace test
