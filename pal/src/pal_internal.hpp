// Internal to pal: the fault-injection check every OS wrapper makes before calling the OS.
#pragma once

#include <system_error>

#include <reservoir/pal.hpp>

#include "../testing/pal_testing.hpp"

namespace reservoir::pal::detail {

// Counts the call and, if a test armed `op`, stores the injected error in *ec and returns true.
bool injected_failure(Op op, std::error_code* ec) noexcept;

// The machine testing::set_machine_memory() describes: true and *out filled if one is set.
bool machine_memory_override(MachineMemory* out) noexcept;

// The page size set by testing::set_page_size(), or 0.
std::size_t page_size_override() noexcept;
// -1 when pal::transparent_huge_pages() asks the OS; 0 or 1 when a test decided the answer.
int transparent_huge_pages_override() noexcept;

inline std::error_code os_error(int value) noexcept {
  return {value, os_category()};
}

}  // namespace reservoir::pal::detail
