// Arena: one reservation, a length, and a committed prefix grown in granule-sized steps.
#include <reservoir/arena.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

namespace reservoir {
namespace {

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// The largest reservation we ask for: the user half of a 48-bit address space (128 TiB) on 64-bit
// systems, 2 GiB on 32-bit ones. Anything larger cannot succeed, so it is a length_error up front.
constexpr std::size_t kMaxReservation =
    sizeof(void*) >= 8 ? (std::size_t{1} << 47) : (std::size_t{1} << 31);

// round_up for a power-of-two-free `unit`; false on overflow.
bool round_up(std::size_t value, std::size_t unit, std::size_t* out) noexcept {
  const std::size_t rem = value % unit;
  if (rem == 0) {
    *out = value;
    return true;
  }
  if (value > kMax - (unit - rem)) return false;
  *out = value + (unit - rem);
  return true;
}

std::string hex_address(const void* p) {
  char buf[32];  // "%p" prints no 0x on Windows
  std::snprintf(buf, sizeof(buf), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return buf;
}

// Everything the constructor decides before it calls the OS.
struct Layout {
  std::size_t granule = 0;
  std::size_t guard = 0;
  std::size_t usable = 0;
  std::size_t mapping = 0;
};

// Validates the request; returns an errc describing a bad request, or {} with *out filled.
std::errc plan(std::size_t max_bytes, const ArenaOptions& options, Layout* out) noexcept {
  const std::size_t page = pal::page_size();
  const std::size_t granularity = pal::allocation_granularity();
  if (max_bytes == 0) return std::errc::invalid_argument;
  Layout l;
  if (!round_up(options.commit_granule == 0 ? std::max(kDefaultCommitGranule, page)
                                            : options.commit_granule,
                page, &l.granule)) {
    return std::errc::invalid_argument;
  }
  l.guard = options.guard_pages ? page : 0;
  if (max_bytes > kMaxReservation || !round_up(max_bytes, page, &l.usable) ||
      !round_up(l.usable + 2 * l.guard, granularity, &l.mapping) || l.mapping > kMaxReservation) {
    return std::errc::value_too_large;
  }
  *out = l;
  return {};
}

[[noreturn]] void throw_plan_error(std::errc e, std::size_t max_bytes) {
  if (e == std::errc::invalid_argument) {
    throw std::invalid_argument(
        max_bytes == 0 ? "reservoir::Arena: max_bytes must be greater than 0"
                       : "reservoir::Arena: commit_granule is too large to round to a page");
  }
  throw std::length_error("reservoir::Arena: cannot reserve " + format_bytes(max_bytes) +
                          ": more than the address space can hold (limit " +
                          format_bytes(kMaxReservation) + ")");
}

}  // namespace

// ---- errors
// --------------------------------------------------------------------------------------

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
  message_ += address ? " at " + hex_address(address) : std::string(" of address space");
  message_ += ": " + pal::describe(error);
}

// ---- lifetime
// ------------------------------------------------------------------------------------

Arena::Arena(std::size_t max_bytes, ArenaOptions options) : options_(options) {
  std::error_code ec;
  std::optional<Arena> made = create(max_bytes, options, &ec);
  if (!made) {
    Layout l;
    if (std::errc e = plan(max_bytes, options, &l); e != std::errc{})
      throw_plan_error(e, max_bytes);
    throw OsAllocationError("reserve", l.mapping, nullptr, ec);
  }
  swap(*this, *made);
}

std::optional<Arena> Arena::create(std::size_t max_bytes, ArenaOptions options,
                                   std::error_code* error) noexcept {
  // 1. Validate and lay out: [guard page][usable ... rounded to granularity][guard page].
  Layout l;
  if (std::errc e = plan(max_bytes, options, &l); e != std::errc{}) {
    *error = std::make_error_code(e);
    return std::nullopt;
  }
  // 2. Reserve address space only.
  void* mapping = nullptr;
  if (std::error_code ec = pal::reserve(l.mapping, &mapping)) {
    *error = ec;
    return std::nullopt;
  }
  // 3. Huge pages are a hint: a kernel without THP refuses it and the arena works the same.
  if (options.huge_pages) (void)pal::advise_huge_pages(mapping, l.mapping);
  Arena a;
  a.mapping_ = mapping;
  a.mapping_size_ = l.mapping;
  a.base_ = static_cast<std::byte*>(mapping) + l.guard;
  a.reserved_ = l.mapping - 2 * l.guard;
  a.granule_ = l.granule;
  a.options_ = options;
  *error = {};
  return a;
}

Arena::Arena(Arena&& other) noexcept {
  swap(*this, other);
}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    release_all();
    swap(*this, other);
  }
  return *this;
}

Arena::~Arena() {
  release_all();
}

void Arena::release_all() noexcept {
  if (mapping_ != nullptr) {
    // A refused release only leaks address space; a destructor has no one to tell, and the
    // object is gone either way. (Fault-injection tests count these calls.)
    (void)pal::release(mapping_, mapping_size_);
  }
  base_ = nullptr;
  mapping_ = nullptr;
  size_ = committed_ = reserved_ = granule_ = mapping_size_ = 0;
}

void swap(Arena& a, Arena& b) noexcept {
  using std::swap;
  swap(a.base_, b.base_);
  swap(a.size_, b.size_);
  swap(a.committed_, b.committed_);
  swap(a.reserved_, b.reserved_);
  swap(a.granule_, b.granule_);
  swap(a.mapping_, b.mapping_);
  swap(a.mapping_size_, b.mapping_size_);
  swap(a.options_, b.options_);
}

// ---- committing
// ----------------------------------------------------------------------------------

std::size_t Arena::commit_target(std::size_t bytes) const noexcept {
  // Commit outward: whole granules, capped at the reservation's end.
  std::size_t target = reserved_;
  if (std::size_t r; round_up(bytes, granule_, &r) && r < reserved_) target = r;
  return target;
}

std::error_code Arena::commit_to(std::size_t bytes) noexcept {
  const std::size_t target = commit_target(bytes);
  if (target <= committed_) return {};
  std::byte* start = base_ + committed_;
  const std::size_t len = target - committed_;
  if (std::error_code ec = pal::commit(start, len)) return ec;
  if (options_.prefault) {
    std::error_code ec = pal::prefault(start, len);
    if (ec == std::errc::not_supported) {
      const std::size_t page = pal::page_size();
      for (std::size_t off = 0; off < len; off += page) {
        static_cast<volatile unsigned char*>(static_cast<void*>(start))[off] = 0;
      }
    } else if (ec) {
      // The OS cannot back the step now (MADV_POPULATE_WRITE says ENOMEM): report it here as a
      // clean error rather than let the first touch meet the OOM killer. Undo the commit.
      (void)pal::decommit(start, len);
      return ec;
    }
  }
  committed_ = target;
  return {};
}

void Arena::throw_growth_error(std::size_t bytes, std::error_code ec) const {
  if (!ec) {
    throw std::length_error("reservoir::Arena: cannot grow to " + format_bytes(bytes) +
                            ": the reservation holds " + format_bytes(reserved_));
  }
  throw OsAllocationError("commit", commit_target(bytes) - committed_, base_ + committed_, ec);
}

void* Arena::grow_slow(std::size_t n) {
  if (n > reserved_ - size_) {
    throw_growth_error(n > kMax - size_ ? kMax : size_ + n, {});
  }
  if (std::error_code ec = commit_to(size_ + n)) throw_growth_error(size_ + n, ec);
  std::byte* p = base_ + size_;
  size_ += n;
  return p;
}

void* Arena::try_grow_slow(std::size_t n) noexcept {
  if (n > reserved_ - size_) return nullptr;
  if (commit_to(size_ + n)) return nullptr;
  std::byte* p = base_ + size_;
  size_ += n;
  return p;
}

namespace {
bool valid_alignment(std::size_t alignment) noexcept {
  return alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= pal::page_size();
}
std::size_t padding_for(const std::byte* end, std::size_t alignment) noexcept {
  return static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(end)) & (alignment - 1);
}
}  // namespace

void* Arena::allocate(std::size_t n, std::size_t alignment) {
  if (!valid_alignment(alignment)) {
    throw std::invalid_argument("reservoir::Arena::allocate: alignment " +
                                std::to_string(alignment) +
                                " is not a power of two no larger than the page size");
  }
  const std::size_t pad = padding_for(base_ + size_, alignment);
  if (n > kMax - pad) throw_growth_error(kMax, {});
  return static_cast<std::byte*>(grow(pad + n)) + pad;
}

void* Arena::try_allocate(std::size_t n, std::size_t alignment) noexcept {
  if (!valid_alignment(alignment)) return nullptr;
  const std::size_t pad = padding_for(base_ + size_, alignment);
  if (n > kMax - pad) return nullptr;
  void* p = try_grow(pad + n);
  return p ? static_cast<std::byte*>(p) + pad : nullptr;
}

void Arena::reserve(std::size_t bytes) {
  if (bytes > reserved_) throw_growth_error(bytes, {});
  if (std::error_code ec = commit_to(bytes)) throw_growth_error(bytes, ec);
}

bool Arena::try_reserve(std::size_t bytes) noexcept {
  return bytes <= reserved_ && !commit_to(bytes);
}

// ---- shrinking
// -----------------------------------------------------------------------------------

std::error_code Arena::shrink(std::size_t new_size) {
  if (new_size > size_) {
    throw std::invalid_argument("reservoir::Arena::shrink: new size " + std::to_string(new_size) +
                                " exceeds the current size " + std::to_string(size_));
  }
  size_ = new_size;
  return trim();
}

void Arena::rewind(std::size_t mark) {
  if (mark > size_) {
    throw std::invalid_argument("reservoir::Arena::rewind: mark " + std::to_string(mark) +
                                " is past the current size " + std::to_string(size_));
  }
  size_ = mark;
}

std::error_code Arena::reset() noexcept {
  size_ = 0;
  return trim();
}

std::error_code Arena::trim(std::size_t keep_bytes) noexcept {
  // Decommit inward: keep every granule that holds a live byte.
  std::size_t target = committed_;
  if (std::size_t r; round_up(std::max(size_, keep_bytes), granule_, &r) && r < committed_) {
    target = r;
  }
  if (target >= committed_) return {};
  if (std::error_code ec = pal::decommit(base_ + target, committed_ - target)) {
    return ec;  // the pages may still be accessible: keep counting them as committed
  }
  committed_ = target;
  return {};
}

bool Arena::contains(const void* p, std::size_t n) const noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const auto lo = reinterpret_cast<std::uintptr_t>(base_);
  return base_ != nullptr && addr >= lo && n <= size_ && addr - lo <= size_ - n;
}

}  // namespace reservoir
