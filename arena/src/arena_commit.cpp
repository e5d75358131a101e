// Arena's committed prefix: the commit-step policy, growing (grow, allocate, commit) and shrinking
// (shrink, rewind, trim). Whether a step fits under the memory limit is memory_limit.cpp's to say;
// this file knows nothing of where reservations come from.
#include <reservoir/arena.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <string>

#include "arena_internal.hpp"

namespace reservoir {
namespace {
using detail::kMax;
using detail::round_up;
}  // namespace

// ---- huge pages ---------------------------------------------------------------------------------

namespace {
std::atomic<HugePages> g_huge_pages{HugePages::automatic};
}  // namespace

void set_huge_pages(HugePages mode) noexcept {
  g_huge_pages.store(mode, std::memory_order_relaxed);
}

HugePages huge_pages() noexcept {
  return g_huge_pages.load(std::memory_order_relaxed);
}

bool huge_pages_in_effect() noexcept {
  switch (huge_pages()) {
    case HugePages::off:
      return false;
    case HugePages::on:
      return pal::transparent_huge_pages();
    case HugePages::automatic:
      break;
  }
  return pal::transparent_huge_pages() && !pal::host_reclaims_free_pages();
}

// ---- committing ---------------------------------------------------------------------------------

bool Arena::geometric_steps() const noexcept {
  // Doubling steps are safe where committing is a permission change only: nothing is populated
  // (prefault off), or what lies past kHugePageThreshold is backed by 2 MiB first touches. Under
  // a memory limit every committed byte must be charged as it is backed, which only bounded,
  // populated steps do exactly: an unpopulated step's pages are not in the usage the next
  // reading sees.
  if (has(kRespectMemoryLimit) && detail::memory_limit_in_force()) return false;
  return !has(kPrefault) || (has(kHugePages) && huge_pages_in_effect());
}

std::size_t Arena::bounded_step() const noexcept {
  // A power-of-two number of granules, capped at kPopulatedStepLimit (whole granules, at least
  // one) and at max_step():
  //   1. at least one granule;
  //   2. the committed prefix itself, up to kDoublingStepLimit: small arenas double;
  //   3. committed/8: large arenas commit in proportion to their size.
  const std::size_t granule = this->granule();
  std::size_t step = granule;
  if (const std::size_t held = detail::quotient_of(committed_, granule); held > 1) {
    const std::size_t doubling_cap =
        std::max<std::size_t>(detail::quotient_of(kDoublingStepLimit, granule), 1);
    step = std::max(step, granule * std::bit_floor(std::min(held, doubling_cap)));
  }
  if (const std::size_t eighth = detail::quotient_of(committed_ / 8, granule); eighth > 1) {
    step = std::max(step, granule * std::bit_floor(eighth));
  }
  const std::size_t cap = std::max(granule, detail::round_down(kPopulatedStepLimit, granule));
  return std::min({step, cap, max_step()});
}

std::size_t Arena::commit_step() const noexcept {
  // An empty (default-constructed or moved-from) arena has no granule and no step.
  const std::size_t granule = this->granule();
  if (granule == 0) return 0;
  if (!geometric_steps()) return bounded_step();
  // The committed prefix, in whole granules rounded down to a power of two: each step doubles it.
  const std::size_t held = std::max<std::size_t>(detail::quotient_of(committed_, granule), 1);
  return std::min(granule * std::bit_floor(held), max_step());
}

std::size_t Arena::commit_target(std::size_t bytes, std::size_t step) const noexcept {
  // Commit outward: whole steps, capped at the reservation's end.
  std::size_t target = reserved_;
  if (std::size_t r; round_up(bytes, step, &r) && r < reserved_) target = r;
  return target;
}

std::error_code Arena::commit_to(std::size_t bytes, Populate populate) noexcept {
  const bool geometric = geometric_steps();
  const std::size_t target = commit_target(bytes, commit_step());
  if (target <= committed_) return {};
  std::error_code ec = commit_range(bytes, target, populate, geometric);
  if (!ec || !geometric) return ec;
  // A large doubling step can be refused where the request alone fits (strict overcommit, the
  // machine's memory, Windows' commit limit): retry with the smallest step that holds it, if
  // that is at least kPopulatedStepLimit smaller.
  const std::size_t least = commit_target(bytes, granule());
  if (least >= target || target - least < kPopulatedStepLimit) return ec;
  return commit_range(bytes, least, populate, geometric);
}

std::error_code Arena::commit_range(std::size_t bytes, std::size_t target, Populate populate,
                                    bool geometric) noexcept {
  std::byte* start = base_ + committed_;
  const std::size_t len = target - committed_;
  // 1. What to back with RAM now: all of the step, its first kPopulatedStepLimit, or nothing.
  //    Under huge pages, nothing past kHugePageThreshold: first touches map 2 MiB pages there,
  //    one fault per 2 MiB, and no populate call is made for it.
  std::size_t backed = populate == Populate::all    ? len
                       : populate == Populate::none ? 0
                                                    : std::min(len, kPopulatedStepLimit);
  //    Below the threshold a doubling step backs at most half of itself beyond what was asked
  //    for, so RSS stays within 1.5x of the bytes in use; the rest is backed by first touches.
  const bool huge = has(kHugePages) && huge_pages_in_effect() && reserved_ > kHugePageThreshold;
  if (huge && geometric) {
    const std::size_t below =
        committed_ < kHugePageThreshold ? std::min(target, kHugePageThreshold) - committed_ : 0;
    const std::size_t asked_now = bytes > committed_ ? bytes - committed_ : 0;
    backed = std::min({backed, below, std::max(asked_now, len / 2)});
  }
  if (!has(kPrefault)) backed = 0;
  // 2. Charged: what is populated now or (all) written next; untouched pages cost nothing. Pages
  //    given back (trim, release) are not credited: the next reading of the limit sees them, and
  //    until then the headroom errs on the safe side. A geometric step is taken only where no
  //    limit is in force, and there the charge is the machine check alone, of the bytes asked for.
  const std::size_t asked = std::min(len, bytes > committed_ ? bytes - committed_ : 0);
  const std::size_t charge = geometric ? std::max(backed, populate == Populate::all ? asked : 0)
                             : has(kPrefault)             ? backed
                             : populate == Populate::none ? 0
                             : populate == Populate::all  ? len
                                                          : std::min(len, kPopulatedStepLimit);
  //    What the machine must back for it: all of a step being filled (appends, Populate::all),
  //    what a reserve populates (Populate::first_step), nothing for Populate::none.
  const std::size_t backed_later =
      std::max(charge, populate == Populate::all    ? len
                       : populate == Populate::none ? std::size_t{0}
                                                    : std::min(len, kPopulatedStepLimit));
  std::size_t charged = 0;
  std::error_code ec = has(kRespectMemoryLimit)
                           ? detail::charge_step(len, charge, backed_later, &charged)
                           : std::error_code{};
  if (ec) return ec;
  if (!open_slot() && (ec = pal::commit(start, len))) {
    detail::memory_limit_refund(charged);
    return ec;
  }
  // 3. The first commit past the threshold marks the rest of the reservation (up to the end of
  //    the mapping, so the upper guard page stays in the same kernel mapping) for huge pages.
  if (huge && committed_ <= kHugePageThreshold && target > kHugePageThreshold) {
    std::byte* from = base_ + kHugePageThreshold;
    (void)pal::advise_huge_pages(from, static_cast<std::size_t>(mapping() + mapping_size() - from));
    if (has(kPooled)) offset_flags_ |= kHugeAdvisedSlot;
  }
  if (backed != 0) {
    // 4. Ask the OS to back the step (Linux MADV_POPULATE_WRITE; not for steps under
    //    kDoublingStepLimit, where the stores below cost less than the call), then write one
    //    byte per page anyway (the only way elsewhere). After a populate the write costs a store
    //    per page, but on a VM whose host takes back free guest pages (free page reporting) the
    //    populate maps pages without touching them, and the host's fault would otherwise land on
    //    the append that first writes each page (measurements: docs/design.md).
    //    Storing 0 is safe: the step holds no live data and reads as zero (a read-modify-write
    //    would fault twice where nothing was populated: a read maps the shared zero page first).
    ec = backed < kDoublingStepLimit ? std::make_error_code(std::errc::not_supported)
                                     : pal::prefault(start, backed);
    if (!ec || ec == std::errc::not_supported) {
      // Every 4 KiB, the smallest page of any supported OS, whatever page_size() says.
      constexpr std::size_t kTouchStride = 4096;
      auto* first = static_cast<volatile unsigned char*>(static_cast<void*>(start));
      for (std::size_t off = 0; off < backed; off += kTouchStride)
        first[off] = 0;
    } else {
      // The OS cannot back the step now (MADV_POPULATE_WRITE says ENOMEM): report it here as a
      // clean error rather than let the first touch meet the OOM killer. Undo the commit.
      (void)(open_slot() ? pal::discard(start, len) : pal::decommit(start, len));
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
  // has nothing committed; a sub-page slot shares its pages and keeps them.
  if (committed_ == 0 || sub_page()) return {};
  std::size_t target = committed_;
  if (std::size_t r; round_up(std::max(size_, keep_bytes), granule(), &r) && r < committed_) {
    target = r;
  }
  if (target >= committed_) return {};
  std::byte* const from = base_ + target;
  if (std::error_code ec =
          open_slot()
              ? pal::discard(from, detail::backed_end(base_, committed_, reserved_) - target)
              : pal::decommit(from, committed_ - target)) {
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
