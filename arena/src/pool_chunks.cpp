// The chunks of the page pools: one OS mapping holds many slots of one class.
//
// A chunk of class c is laid out as [guard][slot 0][guard][slot 1][guard]...[slot n-1][guard]:
// every slot is c bytes, every guard one page that is never committed, so touching a byte just
// before or after a slot faults exactly as an arena's own guard pages do. A slot's arena commits
// and decommits inside its slot with the ordinary calls; only the chunk is reserved and released.
//
// The large classes hold default arrays (DynArray without max_elements): their slots are the
// tiers default_reservation_size() grants (64 MiB, 1 GiB, 64 GiB), and only reservations within
// 1/64 of a tier take one, so a slot never holds much more address space than its arena asked
// for. Their slots start on kHugePageSize boundaries (what Arena's plan() asks of reservations of
// 4 MiB and more, for huge pages) and are kHugePageSize apart, the gap never committed: a chunk is
// [guard][pad][slot 0][gap][slot 1][gap]...[slot n-1][gap], pad + guard < kHugePageSize.
//
// Past a quarter of the mapping budget, where the kernel has guard markers, a chunk of any class
// is guarded (address_space.hpp's ChunkKind): read-write, each slot a page past where a closed
// chunk puts it, that page its guard below, and a guard marker at its committed end, moved as it
// commits; the chunk's last page a guard past the last slot. One mapping for all its slots.
//
// With set_open_pool_chunks(true), where the OS makes them (Linux), a large chunk is an open
// reservation (pal::reserve_open): read-write from the start, so an arena in one of its slots
// commits without a system call. By default it is closed, as every other reservation. In a
// closed chunk each live slot's committed prefix is a kernel mapping of its own, made by the
// commit that splits the chunk's. An open chunk is one mapping; each slot
// starts a page past its kHugePageSize boundary and that page is its guard
// ([pad][guard|slot 0][gap][guard|slot 1][gap]...[guard]): a stray access below a slot faults,
// one past its end runs through the read-write gap into the next slot's guard (or the chunk's
// last page). Past the committed prefix the slot reads and writes as memory that was never
// touched: zeros, backed on first touch (docs/guarantees.md).
//
// The address space of a large chunk that no live arena holds (slots never carved, and parked
// ones) is counted as spare (count_pool_spare), as parked reservations are, so it never makes a
// new default array's tier smaller. A large chunk the OS refuses is no error: the arena reserves a
// mapping of its own, as it would without the pools.
#include "pool_chunks.hpp"

#include <algorithm>
#include <cstdint>
#include <new>

#include <reservoir/pal.hpp>

#include "address_space.hpp"
#include "bits.hpp"
#include "machine_memory.hpp"
#include "pool_state.hpp"

namespace reservoir::detail {
namespace {

// pal::address_space_size(), from a reading of at most 20 ms ago that found no limit where there
// is one (recent_unlimited_address_space), else read now.
std::size_t address_space() noexcept {
  const std::size_t recent = recent_unlimited_address_space();
  return recent ? recent : pal::address_space_size();
}

// A large class's first chunk holds this many slots, each later one twice the previous, up to a
// cap of slots and of bytes. A new chunk costs about a dozen system calls (on Linux the
// open-chunk checks read two /proc files), several times a default array's own cost, so where a
// reservation costs the same whatever its size (pal::Capabilities::size_free_reservations) the
// caps are large: 64 GiB slots up to 31 to a chunk, 1 GiB and 64 MiB slots up to 256. Elsewhere
// a chunk's cost grows with its size, and the caps are 256 GiB and 64 slots (64 GiB slots: 3 to
// a chunk). The byte cap also bounds the spare address space a class can hold.
constexpr std::size_t kFirstLargeChunkSlots = 2;
struct LargeChunkCaps {
  std::size_t slots;
  std::size_t bytes;
};
constexpr LargeChunkCaps kSizeFreeCaps{256, std::size_t{1} << (k64Bit ? 41 : 30)};
constexpr LargeChunkCaps kSizedCaps{64, std::size_t{1} << (k64Bit ? 38 : 30)};
constexpr std::size_t kLargeChunkShare = 16;

// A class's first chunk spans about 2 MiB, each later one twice the previous, up to 64 MiB: a
// program with a few small arrays reserves little, one with many makes few mappings.
constexpr std::size_t kFirstChunkBytes = std::size_t{2} << 20;
constexpr std::size_t kMaxChunkBytes = std::size_t{64} << 20;
constexpr std::size_t kMinChunkSlots = 4;

// The first chunk size of class k: bytes (small classes) or slots (large ones).
constexpr std::size_t first_chunk(std::size_t k) noexcept {
  return is_large(k) ? kFirstLargeChunkSlots : kFirstChunkBytes;
}

// Slots in all the class's chunks: the most the free list can ever hold.
std::size_t slots_total(const SizeClass& sc) noexcept {
  std::size_t n = 0;
  for (const Chunk& c : sc.chunks)
    n += c.slots;
  return n;
}

// Reserves a chunk for the class: of about `target` bytes (small classes) or of `target` slots
// (large ones). With the mutex held.
std::error_code add_chunk(SizeClass& sc, std::size_t k, std::size_t target) noexcept {
  const std::size_t page = pal::page_size();
  const std::size_t stride = stride_of(k);
  const std::size_t slots =
      is_large(k) ? target : std::max(kMinChunkSlots, (target - page) / stride);
  // Small: [guard][slot][guard]...: page + slots * stride. Large: slot 0 starts at the first
  // kHugePageSize boundary past the guard page, at most kHugePageSize into the mapping, so
  // slots * stride + page hold every slot, its gap and the guard page after the last gap; one
  // page more holds an open chunk's slots, each a page past its boundary, and its last guard.
  std::size_t bytes = 0;
  const std::size_t extra = is_large(k) ? 2 * page : page;
  if (slots > (kMax - extra) / stride ||
      !round_up(extra + slots * stride, pal::allocation_granularity(), &bytes)) {
    return std::make_error_code(std::errc::value_too_large);
  }
  // A large chunk takes at most a sixteenth of the address space (a 39-bit arm64 kernel's
  // 512 GiB: 32 GiB, so 64 GiB slots are not pooled there), so that spare slots never crowd out
  // the rest of the program.
  if (is_large(k) && bytes > address_space() / kLargeChunkShare) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
  const std::size_t fit = is_large(k) ? slots : (bytes - page) / stride;
  try {
    sc.chunks.reserve(sc.chunks.size() + 1);
    sc.free.reserve(slots_total(sc) + fit);  // so that returning a slot never allocates
  } catch (...) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
  void* mapping = nullptr;
  ChunkKind kind = ChunkKind::closed;
  if (std::error_code ec = reserve_mapping(bytes, &mapping, &kind, is_large(k))) return ec;
  const bool open = kind != ChunkKind::closed;
  // A guarded small chunk's slots each start a page later (that page is the guard below them),
  // so its last page, the guard past the last slot, holds no slot: one slot fewer may fit.
  const std::size_t slots_in =
      kind == ChunkKind::guarded && !is_large(k) ? (bytes - 2 * page) / stride : fit;
  auto* const base = static_cast<std::byte*>(mapping);
  std::byte* first = base + page;
  if (is_large(k)) {
    first = align_up(first, kHugePageSize);
  }
  // An open chunk's last page is its guard (what lies below slot 0 is no other arena's). Made by
  // mprotect (no guard markers) it splits the chunk's mapping once.
  std::size_t maps = 0;
  if (open) {
    maps = pal::guard_markers() ? 0 : 1;
    if (!mappings_fit(maps)) {
      release_mapping(mapping, bytes);
      return make_error_code(Refusal::mapping_budget);
    }
    if (std::error_code ec = pal::guard(base + bytes - page, page)) {
      release_mapping(mapping, bytes);
      return ec;
    }
    count_mappings(maps, true);
  }
  if (is_large(k)) count_pool_spare(bytes, true);  // no live arena holds any of it yet
  sc.chunks.push_back(
      Chunk{base, bytes, first, slots_in, 0, open, kind == ChunkKind::guarded, maps});
  return {};
}

// The next chunk size after one of `now`: twice as large, up to the class's cap.
std::size_t next_chunk(std::size_t k, std::size_t now) noexcept {
  if (!is_large(k)) return std::min(kMaxChunkBytes, now * 2);
  const pal::Capabilities machine = pal::capabilities();
  const LargeChunkCaps caps = machine.size_free_reservations ? kSizeFreeCaps : kSizedCaps;
  const std::size_t most = std::min(caps.bytes, address_space() / kLargeChunkShare);
  const std::size_t cap = std::max(kFirstLargeChunkSlots,
                                   std::min(caps.slots, (most - machine.page_size) / stride_of(k)));
  return std::min(cap, now * 2);
}

}  // namespace

SizeClass* size_classes() noexcept {
  // Never destroyed: an arena in a static object may be destroyed after any function-local static.
  // In static storage, so that it goes with the library when a shared object is unloaded.
  alignas(SizeClass) static std::byte storage[sizeof(SizeClass) * kClasses];
  static SizeClass* const c = [] {
    for (std::size_t k = 0; k < kClasses; ++k)
      (::new (storage + k * sizeof(SizeClass)) SizeClass{})->next_chunk_size = first_chunk(k);
    return std::launder(reinterpret_cast<SizeClass*>(storage));
  }();
  return c;
}

namespace {
// Made before main, while no other thread can be inside the initializer when one forks.
[[maybe_unused]] const bool g_made_before_main = (size_classes(), true);
}  // namespace

std::size_t class_of(std::size_t usable) noexcept {
  const std::size_t page = pal::page_size();
  for (std::size_t i = 0; i < kClasses; ++i) {
    const std::size_t size = kClassBytes[i];
    if (size == 0 || remainder_of(size, page) != 0 || usable > size) continue;
    if (!is_large(i) || usable >= size - size / 64) return i;
  }
  return kClasses;
}

// The slot pitch and base alignment of class k.
std::size_t stride_of(std::size_t k) noexcept {
  return kClassBytes[k] + (is_large(k) ? kHugePageSize : pal::page_size());
}
std::size_t align_of(std::size_t k) noexcept {
  return is_large(k) ? kHugePageSize : pal::page_size();
}

std::byte* carve(SizeClass& sc, std::size_t k, std::error_code* error, bool* open,
                 bool* guarded) noexcept {
  if (sc.chunks.empty() || sc.chunks.back().carved == sc.chunks.back().slots) {
    if (sc.grow_next) sc.next_chunk_size = next_chunk(k, sc.next_chunk_size);
    sc.grow_next = false;
    std::error_code ec = add_chunk(sc, k, sc.next_chunk_size);
    if (ec && sc.next_chunk_size > first_chunk(k)) {
      sc.next_chunk_size = first_chunk(k);
      ec = add_chunk(sc, k, sc.next_chunk_size);
    }
    if (ec) {
      *error = ec;
      return nullptr;
    }
    sc.grow_next = true;
  }
  Chunk& c = sc.chunks.back();
  std::byte* slot = c.first + c.carved * stride_of(k);
  if (c.open) {
    const std::size_t page = pal::page_size();
    // Made by mprotect (no guard markers: an open chunk only), the guard splits the mapping.
    const std::size_t maps = c.guarded || pal::guard_markers() ? 0 : kSplitMappings;
    if (!mappings_fit(maps)) {
      *error = make_error_code(Refusal::mapping_budget);
      return nullptr;
    }
    if (std::error_code ec = pal::guard(slot, c.guarded ? 2 * page : page)) {
      *error = ec;
      return nullptr;
    }
    count_mappings(maps, true);
    c.maps += maps;
    slot += page;
  }
  ++c.carved;
  *open = c.open;
  *guarded = c.guarded;
  return slot;
}

std::size_t release_unused_chunks(SizeClass& sc, std::size_t k, bool drop_pages) noexcept {
  std::sort(sc.free.begin(), sc.free.end(),
            [](const FreeSlot& a, const FreeSlot& b) { return a.base < b.base; });
  std::vector<Chunk> kept;
  try {
    kept.reserve(sc.chunks.size());
  } catch (...) {
    return 0;  // no memory to sort the chunks out: they stay, with their slots' pages
  }
  std::size_t dropped = 0;
  const auto by_base = [](const FreeSlot& f, const std::byte* b) { return f.base < b; };
  for (const Chunk& c : sc.chunks) {
    const auto lo = std::lower_bound(sc.free.begin(), sc.free.end(), c.base, by_base);
    const auto hi = std::lower_bound(lo, sc.free.end(), c.base + c.bytes, by_base);
    const bool holds_pages =
        std::any_of(lo, hi, [](const FreeSlot& f) { return f.committed != 0; });
    if (static_cast<std::size_t>(hi - lo) == c.carved && (drop_pages || !holds_pages)) {
      // What decommitting each slot would have counted: its pages given back, and a closed
      // slot's split of the chunk's mapping gone.
      for (auto it = lo; it != hi; ++it) {
        if (it->committed == 0) continue;
        unpoison(it->base, it->committed);  // the range may be mapped again by anyone
        memory_released(it->committed);
        pool_state().resident -= it->committed;
        dropped += it->committed;
        if (!it->open) count_mappings(kSplitMappings, false);
      }
      release_mapping(c.base, c.bytes);
      count_mappings(c.maps, false);
      if (is_large(k)) count_pool_spare(c.bytes, false);
      for (auto it = lo; it != hi; ++it)
        it->committed = kMax;  // removed below (the order by base stays intact)
      continue;
    }
    kept.push_back(c);
  }
  sc.free.erase(std::remove_if(sc.free.begin(), sc.free.end(),
                               [](const FreeSlot& f) { return f.committed == kMax; }),
                sc.free.end());
  // Only the last chunk can have uncarved slots, and the order is kept, so carving goes on
  // where it was (or reserves a new chunk). A class left with nothing starts small again.
  sc.chunks.swap(kept);
  if (sc.chunks.empty()) {
    sc.next_chunk_size = first_chunk(k);
    sc.grow_next = false;
  }
  return dropped;
}

}  // namespace reservoir::detail
