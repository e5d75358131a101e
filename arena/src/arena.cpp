// Arena: one reservation, a length, and a committed prefix grown in steps. This file owns the
// layout of a reservation and the arena's lifetime (create, move, park or release); growing and
// shrinking the committed prefix is arena_commit.cpp's. Where reservations come from and go
// (address_space.cpp, reservation_cache.cpp) is asked of the other files.
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
using detail::round_up;

constexpr std::size_t kUnit = 4096;  // Arena::kUnit
constexpr std::size_t kMaxStepGranules = std::numeric_limits<std::uint16_t>::max();

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Everything the constructor decides before it calls the OS.
struct Layout {
  std::size_t granule = 0;
  std::size_t max_step = 0;
  std::size_t guard = 0;
  std::size_t usable = 0;
  std::size_t base_align = 0;  // base_ is a multiple of this (an open pool slot: plus a page)
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
    a.max_step_granules_ = static_cast<std::uint16_t>(detail::quotient_of(l.max_step, l.granule));
    // At most a guard page (64 KiB) plus a huge page of alignment: 528 units, 10 bits (a pool
    // slot's offset is 0: its mapping belongs to the pool).
    const auto offset = static_cast<std::size_t>(base - static_cast<std::byte*>(mapping));
    a.offset_flags_ = static_cast<std::uint16_t>((offset / kUnit) << kFlagBits | flags_of(options));
    *error = {};
    return std::optional<Arena>(std::move(a));
  };
  // 2. A tiny reservation takes a sub-page slot, all of it committed, with no guard pages
  //    (ArenaOptions::sub_page_slot). If no run can be made, it goes on as any small arena.
  if (options.reuse_reservation && options.sub_page_slot && max_bytes <= kLargestSubPageSlot) {
    std::byte* base = nullptr;
    std::size_t slot_bytes = 0;
    if (detail::take_sub_slot(max_bytes, options.respect_memory_limit, &base, &slot_bytes)) {
      ArenaOptions in_force = options;
      in_force.guard_pages = false;
      std::optional<Arena> a = made(base, base, slot_bytes, slot_bytes);
      a->offset_flags_ = static_cast<std::uint16_t>(flags_of(in_force) | kPooled);
      return a;
    }
  }
  // Every other arena reports sub_page_slot = false (options()); parked ones match on that.
  options.sub_page_slot = false;
  // 3. A small reservation, or one of a default array's tiers, takes a pool slot: its mapping is
  //    the pool's chunk. The slot has guard pages of its own (a large slot a 2 MiB gap), and its
  //    base honours l.base_align (the huge-page alignment of reservations of 4 MiB and more:
  //    large slots are 2 MiB aligned, or a page past it in an open chunk, whose guard page takes
  //    that page; take_slot refuses a class that is neither). Before the cache:
  //    a larger arena parked there may have the same mapping size (Windows rounds to 64 KiB).
  if (options.reuse_reservation) {
    std::byte* base = nullptr;
    std::size_t committed = 0;
    bool open = false;
    std::error_code ec;
    bool took = detail::take_slot(l.usable, l.granule, l.base_align, &base, &committed, &open, &ec);
    if (!took && ec && reservation_cache_size() != 0) {
      // Parked reservations hold address space only for reuse: the new arena needs it more.
      // (reserve_mapping does this for a mapping of its own; the pools cannot under their lock,
      // which the fork handlers take after the cache's.)
      clear_reservation_cache();
      took = detail::take_slot(l.usable, l.granule, l.base_align, &base, &committed, &open, &ec);
    }
    if (took) {
      std::optional<Arena> a = made(base, base, l.usable, committed);
      a->offset_flags_ |= static_cast<std::uint16_t>(kPooled | (open ? kOpenSlot : 0));
      return a;
    }
    if (ec) {  // the OS refused a small pool's chunk (at its smallest size): out of address space
      *error = ec;
      return std::nullopt;
    }
  }
  // 4. A parked reservation of the same layout and options costs no system call.
  if (options.reuse_reservation) {
    if (std::optional<detail::Parked> p = detail::take_parked(l.mapping, options)) {
      return made(p->mapping, p->base, p->reserved, p->committed);
    }
  }
  // 5. Reserve address space only.
  void* mapping = nullptr;
  if (std::error_code ec = detail::reserve_mapping(l.mapping, &mapping)) {
    *error = ec;
    return std::nullopt;
  }
  // 6. Huge pages, if asked for, are advised by the first commit past kHugePageThreshold.
  const auto start = reinterpret_cast<std::uintptr_t>(mapping) + l.guard;
  const std::uintptr_t aligned = (start + l.base_align - 1) / l.base_align * l.base_align;
  std::byte* const base =
      static_cast<std::byte*>(mapping) + (aligned - reinterpret_cast<std::uintptr_t>(mapping));
  const auto reserved =
      static_cast<std::size_t>(static_cast<std::byte*>(mapping) + l.mapping - l.guard - base);
  return made(mapping, base, reserved, 0);
}

std::uint16_t Arena::flags_of(const ArenaOptions& o) noexcept {
  return static_cast<std::uint16_t>(
      (o.guard_pages ? kGuardPages : 0) | (o.prefault ? kPrefault : 0) |
      (o.reuse_reservation ? kReuseReservation : 0) | (o.huge_pages ? kHugePages : 0) |
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
  o.sub_page_slot = base_ == nullptr || sub_page();  // the empty state reports the defaults
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
      std::max(granule, detail::round_down(std::min(kDoublingStepLimit, max_step()), granule));
  if (!has(kReuseReservation) || keep_limit > detail::kCacheMaxCommitted) return false;
  const std::size_t keep = std::min(committed_, keep_limit);
  if (committed_ > keep && pal::decommit(base_ + keep, committed_ - keep)) return false;
  committed_ = keep;
  return detail::park(detail::Parked{mapping(), mapping_size(), base_, reserved_, keep, options()});
}

void Arena::release_all() noexcept {
  if (base_ != nullptr) {
    detail::unpoison(base_, committed_);  // the next owner of these pages starts clean
    // A refused release only leaks address space; a destructor has no one to tell, and the
    // object is gone either way. (Fault-injection tests count these calls.)
    if (sub_page())
      detail::return_sub_slot(base_, reserved_);
    else if (has(kPooled)) {
      if ((offset_flags_ & kHugeAdvisedSlot) != 0) {
        std::byte* from = base_ + kHugePageThreshold;
        (void)pal::unadvise_huge_pages(from,
                                       static_cast<std::size_t>(mapping() + mapping_size() - from));
      }
      detail::return_slot(base_, reserved_, committed_, open_slot());
    } else if (!park_in_cache())
      detail::release_mapping(mapping(), mapping_size());
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

}  // namespace reservoir
