// Arena: one reservation, a length, and a committed prefix grown in steps. This file owns the
// layout of a reservation, the commit-step policy, and growing and shrinking the committed prefix;
// where reservations come from and go (address_space.cpp, reservation_cache.cpp) and whether a
// step fits under the memory limit (memory_limit.cpp) are asked of the other files.
#include <reservoir/arena.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "arena_internal.hpp"

namespace reservoir {
namespace {

using detail::kMax;
using detail::kMaxReservation;

constexpr std::size_t kUnit = 4096;  // Arena::kUnit
constexpr std::size_t kMaxStepGranules = std::numeric_limits<std::uint16_t>::max();

// round_up for a power-of-two-free `unit`; false on overflow. A unit of 0 (an empty arena's
// granule) leaves the value as it is.
bool round_up(std::size_t value, std::size_t unit, std::size_t* out) noexcept {
  if (unit == 0) {
    *out = value;
    return true;
  }
  const std::size_t rem = value % unit;
  if (rem == 0) {
    *out = value;
    return true;
  }
  if (value > kMax - (unit - rem)) return false;
  *out = value + (unit - rem);
  return true;
}

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Everything the constructor decides before it calls the OS.
struct Layout {
  std::size_t granule = 0;
  std::size_t max_step = 0;
  std::size_t guard = 0;
  std::size_t usable = 0;
  std::size_t base_align = 0;  // base_ is a multiple of this
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
  if (!round_up(options.max_commit_step == 0 ? kDefaultMaxCommitStep : options.max_commit_step,
                page, &l.max_step)) {
    return std::errc::invalid_argument;
  }
  // Every step is a whole number of granules, so committed() always is one too (up to the
  // reservation's end) and trimming to a granule boundary can restore any earlier length exactly.
  if (!round_up(std::max(l.max_step, l.granule), l.granule, &l.max_step)) {
    return std::errc::invalid_argument;
  }
  // The Arena packs both into one word: a granule of at most 2^32 units, a step of at most
  // kMaxStepGranules granules (larger steps buy nothing: see kDefaultMaxCommitStep).
  if (l.granule / kUnit > std::numeric_limits<std::uint32_t>::max()) {
    return std::errc::invalid_argument;
  }
  l.max_step = std::min(l.max_step, l.granule * kMaxStepGranules);
  l.guard = options.guard_pages ? page : 0;
  if (max_bytes > kMaxReservation || !round_up(max_bytes, page, &l.usable)) {
    return std::errc::value_too_large;
  }
  // Large arenas whose steps reach 2 MiB start on a 2 MiB boundary, so every later step is a
  // whole aligned huge page. The alignment costs address space only (never committed).
  l.base_align = l.usable >= 2 * kHugePage && l.max_step >= kHugePage ? kHugePage : page;
  const std::size_t slack = l.base_align > granularity ? l.base_align : 0;
  if (!round_up(slack + l.usable + 2 * l.guard, granularity, &l.mapping) ||
      l.mapping > kMaxReservation) {
    return std::errc::value_too_large;
  }
  *out = l;
  return {};
}

}  // namespace

// ---- lifetime -----------------------------------------------------------------------------------

Arena::Arena(std::size_t max_bytes, ArenaOptions options) {
  std::error_code ec;
  std::optional<Arena> made = create(max_bytes, options, &ec);
  if (!made) {
    Layout l;
    if (std::errc e = plan(max_bytes, options, &l); e != std::errc{})
      detail::throw_plan_error(e, max_bytes);
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
  // The options as this layout rounds them: a parked reservation matches on these.
  options.commit_granule = l.granule;
  options.max_commit_step = l.max_step;
  auto made = [&](void* mapping, std::byte* base, std::size_t reserved, std::size_t committed) {
    Arena a;
    a.base_ = base;
    a.reserved_ = reserved;
    a.committed_ = committed;
    a.granule_units_ = static_cast<std::uint32_t>(l.granule / kUnit);
    a.max_step_granules_ = static_cast<std::uint16_t>(l.max_step / l.granule);
    // At most a guard page (64 KiB) plus a huge page of alignment: 528 units, 10 bits.
    const auto offset = static_cast<std::size_t>(base - static_cast<std::byte*>(mapping));
    a.offset_flags_ = static_cast<std::uint16_t>((offset / kUnit) << kFlagBits | flags_of(options));
    *error = {};
    return std::optional<Arena>(std::move(a));
  };
  // 2. A parked reservation of the same layout and options costs no system call.
  if (options.reuse_reservation) {
    if (std::optional<detail::Parked> p = detail::take_parked(l.mapping, options)) {
      return made(p->mapping, p->base, p->reserved, p->committed);
    }
  }
  // 3. Reserve address space only.
  void* mapping = nullptr;
  if (std::error_code ec = detail::reserve_mapping(l.mapping, &mapping)) {
    *error = ec;
    return std::nullopt;
  }
  // 4. Huge pages are a hint: a kernel without THP refuses it and the arena works the same.
  if (options.huge_pages) (void)pal::advise_huge_pages(mapping, l.mapping);
  const auto start = reinterpret_cast<std::uintptr_t>(mapping) + l.guard;
  const std::uintptr_t aligned = (start + l.base_align - 1) / l.base_align * l.base_align;
  std::byte* const base =
      static_cast<std::byte*>(mapping) + (aligned - reinterpret_cast<std::uintptr_t>(mapping));
  const auto reserved =
      static_cast<std::size_t>(static_cast<std::byte*>(mapping) + l.mapping - l.guard - base);
  return made(mapping, base, reserved, 0);
}

std::uint16_t Arena::flags_of(const ArenaOptions& o) noexcept {
  return static_cast<std::uint16_t>((o.guard_pages ? kGuardPages : 0) | (o.prefault ? kPrefault : 0) |
                                    (o.reuse_reservation ? kReuseReservation : 0) |
                                    (o.huge_pages ? kHugePages : 0) |
                                    (o.respect_memory_limit ? kRespectMemoryLimit : 0));
}

ArenaOptions Arena::options() const noexcept {
  ArenaOptions o;
  o.commit_granule = granule();
  o.max_commit_step = max_step();
  o.guard_pages = has(kGuardPages);
  o.prefault = has(kPrefault);
  o.reuse_reservation = has(kReuseReservation);
  o.huge_pages = has(kHugePages);
  o.respect_memory_limit = has(kRespectMemoryLimit);
  return o;
}

std::size_t Arena::mapping_size() const noexcept {
  // create() made reserved_ = mapping + mapping size - upper guard - base_.
  return offset() + reserved_ + (has(kGuardPages) ? pal::page_size() : 0);
}

Arena::Arena(Arena&& other) noexcept {
  swap(*this, other);
}

Arena& Arena::operator=(Arena&& other) noexcept {
  // Take other's reservation before releasing ours: other may live inside our own memory (an
  // object stored in the arena it is assigned to), so releasing first would free it.
  Arena taken(std::move(other));
  swap(*this, taken);
  return *this;  // `taken` releases what *this held
}

Arena::~Arena() {
  release_all();
}

bool Arena::park_in_cache() noexcept {
  // Keep up to kDoublingStepLimit committed (whole granules, at least one; no more than one
  // max_commit_step, so fixed small steps stay small): the next arena then reaches that size with
  // no commit call and no page fault. A refused decommit means: do not park.
  const std::size_t granule = this->granule();
  const std::size_t keep_limit =
      std::max(granule, std::min(kDoublingStepLimit, max_step()) / granule * granule);
  if (!has(kReuseReservation) || keep_limit > detail::kCacheMaxCommitted) return false;
  const std::size_t keep = std::min(committed_, keep_limit);
  if (committed_ > keep && pal::decommit(base_ + keep, committed_ - keep)) return false;
  committed_ = keep;
  return detail::park(
      detail::Parked{mapping(), mapping_size(), base_, reserved_, keep, options()});
}

void Arena::release_all() noexcept {
  if (base_ != nullptr) {
    detail::unpoison(base_, committed_);  // the next owner of these pages starts clean
    // A refused release only leaks address space; a destructor has no one to tell, and the
    // object is gone either way. (Fault-injection tests count these calls.)
    if (!park_in_cache()) detail::release_mapping(mapping(), mapping_size());
  }
  base_ = nullptr;
  size_ = committed_ = reserved_ = 0;
  granule_units_ = 0;
  max_step_granules_ = 0;
  offset_flags_ = kDefaultFlags;
}

void swap(Arena& a, Arena& b) noexcept {
  using std::swap;
  swap(a.base_, b.base_);
  swap(a.size_, b.size_);
  swap(a.committed_, b.committed_);
  swap(a.reserved_, b.reserved_);
  swap(a.granule_units_, b.granule_units_);
  swap(a.max_step_granules_, b.max_step_granules_);
  swap(a.offset_flags_, b.offset_flags_);
}

// ---- committing ---------------------------------------------------------------------------------

std::size_t Arena::commit_step() const noexcept {
  // A power-of-two number of granules, capped (the cap is a whole number of granules):
  //   1. at least one granule;
  //   2. the committed prefix itself, up to kDoublingStepLimit: small arenas double;
  //   3. committed/8: large arenas commit in proportion to their size.
  // An empty (default-constructed or moved-from) arena has no granule and no step.
  const std::size_t granule = this->granule();
  if (granule == 0) return 0;
  std::size_t step = granule;
  if (const std::size_t held = committed_ / granule; held > 1) {
    const std::size_t doubling_cap = std::max<std::size_t>(kDoublingStepLimit / granule, 1);
    step = std::max(step, granule * std::bit_floor(std::min(held, doubling_cap)));
  }
  if (const std::size_t eighth = committed_ / 8 / granule; eighth > 1) {
    step = std::max(step, granule * std::bit_floor(eighth));
  }
  return std::min(step, max_step());
}

std::size_t Arena::commit_target(std::size_t bytes) const noexcept {
  // Commit outward: whole steps, capped at the reservation's end.
  std::size_t target = reserved_;
  if (std::size_t r; round_up(bytes, commit_step(), &r) && r < reserved_) target = r;
  return target;
}

std::error_code Arena::commit_to(std::size_t bytes, Populate populate) noexcept {
  const std::size_t target = commit_target(bytes);
  if (target <= committed_) return {};
  std::byte* start = base_ + committed_;
  const std::size_t len = target - committed_;
  // Charged: what is populated now or (all) written next; untouched pages cost nothing. Pages
  // given back (trim, release) are not credited: the next reading of the limit sees them, and
  // until then the headroom errs on the safe side.
  const std::size_t backed = populate == Populate::all    ? len
                             : populate == Populate::none ? 0
                                                          : std::min(len, max_step());
  std::size_t charged = 0;
  std::error_code ec = has(kRespectMemoryLimit) ? detail::charge_step(len, backed, &charged)
                                                : std::error_code{};
  if (ec) return ec;
  if ((ec = pal::commit(start, len))) {
    detail::memory_limit_refund(charged);
    return ec;
  }
  if (has(kPrefault) && backed != 0) {
    // 1. Ask the OS to back the step (Linux MADV_POPULATE_WRITE), then 2. write one byte per
    //    page anyway (the only way elsewhere). After a populate the write costs a store per page,
    //    but on a VM whose host takes back free guest pages (free page reporting) the populate
    //    maps pages without touching them, and the host's fault would otherwise land on the
    //    append that first writes each page (measurements: docs/design.md).
    //    Storing 0 is safe: the step holds no live data and reads as zero (a read-modify-write
    //    would fault twice where nothing was populated: a read maps the shared zero page first).
    ec = pal::prefault(start, backed);
    if (!ec || ec == std::errc::not_supported) {
      // Every 4 KiB, the smallest page of any supported OS, whatever page_size() says.
      constexpr std::size_t kTouchStride = 4096;
      auto* first = static_cast<volatile unsigned char*>(static_cast<void*>(start));
      for (std::size_t off = 0; off < backed; off += kTouchStride)
        first[off] = 0;
    } else {
      // The OS cannot back the step now (MADV_POPULATE_WRITE says ENOMEM): report it here as a
      // clean error rather than let the first touch meet the OOM killer. Undo the commit.
      (void)pal::decommit(start, len);
      detail::memory_limit_refund(charged);
      return ec;
    }
  }
  detail::memory_limit_settle(charged);
  committed_ = target;
  return {};
}

void Arena::throw_growth_error(std::size_t bytes, std::error_code ec) const {
  if (!ec) {
    throw std::length_error("reservoir::Arena: cannot grow to " + format_bytes(bytes) +
                            ": the reservation holds " + format_bytes(reserved_));
  }
  const std::size_t len = commit_target(bytes) - committed_;
  if (ec == Refusal::memory_limit || ec == Refusal::machine_memory) {
    throw OsAllocationError("commit", len, base_ + committed_, ec,
                            ec == Refusal::memory_limit ? detail::memory_limit_advice()
                                                        : detail::machine_memory_advice(len, len));
  }
  throw OsAllocationError("commit", len, base_ + committed_, ec);
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

void Arena::commit(std::size_t bytes, Populate populate) {
  if (bytes > reserved_) throw_growth_error(bytes, {});
  if (std::error_code ec = commit_to(bytes, populate)) throw_growth_error(bytes, ec);
}

bool Arena::try_commit(std::size_t bytes, Populate populate) noexcept {
  return bytes <= reserved_ && !commit_to(bytes, populate);
}

// ---- shrinking ----------------------------------------------------------------------------------

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
  // Decommit inward: keep every first-granule-sized step that holds a live byte. An empty arena
  // has nothing committed.
  if (committed_ == 0) return {};
  std::size_t target = committed_;
  if (std::size_t r; round_up(std::max(size_, keep_bytes), granule(), &r) && r < committed_) {
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
