// reservoir/arena_errors.hpp - the errors of reservoir: OsAllocationError, the Refusal codes,
// ArenaError (a refusal as a value) and the byte format their messages use. Included by
// <reservoir/arena.hpp>.
#pragma once

#include <cstddef>
#include <new>
#include <string>
#include <string_view>
#include <system_error>

namespace reservoir {
enum class Refusal : int;
}  // namespace reservoir
template <>
struct std::is_error_code_enum<reservoir::Refusal> : std::true_type {};

namespace reservoir {

// Thrown when the OS refuses to reserve or commit memory. It is a std::bad_alloc, so code that
// handles out-of-memory already handles it; what() names the operation, the size, the address and
// the OS's own words: "cannot commit 64 KiB at 0x7f12...: Cannot allocate memory (ENOMEM)".
class OsAllocationError : public std::bad_alloc {
 public:
  OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                    std::error_code error);
  // The same, with a sentence appended that names the limit met and the remedy.
  OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                    std::error_code error, const std::string& advice);
  const char* what() const noexcept override { return message_.c_str(); }
  const std::error_code& code() const noexcept { return error_; }

 private:
  std::string message_;
  std::error_code error_;
};

// Refusals reservoir decides itself, before or instead of an OS call: the error code of an
// OsAllocationError whose cause is one of its own limits rather than an OS error. The message
// names the limit, its figure and how to raise it.
enum class Refusal : int {
  // A default array cannot be given even the smallest default reservation: the address-space
  // budget or the process's address-space limit (RLIMIT_AS, `ulimit -v`) is spent.
  address_space_budget = 1,
  // The commit step would take the process past its memory limit (a cgroup's, or
  // set_memory_limit()) minus the margin.
  memory_limit,
  // The commit step asks for more than the machine can back (RAM and swap).
  machine_memory,
  // A default array reached the end of a reservation that was made smaller than the default
  // because address space was short: out of memory for it, as for std::vector.
  default_reservation_full,
  // The step would take the kernel mappings reservoir holds past half of the process's limit
  // (Linux vm.max_map_count): the rest is left to the program.
  mapping_budget,
};
// The category of Refusal codes ("reservoir").
const std::error_category& refusal_category() noexcept;
std::error_code make_error_code(Refusal r) noexcept;

// What an Arena refuses, as a value: the kind of refusal and its figures, filled in by the forms
// that report instead of throwing (Arena::create and Arena::try_commit with an ArenaError*). A
// container turns it into the exception with raise(), naming its own call: every message of an
// Arena refusal is composed there, once.
struct ArenaError {
  enum class Kind : unsigned char {
    none,              // nothing refused
    zero_size,         // max_bytes is 0 (std::invalid_argument)
    bad_options,       // commit_granule or max_commit_step cannot be rounded up
                       // (std::invalid_argument)
    too_large,         // max_bytes is more than the address space can hold (std::length_error)
    reservation_full,  // a length or a commit past the reservation (std::length_error)
    reserve_refused,   // the OS refused the reservation (OsAllocationError)
    commit_refused,    // the OS, or one of reservoir's limits, refused a commit step
                       // (OsAllocationError)
  };
  Kind kind = Kind::none;
  // The bytes asked for: max_bytes (zero_size, bad_options, too_large), the length or commit
  // target (reservation_full), the mapping (reserve_refused) or the step (commit_refused).
  std::size_t bytes = 0;
  // The bound that was met: the largest reservation (too_large), reserved() (reservation_full).
  std::size_t limit = 0;
  // The first byte of the refused step (commit_refused); nullptr otherwise.
  const void* address = nullptr;
  // The OS's error or a Refusal (reserve_refused, commit_refused); empty otherwise.
  std::error_code error;

  explicit operator bool() const noexcept { return kind != Kind::none; }

  // Throws what Arena's throwing forms throw for this refusal, naming `call`, the user's call
  // ("Arena::commit", "DynArray(max_elements)", "DynArray::resize"). std::invalid_argument and
  // std::length_error say "reservoir::<call>: ..."; OsAllocationError names the operation and its
  // cause, then "reservoir::<call> needed it", and for one of reservoir's own limits
  // (Refusal::mapping_budget, memory_limit, machine_memory) the limit met and its remedies.
  // Kind::none is std::logic_error.
  [[noreturn]] void raise(std::string_view call) const;
};

// "64 KiB", "1.5 GiB", "100 B": IEC units for messages.
std::string format_bytes(std::size_t bytes);

namespace detail {
// The sentence an OsAllocationError for `error` ends with when the error is one of reservoir's
// own limits (Refusal::mapping_budget, memory_limit, machine_memory): the limit's figures and
// its remedies, as ArenaError::raise appends them. Empty for any other error.
std::string refusal_advice(std::error_code error);
}  // namespace detail

}  // namespace reservoir
