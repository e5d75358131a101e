// The address-space count: every mapping the arena files make or give back goes through here and
// is counted, so default-sized containers can plan within what the process may still reserve
// (budget.cpp). It knows nothing of arenas, commits or the sources that hold parked space.
#include "address_space.hpp"

#include <atomic>
#include <string>

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

namespace reservoir {
namespace {

std::atomic<std::size_t> g_reserved{0};    // bytes reserved by live arenas and parked reservations
std::atomic<std::size_t> g_parked{0};      // of which parked in the reservation cache
std::atomic<std::size_t> g_pool_spare{0};  // of which no live arena holds in the pools' chunks
// Whether large pool chunks are reserved open where the OS allows (set_open_pool_chunks): an
// opt-in, since an open chunk's arenas take writes past their committed prefix.
std::atomic<bool> g_open_chunks{false};
std::atomic<std::size_t> g_mappings{0};  // kernel mappings held (address_space.hpp)
// Live arenas whose first commit will split a mapping (count_pending_split).
std::atomic<std::size_t> g_pending{0};

// Below this many mappings the limit is not read: a program with a few arrays reads no /proc
// file for them (a vm.max_map_count below twice this, not read yet, is not honoured).
constexpr std::size_t kReadLimitFrom = 256;

// Half of the kernel's count, or 0: no budget (or, below kReadLimitFrom, none known yet).
std::size_t budget_at(std::size_t held, bool reread = false) noexcept {
  return (held < kReadLimitFrom ? pal::max_map_count_known() : pal::max_map_count(reread)) / 2;
}

}  // namespace

namespace detail {

std::error_code reserve_mapping(std::size_t size, void** out, ChunkKind* kind,
                                bool may_open) noexcept {
  if (!mappings_fit(1)) return make_error_code(Refusal::mapping_budget);
  if (kind != nullptr) {
    *kind = ChunkKind::closed;
    const bool open = may_open && g_open_chunks.load(std::memory_order_relaxed);
    const std::size_t held =
        mappings_held() + kSplitMappings * g_pending.load(std::memory_order_relaxed);
    const std::size_t budget = budget_at(held);
    const bool guarded = !open && budget != 0 && held >= budget / 4 && pal::guard_markers();
    if (open || guarded) {
      const std::error_code ec = pal::reserve_open(size, out);
      if (!ec) {
        *kind = open ? ChunkKind::open : ChunkKind::guarded;
        g_reserved.fetch_add(size, std::memory_order_relaxed);
        count_mappings(1, true);
      }
      if (ec != std::errc::not_supported) return ec;
    }
  }
  // A chunk carries MADV_NOHUGEPAGE whole, as an open one does: then the same advice undoes an
  // arena's huge-page advice in its slot exactly, merging the split back (Arena's
  // undo_huge_advice).
  const std::error_code ec =
      kind != nullptr ? pal::reserve_without_huge_pages(size, out) : pal::reserve(size, out);
  if (!ec) {
    g_reserved.fetch_add(size, std::memory_order_relaxed);
    count_mappings(1, true);
  }
  return ec;
}

void release_mapping(void* mapping, std::size_t size, bool split) noexcept {
  (void)pal::release(mapping, size);
  g_reserved.fetch_sub(size, std::memory_order_relaxed);
  count_mappings(split ? 1 + kSplitMappings : 1, false);
}

void count_mappings(std::size_t n, bool add) noexcept {
  if (add) {
    g_mappings.fetch_add(n, std::memory_order_relaxed);
  } else {
    g_mappings.fetch_sub(n, std::memory_order_relaxed);
  }
}

void count_pending_split(bool add) noexcept {
  if (add) {
    g_pending.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_pending.fetch_sub(1, std::memory_order_relaxed);
  }
}

std::size_t mappings_held() noexcept {
  return g_mappings.load(std::memory_order_relaxed);
}

bool mappings_fit(std::size_t n) noexcept {
  const std::size_t held = mappings_held();
  std::size_t budget = budget_at(held);
  if (budget == 0 || held + n <= budget) return true;
  budget = budget_at(held, true);  // raised meanwhile?
  return budget == 0 || held + n <= budget;
}

bool mappings_short() noexcept {
  const std::size_t held = mappings_held();
  const std::size_t budget = budget_at(held);
  return budget != 0 && held > budget - budget / 8;
}

std::string mapping_budget_advice() {
  const std::size_t count = pal::max_map_count();
  return "reservoir holds " + std::to_string(mappings_held()) +
         " kernel mappings, and takes at most half of the process's vm.max_map_count (" +
         std::to_string(count) +
         "), so that the rest of the program keeps the other half for its threads, libraries and "
         "heap. An array's first growth is refused when it would need more: on kernels without "
         "guard markers (before Linux 6.13), under strict overcommit or a data limit, every "
         "non-empty array costs two. Destroyed arrays give theirs back. Remedies: a bound for "
         "small arrays "
         "(reservoir::max_elements(n) of at most 2 KiB shares pages and takes no mapping of its "
         "own), std::vector for many small arrays, or a higher limit (sysctl vm.max_map_count)";
}

void count_parked(std::size_t size, bool parked) noexcept {
  if (parked) {
    g_parked.fetch_add(size, std::memory_order_relaxed);
  } else {
    g_parked.fetch_sub(size, std::memory_order_relaxed);
  }
}

void count_pool_spare(std::size_t size, bool spare) noexcept {
  if (spare) {
    g_pool_spare.fetch_add(size, std::memory_order_relaxed);
  } else {
    g_pool_spare.fetch_sub(size, std::memory_order_relaxed);
  }
}

std::size_t parked_bytes() noexcept {
  return g_parked.load(std::memory_order_relaxed);
}

std::size_t pool_spare_bytes() noexcept {
  return g_pool_spare.load(std::memory_order_relaxed);
}

}  // namespace detail

void set_open_pool_chunks(bool open) noexcept {
  g_open_chunks.store(open, std::memory_order_relaxed);
}

bool open_pool_chunks() noexcept {
  return g_open_chunks.load(std::memory_order_relaxed);
}

std::size_t reserved_address_space() noexcept {
  return g_reserved.load(std::memory_order_relaxed);
}

}  // namespace reservoir
