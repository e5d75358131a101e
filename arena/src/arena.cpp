// Arena: one reservation, a length, and a committed prefix grown in steps. This file owns the
// layout of a reservation (plan) and the arena's lifetime (create, move, release); growing and
// shrinking the committed prefix is arena_commit.cpp's. Where a reservation comes from and goes
// back is the provider's (provider.hpp).
#include <reservoir/arena.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include <reservoir/pal.hpp>

#include "address_space.hpp"
#include "bits.hpp"
#include "provider.hpp"

namespace reservoir {
namespace {

using detail::kMax;
using detail::kMaxReservation;
using detail::round_up;

using detail::kHugePageSize;
constexpr std::size_t kMaxStepGranules = std::numeric_limits<std::uint16_t>::max();

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
  // Two fields of pal::Capabilities, read alone: plan() runs at every arena, and the struct's
  // other fields cost a file read the first time (huge pages), which an arena that never commits
  // has no reason to pay.
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
  // The Arena packs both into one word: a granule of less than 2^31 units (the top bit is a
  // flag), a step of at most kMaxStepGranules granules (larger steps buy nothing: see
  // kDefaultMaxCommitStep).
  if (l.granule / detail::kSmallestPage >= (std::size_t{1} << 31)) {
    return std::errc::invalid_argument;
  }
  l.max_step = std::min(l.max_step, l.granule * kMaxStepGranules);
  l.guard = options.guard_pages ? page : 0;
  if (max_bytes > kMaxReservation || !round_up(max_bytes, page, &l.usable)) {
    return std::errc::value_too_large;
  }
  // Large arenas whose steps reach 2 MiB start on a 2 MiB boundary, so every later step is a
  // whole aligned huge page. The alignment costs address space only (never committed).
  l.base_align =
      l.usable >= 2 * kHugePageSize && l.max_step >= kHugePageSize ? kHugePageSize : page;
  const std::size_t slack = l.base_align > granularity ? l.base_align : 0;
  if (!round_up(slack + l.usable + 2 * l.guard, granularity, &l.mapping) ||
      l.mapping > kMaxReservation) {
    return std::errc::value_too_large;
  }
  *out = l;
  return {};
}

// The refusal of a request plan() rejected.
ArenaError plan_error(std::errc e, std::size_t max_bytes) noexcept {
  ArenaError error;
  error.bytes = max_bytes;
  if (e == std::errc::invalid_argument) {
    error.kind = max_bytes == 0 ? ArenaError::Kind::zero_size : ArenaError::Kind::bad_options;
  } else {
    error.kind = ArenaError::Kind::too_large;
    error.limit = kMaxReservation;
  }
  return error;
}

}  // namespace

// ---- lifetime -----------------------------------------------------------------------------------

Arena::Arena(std::size_t max_bytes, ArenaOptions options) {
  ArenaError error;
  std::optional<Arena> made = create(max_bytes, options, &error);
  if (!made) error.raise("Arena");
  swap(*this, *made);
}

std::optional<Arena> Arena::create(std::size_t max_bytes, ArenaOptions options,
                                   std::error_code* error) noexcept {
  ArenaError refusal;
  std::optional<Arena> made = create(max_bytes, options, &refusal);
  switch (refusal.kind) {
    case ArenaError::Kind::zero_size:
    case ArenaError::Kind::bad_options:
      *error = std::make_error_code(std::errc::invalid_argument);
      break;
    case ArenaError::Kind::too_large:
      *error = std::make_error_code(std::errc::value_too_large);
      break;
    default:
      *error = refusal.error;
  }
  return made;
}

std::optional<Arena> Arena::create(std::size_t max_bytes, ArenaOptions options,
                                   ArenaError* error) noexcept {
  // 1. Validate and lay out: [guard page][usable ... rounded to granularity][guard page].
  Layout l;
  if (std::errc e = plan(max_bytes, options, &l); e != std::errc{}) {
    *error = plan_error(e, max_bytes);
    return std::nullopt;
  }
  // The options as this layout rounds them: a parked reservation matches on these.
  options.commit_granule = l.granule;
  options.max_commit_step = l.max_step;
  // 2. The provider's reservation. Huge pages, if asked for, are advised by the first commit
  //    past kHugePageThreshold.
  detail::Reservation r;
  if (std::error_code ec = detail::acquire(
          {max_bytes, l.usable, l.granule, l.guard, l.base_align, l.mapping, options}, &r)) {
    *error = {};
    error->kind = ArenaError::Kind::reserve_refused;
    error->bytes = l.mapping;
    error->error = ec;
    return std::nullopt;
  }
  static_assert(kUnit == detail::kSmallestPage, "plan() checks the granule in these units");
  Arena a;
  a.base_ = r.base;
  a.reserved_ = r.reserved;
  a.committed_ = r.committed;
  a.granule_units_ = static_cast<std::uint32_t>(l.granule / kUnit);
  a.max_step_granules_ = static_cast<std::uint16_t>(detail::quotient_of(l.max_step, l.granule));
  // A mapping of its own records the base's offset in it: at most a guard page (64 KiB) plus a
  // huge page of alignment, 528 units, 10 bits. A pool slot's offset is 0 (its mapping belongs
  // to the pool); the field says instead whether it is an open slot.
  std::uint16_t flags = flags_of(r.options);
  if (r.source == detail::Source::mapping) {
    const auto offset = static_cast<std::size_t>(r.base - static_cast<std::byte*>(r.mapping));
    flags |= static_cast<std::uint16_t>((offset / kUnit) << kFlagBits);
  } else {
    flags |= static_cast<std::uint16_t>(kPooled | (r.open ? kOpenSlot : 0) |
                                        (r.guarded ? kGuardedSlot : 0));
  }
  a.offset_flags_ = flags;
  if (a.committed_ == 0 && !a.open_slot()) detail::count_pending_split(true);
  *error = {};
  return std::optional<Arena>(std::move(a));
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

void Arena::release_all() noexcept {
  if (base_ != nullptr) {
    if (committed_ == 0 && !open_slot()) detail::count_pending_split(false);
    detail::unpoison(base_, committed_);  // the next owner of these pages starts clean
    // A refused release only leaks address space; a destructor has no one to tell, and the
    // object is gone either way. (Fault-injection tests count these calls.)
    // An arena that advised huge pages undoes it, so that the next arena in its slot or mapping
    // starts as in a fresh one, and no split outlives it uncounted.
    undo_huge_advice();
    const detail::Source source = sub_page()     ? detail::Source::sub_page_run
                                  : has(kPooled) ? detail::Source::page_pool
                                                 : detail::Source::mapping;
    detail::release({mapping(), mapping_size(), base_, reserved_, committed_, source, open_slot(),
                     options(), guarded_slot()});
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
