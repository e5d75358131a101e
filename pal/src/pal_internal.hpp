// Internal to pal: the fault-injection check every OS wrapper makes before calling the OS.
#pragma once

#include <cstddef>
#include <string>
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

// A symbolic name for an OS error value: each OS file lists its own (RESERVOIR_ERROR_NAME).
struct ErrorName {
  int value;
  const char* name;
};
#define RESERVOIR_ERROR_NAME(e)         \
  ::reservoir::pal::detail::ErrorName { \
    e, #e                               \
  }
// The name of `value` in names[0, count), or "error <value>".
std::string error_name_in(int value, const ErrorName* names, std::size_t count);

inline std::error_code os_error(int value) noexcept {
  return {value, os_category()};
}

}  // namespace reservoir::pal::detail

namespace reservoir::pal {
using detail::injected_failure;
using detail::os_error;
}  // namespace reservoir::pal
