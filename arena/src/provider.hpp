// The reservation provider (provider.cpp): the one face Arena sees for where reservations come
// from and go. acquire() tries the sources in order (sub-page runs, page pools, parked
// reservations, a fresh mapping), frees parked reservations and tries once more when address
// space runs out; release() gives a reservation back to the source it came from. The provider
// also owns the thread registry's use and every fork handler.
#pragma once

#include <cstddef>
#include <system_error>

#include <reservoir/arena.hpp>

namespace reservoir::detail {

// What an arena asks for, as Arena's plan() laid it out.
struct ReservationRequest {
  std::size_t max_bytes = 0;   // as the caller asked (a sub-page slot holds at least this)
  std::size_t usable = 0;      // max_bytes rounded up to whole pages
  std::size_t granule = 0;     // the first commit step
  std::size_t guard = 0;       // a guard page's size, or 0
  std::size_t base_align = 0;  // the base is a multiple of this
  std::size_t mapping = 0;     // the size of a mapping of its own: guards, alignment slack
  ArenaOptions options;        // as plan() rounded them
};

// Where a reservation came from, which says where it goes back.
enum class Source : unsigned char {
  sub_page_run,  // a sub-page slot: all of it committed, no guard pages
  page_pool,     // a pool slot: its mapping is the pool's chunk
  mapping,       // a mapping of its own (fresh, or parked before)
};

struct Reservation {
  void* mapping = nullptr;       // the mapping's start (a slot: its base)
  std::size_t mapping_size = 0;  // Source::mapping only
  std::byte* base = nullptr;     // the first usable byte
  std::size_t reserved = 0;      // usable bytes from base
  std::size_t committed = 0;     // already committed from base
  Source source = Source::mapping;
  bool open = false;     // a pool slot in an open reservation (read-write already)
  ArenaOptions options;  // in force: a sub-page slot has no guard pages
  bool guarded = false;  // a pool slot in a guarded chunk: a guard marker at base + committed
};

// A reservation for `request`, or the OS's error (the pools' small chunk, or the mapping, refused
// even after parked reservations were freed).
std::error_code acquire(const ReservationRequest& request, Reservation* out) noexcept;
// Gives `r` back: a slot to its pool (or the thread's cache), a mapping to the parked list
// (trimmed to what parking keeps) or to the OS. `r.committed` is what is committed now.
void release(const Reservation& r) noexcept;

}  // namespace reservoir::detail
