// The address-space count: every mapping the arena files make or give back goes through here and
// is counted, so default-sized containers can plan within what the process may still reserve
// (budget.cpp). It knows nothing of arenas, commits or the sources that hold parked space.
#include "address_space.hpp"

#include <atomic>

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

}  // namespace

namespace detail {

std::error_code reserve_mapping(std::size_t size, void** out, bool* open) noexcept {
  if (open != nullptr) {
    *open = false;
    if (g_open_chunks.load(std::memory_order_relaxed)) {
      const std::error_code ec = pal::reserve_open(size, out);
      *open = !ec;
      if (!ec) g_reserved.fetch_add(size, std::memory_order_relaxed);
      if (ec != std::errc::not_supported) return ec;
    }
  }
  const std::error_code ec = pal::reserve(size, out);
  if (!ec) g_reserved.fetch_add(size, std::memory_order_relaxed);
  return ec;
}

void release_mapping(void* mapping, std::size_t size) noexcept {
  (void)pal::release(mapping, size);
  g_reserved.fetch_sub(size, std::memory_order_relaxed);
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
