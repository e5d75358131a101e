// Error reporting shared by every arena file: OsAllocationError's message and the byte and address
// formats used in messages. It knows no OS call and no arena state.
#include <cstdint>
#include <cstdio>
#include <iterator>

#include "arena_internal.hpp"

namespace reservoir {

namespace detail {

std::string hex_address(const void* p) {
  char buf[32];  // "%p" prints no 0x on Windows
  std::snprintf(buf, sizeof(buf), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return buf;
}

}  // namespace detail

std::string format_bytes(std::size_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char buf[48];
  if (unit == 0 || value == static_cast<double>(static_cast<std::uint64_t>(value))) {
    std::snprintf(buf, sizeof(buf), "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

OsAllocationError::OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                                     std::error_code error)
    : error_(error) {
  message_ = std::string("cannot ") + operation + " " + format_bytes(bytes);
  message_ += address ? " at " + detail::hex_address(address) : std::string(" of address space");
  message_ += ": " + pal::describe(error);
}

OsAllocationError::OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                                     std::error_code error, const std::string& advice)
    : OsAllocationError(operation, bytes, address, error) {
  message_ += ". " + advice;
}

}  // namespace reservoir
