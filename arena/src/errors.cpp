// Error reporting shared by every arena file: OsAllocationError's message and the byte and address
// formats used in messages. It knows no OS call and no arena state.
#include <cstdint>
#include <cstdio>
#include <iterator>

#include "errors.hpp"

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

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

namespace {
class RefusalCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "reservoir"; }
  std::string message(int value) const override {
    switch (static_cast<Refusal>(value)) {
      case Refusal::address_space_budget:
        return "no address space left for a default reservation";
      case Refusal::memory_limit:
        return "the step would cross the process's memory limit";
      case Refusal::machine_memory:
        return "the step is more than the machine can back";
      case Refusal::default_reservation_full:
        return "the default reservation, made small for lack of address space, is full";
      case Refusal::mapping_budget:
        return "reservoir's kernel mappings would pass half of the process's vm.max_map_count";
    }
    return "reservoir refusal " + std::to_string(value);
  }
};
// Constant-initialized, not a function-local static, whose initialization guard could be
// left "in progress" in a child forked while another thread was making it.
constinit const RefusalCategory g_refusal_category;
}  // namespace

const std::error_category& refusal_category() noexcept {
  return g_refusal_category;
}

std::error_code make_error_code(Refusal r) noexcept {
  return {static_cast<int>(r), refusal_category()};
}

OsAllocationError::OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                                     std::error_code error)
    : error_(error) {
  message_ = std::string("cannot ") + operation + " " + format_bytes(bytes);
  message_ += address ? " at " + detail::hex_address(address) : std::string(" of address space");
  // reservoir's own refusals have no OS error to describe: their message is the cause.
  message_ +=
      ": " + (error.category() == refusal_category() ? error.message() : pal::describe(error));
}

OsAllocationError::OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                                     std::error_code error, const std::string& advice)
    : OsAllocationError(operation, bytes, address, error) {
  message_ += ". " + advice;
}

}  // namespace reservoir
