// Arena's committed prefix: growing (grow, allocate, commit) and shrinking (shrink, rewind, trim).
// Each step is the one the growth policy plans (detail::plan_growth, growth.hpp), once per growth;
// whether it fits under the memory limit is memory_limit.cpp's to say; this file knows nothing of
// where reservations come from.
#include <reservoir/arena.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <stdexcept>
#include <string>

#include <reservoir/pal.hpp>

#include "address_space.hpp"
#include "bits.hpp"
#include "growth.hpp"
#include "machine_memory.hpp"
#include "memory_limit.hpp"
#include "pool_chunks.hpp"
#include "populate.hpp"

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
  const HugePages mode = huge_pages();
  if (mode == HugePages::off) return false;
  const pal::Capabilities machine = pal::capabilities();
  return machine.transparent_huge_pages &&
         (mode == HugePages::on || !machine.host_reclaims_free_pages);
}

// ---- committing ---------------------------------------------------------------------------------

struct Arena::Growth {
  // What the growth policy is told of `a` now, for a commit past `bytes` (0: the next step).
  static detail::GrowthState state(const Arena& a, std::size_t bytes) noexcept;
  // Commits [committed_, step.target), populates step.populated of it; committed_ = step.target.
  static std::error_code take(Arena& a, const detail::PlannedStep& step) noexcept;
};

detail::GrowthState Arena::Growth::state(const Arena& a, std::size_t bytes) noexcept {
  detail::GrowthState s;
  s.committed = a.committed_;
  s.reserved = a.reserved_;
  s.granule = a.granule();
  s.max_step = a.max_step();
  s.prefault = a.has(kPrefault);
  // Under a memory limit every committed byte must be charged as it is backed, which only
  // bounded, populated steps do exactly: an unpopulated step's pages are not in the usage the
  // next reading sees. The step commits at most what is asked past the committed prefix plus one
  // step (never larger than the granule or the committed prefix): whether that could come near a
  // limit decides whether the limit is read now.
  const std::size_t beyond = bytes > a.committed_ ? bytes - a.committed_ : 0;
  const std::size_t step = std::max(a.committed_, s.granule);
  s.limit_in_force = a.has(kRespectMemoryLimit) &&
                     detail::memory_limit_in_force(beyond > kMax - step ? kMax : beyond + step);
  s.huge_pages = a.has(kHugePages);
  s.huge_pages_in_effect = &huge_pages_in_effect;
  return s;
}

std::size_t Arena::commit_step() const noexcept {
  return detail::plan_growth(Growth::state(*this, 0), 0, Populate::all).step.step;
}

std::error_code Arena::commit_to(std::size_t bytes, Populate populate,
                                 std::size_t* step_bytes) noexcept {
  const detail::GrowthPlan plan = detail::plan_growth(Growth::state(*this, bytes), bytes, populate);
  if (plan.step.target <= committed_) return {};
  *step_bytes = plan.step.target - committed_;
  const std::error_code ec = Growth::take(*this, plan.step);
  if (!ec || !plan.step.geometric) return ec;
  // A large doubling step can be refused where the request alone fits (strict overcommit, the
  // machine's memory, Windows' commit limit): the policy's smaller step, if it has one.
  return plan.retry.target > committed_ ? Growth::take(*this, plan.retry) : ec;
}

std::error_code Arena::Growth::take(Arena& a, const detail::PlannedStep& step) noexcept {
  std::byte* start = a.base_ + a.committed_;
  const std::size_t len = step.target - a.committed_;
  // 0. A first commit amid a closed reservation splits its mapping: within the mapping budget
  //    only (address_space.hpp).
  const bool splits = a.committed_ == 0 && !a.open_slot();
  if (splits && !detail::mappings_fit(detail::kSplitMappings)) {
    return make_error_code(Refusal::mapping_budget);
  }
  // 1. Charged, then committed (populate.hpp); in a guarded slot the guard moves to the new end.
  //    Pages given back (trim, release) are not credited while readings succeed: the next
  //    reading of the limit sees them, and until then the headroom errs on the safe side
  //    (memory_released counts them for a failed reading).
  std::size_t charged = 0;
  if (std::error_code ec =
          detail::charge_and_commit(start, len, step.charge, step.must_back,
                                    a.has(kRespectMemoryLimit), a.open_slot(), &charged)) {
    return ec;
  }
  if (a.guarded_slot()) {
    if (std::error_code ec =
            detail::move_guard(a.base_, a.committed_, step.target, a.guarded_slot_bytes())) {
      detail::memory_limit_refund(charged, a.has(kRespectMemoryLimit) ? step.must_back : 0);
      return ec;
    }
  }
  if (splits) {
    detail::count_mappings(detail::kSplitMappings, true);
    detail::count_pending_split(false);
  }
  // 2. The first commit past the threshold marks the rest of the reservation (up to the end of
  //    the mapping, so the upper guard page stays in the same kernel mapping) for huge pages. A
  //    hint, which splits the mapping it lies in (two more at most, counted until undone): not
  //    given where that could pass the mapping budget.
  if (step.advise_huge && !a.huge_advised() && detail::mappings_fit(detail::kSplitMappings)) {
    // A first page touched before the split gives the whole committed range one anonymous
    // memory object, so that its parts can merge again once the advice is undone (the kernel
    // merges neighbours only with the same object or none). The range holds no live data.
    (void)detail::populate(start, pal::page_size());
    std::byte* from = a.base_ + kHugePageThreshold;
    if (!pal::advise_huge_pages(from,
                                static_cast<std::size_t>(a.mapping() + a.mapping_size() - from))) {
      detail::count_mappings(detail::kSplitMappings, true);
      a.granule_units_ |= kHugeAdvised;
    }
  }
  // 3. Backed (populate.hpp). If the OS cannot back the step now (MADV_POPULATE_WRITE says
  //    ENOMEM), a clean error rather than a first touch that meets the OOM killer: the commit is
  //    undone.
  if (std::error_code ec = detail::populate(start, step.populated)) {
    const bool undone = !(a.open_slot() ? pal::discard(start, len) : pal::decommit(start, len));
    if (a.guarded_slot())
      (void)detail::move_guard(a.base_, step.target, a.committed_, a.guarded_slot_bytes());
    if (splits && undone) {
      detail::count_mappings(detail::kSplitMappings, false);
      detail::count_pending_split(true);
    }
    detail::memory_limit_refund(charged, a.has(kRespectMemoryLimit) ? step.must_back : 0);
    return ec;
  }
  detail::memory_limit_settle(charged);
  a.committed_ = step.target;
  return {};
}

ArenaError Arena::growth_error(std::size_t bytes, std::error_code ec,
                               std::size_t step_bytes) const noexcept {
  ArenaError error;
  if (!ec) {
    error.kind = ArenaError::Kind::reservation_full;
    error.bytes = bytes;
    error.limit = reserved_;
    return error;
  }
  error.kind = ArenaError::Kind::commit_refused;
  error.bytes = step_bytes;
  error.address = base_ + committed_;
  error.error = ec;
  return error;
}

void Arena::throw_growth_error(std::string_view call, std::size_t bytes, std::error_code ec,
                               std::size_t step_bytes) const {
  growth_error(bytes, ec, step_bytes).raise(call);
}

std::string detail::refusal_advice(std::error_code error) {
  if (error == Refusal::mapping_budget) return mapping_budget_advice();
  if (error == Refusal::memory_limit) return memory_limit_advice();
  if (error == Refusal::machine_memory) return machine_memory_advice();
  return {};
}

namespace {
// The sentences after a refusal's cause: the user's call that needed the memory, then what
// reservoir's own limit says of itself and its remedy (none for the OS's own errors).
std::string refused_for(std::string_view call, std::error_code error) {
  std::string s = "reservoir::" + std::string(call) + " needed it";
  if (std::string advice = detail::refusal_advice(error); !advice.empty()) s += ". " + advice;
  return s;
}
}  // namespace

// Every message of an Arena refusal, whichever container reports it.
void ArenaError::raise(std::string_view call) const {
  const std::string prefix = "reservoir::" + std::string(call) + ": ";
  switch (kind) {
    case Kind::none:
      break;
    case Kind::zero_size:
      throw std::invalid_argument(prefix + "max_bytes must be greater than 0");
    case Kind::bad_options:
      throw std::invalid_argument(prefix +
                                  "commit_granule or max_commit_step is too large to round up to "
                                  "whole pages and granules");
    case Kind::too_large:
      throw std::length_error(prefix + "cannot reserve " + format_bytes(bytes) +
                              ": more than the address space can hold (limit " +
                              format_bytes(limit) + ")");
    case Kind::reservation_full:
      throw std::length_error(prefix + "cannot grow to " + format_bytes(bytes) +
                              ": the reservation holds " + format_bytes(limit));
    case Kind::reserve_refused:
      throw OsAllocationError("reserve", bytes, nullptr, error, refused_for(call, error));
    case Kind::commit_refused:
      throw OsAllocationError("commit", bytes, address, error, refused_for(call, error));
  }
  throw std::logic_error(prefix + "ArenaError::raise called with Kind::none");
}

void* Arena::grow_slow(std::size_t n) {
  return grow_slow(n, "Arena::grow");
}

void* Arena::grow_slow(std::size_t n, std::string_view call) {
  if (n > reserved_ - size_) {
    throw_growth_error(call, n > kMax - size_ ? kMax : size_ + n, {});
  }
  std::size_t step = 0;
  if (std::error_code ec = commit_to(size_ + n, Populate::all, &step)) {
    throw_growth_error(call, size_ + n, ec, step);
  }
  std::byte* p = base_ + size_;
  size_ += n;
  return p;
}

void* Arena::try_grow_slow(std::size_t n) noexcept {
  if (n > reserved_ - size_) return nullptr;
  if (std::size_t step = 0; commit_to(size_ + n, Populate::all, &step)) return nullptr;
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
  return allocate_for("Arena::allocate", n, alignment);
}

void* Arena::allocate_for(std::string_view call, std::size_t n, std::size_t alignment) {
  if (!valid_alignment(alignment)) {
    throw std::invalid_argument("reservoir::" + std::string(call) + ": alignment " +
                                std::to_string(alignment) +
                                " is not a power of two no larger than the page size");
  }
  const std::size_t pad = padding_for(base_ + size_, alignment);
  if (n > kMax - pad) throw_growth_error(call, kMax, {});
  std::byte* const end = base_ + size_;
  if (pad + n <= committed_ - size_) {
    size_ += pad + n;
    return end + pad;
  }
  return static_cast<std::byte*>(grow_slow(pad + n, call)) + pad;
}

void* Arena::try_allocate(std::size_t n, std::size_t alignment) noexcept {
  if (!valid_alignment(alignment)) return nullptr;
  const std::size_t pad = padding_for(base_ + size_, alignment);
  if (n > kMax - pad) return nullptr;
  void* p = try_grow(pad + n);
  return p ? static_cast<std::byte*>(p) + pad : nullptr;
}

void Arena::commit(std::size_t bytes, Populate populate) {
  if (bytes > reserved_) throw_growth_error("Arena::commit", bytes, {});
  std::size_t step = 0;
  if (std::error_code ec = commit_to(bytes, populate, &step)) {
    throw_growth_error("Arena::commit", bytes, ec, step);
  }
}

bool Arena::try_commit(std::size_t bytes, Populate populate) noexcept {
  std::size_t step = 0;
  return bytes <= reserved_ && !commit_to(bytes, populate, &step);
}

bool Arena::try_commit(std::size_t bytes, Populate populate, ArenaError* error) {
  *error = {};
  if (bytes > reserved_) {
    *error = growth_error(bytes, {});
  } else if (std::size_t step = 0; std::error_code ec = commit_to(bytes, populate, &step)) {
    *error = growth_error(bytes, ec, step);
  }
  return !*error;
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
  if (guarded_slot()) {
    if (std::error_code ec = detail::move_guard(base_, committed_, target, guarded_slot_bytes()))
      return ec;
  } else if (target == 0 && !open_slot()) {
    detail::count_mappings(detail::kSplitMappings, false);  // merged back into its neighbours
    detail::count_pending_split(true);
  }
  detail::memory_released(committed_ - target);
  committed_ = target;
  if (committed_ <= kHugePageThreshold) undo_huge_advice();
  return {};
}

void Arena::undo_huge_advice() noexcept {
  if (!huge_advised()) return;
  granule_units_ &= ~kHugeAdvised;
  // MADV_NOHUGEPAGE is the inverse of the advice only where the neighbours carry it: every pool
  // chunk is made with it (address_space.cpp); a mapping of its own gets it whole, so that its
  // flags are one again. Refused, the split stays counted.
  std::byte* const from = has(kPooled) ? base_ + kHugePageThreshold : mapping();
  if (!pal::unadvise_huge_pages(from,
                                static_cast<std::size_t>(mapping() + mapping_size() - from))) {
    detail::count_mappings(detail::kSplitMappings, false);
  }
}

std::size_t Arena::guarded_slot_bytes() const noexcept {
  const std::size_t k = detail::class_of(reserved_);
  return k < detail::kClasses ? detail::kClassBytes[k] : reserved_;
}

bool Arena::contains(const void* p, std::size_t n) const noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const auto lo = reinterpret_cast<std::uintptr_t>(base_);
  return base_ != nullptr && addr >= lo && n <= size_ && addr - lo <= size_ - n;
}

}  // namespace reservoir
