// Backing pages with RAM: charge, commit, populate (see populate.hpp).
#include "populate.hpp"

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "bits.hpp"
#include "growth.hpp"
#include "memory_limit.hpp"

namespace reservoir::detail {

std::error_code charge_and_commit(std::byte* start, std::size_t len, std::size_t charge,
                                  std::size_t must_back, bool check_limit, bool open,
                                  std::size_t* charged) noexcept {
  *charged = 0;
  std::error_code ec =
      check_limit ? charge_step(len, charge, must_back, charged) : std::error_code{};
  if (ec) return ec;
  if (!open && (ec = pal::commit(start, len))) {
    memory_limit_refund(*charged, check_limit ? must_back : 0);
    *charged = 0;
  }
  return ec;
}

std::error_code populate(std::byte* start, std::size_t bytes) noexcept {
  if (bytes == 0) return {};
  const std::error_code ec = populate_by_call(bytes)
                                 ? pal::prefault(start, bytes)
                                 : std::make_error_code(std::errc::not_supported);
  if (ec && ec != std::errc::not_supported) return ec;
  auto* first = static_cast<volatile unsigned char*>(static_cast<void*>(start));
  for (std::size_t off = 0; off < bytes; off += kSmallestPage)
    first[off] = 0;
  return {};
}

std::error_code move_guard(std::byte* base, std::size_t from, std::size_t to,
                           std::size_t slot_bytes) noexcept {
  if (from == to) return {};
  const std::size_t page = pal::page_size();
  std::byte* const old_guard = base + from;
  std::byte* const new_guard = base + to;
  // A full slot's end page is not its own: it is the page below the next slot (or past the
  // chunk's last one), a guard for good once installed, and never lifted here. Installing it
  // again changes nothing.
  const bool lift_old = from < slot_bytes;
  // A guard put back where it was before: the state the caller keeps counting. If even that is
  // refused, the range is read-write without it, which loses no data.
  if (to > from) {
    if (lift_old) {
      if (std::error_code ec = pal::unguard(old_guard, page)) return ec;
    }
    if (std::error_code ec = pal::guard(new_guard, page)) {
      if (lift_old) (void)pal::guard(old_guard, page);
      return ec;
    }
    return {};
  }
  if (std::error_code ec = pal::guard(new_guard, page)) return ec;
  if (!lift_old) return {};
  if (std::error_code ec = pal::unguard(old_guard, page)) {
    (void)pal::unguard(new_guard, page);
    return ec;
  }
  return {};
}

}  // namespace reservoir::detail
