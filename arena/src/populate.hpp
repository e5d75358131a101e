// Backing pages with RAM (populate.cpp): the one sequence every commit step and every sub-page run
// takes: charge against the memory limit, commit, populate. It calls memory_limit.hpp and pal.
#pragma once

#include <cstddef>
#include <system_error>

namespace reservoir::detail {

// Commits [start, start+len) (unless `open`: the range is read-write already), after charging
// `charge` bytes of it against the memory limit, and checking that the machine can back
// `must_back` of it, when `check_limit` says so. On
// success *charged is what was taken, to be settled once the pages are populated (or refunded,
// with `must_back` if `check_limit`, if the caller gives up); on failure nothing is charged (of
// the limit or the machine) or committed and the Refusal or OS error is returned.
std::error_code charge_and_commit(std::byte* start, std::size_t len, std::size_t charge,
                                  std::size_t must_back, bool check_limit, bool open,
                                  std::size_t* charged) noexcept;

// Backs [start, start+bytes) (committed, holding nothing live) with RAM now: where the growth
// policy says populate_by_call (growth.hpp: from kLeastPopulateCall up) one populate call (Linux
// MADV_POPULATE_WRITE; smaller ranges cost fewer page faults than the call), then a store of 0 per
// 4 KiB page, the only way elsewhere. After a populate call the stores cost a store each, but on a
// VM whose host takes back free guest pages the call maps pages without touching them, and the
// host's fault would otherwise land on the append that first writes each page. Storing 0 is safe:
// the range holds no live data and reads as zero (a read-modify-write would fault twice where
// nothing was populated: a read maps the shared zero page first). The OS's refusal of the populate
// call (ENOMEM) is returned, and then nothing is stored: the caller undoes its commit rather than
// let a first touch meet the OOM killer.
std::error_code populate(std::byte* start, std::size_t bytes) noexcept;

// Moves a guarded slot's guard marker (address_space.hpp's ChunkKind::guarded) from the page at
// base + from to the page at base + to, as its committed prefix goes from `from` to `to` bytes:
// growing, the old page is lifted first and the new one installed (refused: the old one is put
// back); shrinking, the new one is installed first (its page's contents go) and the old one
// lifted (refused: the new one is lifted again). On failure the guard is where it was and the OS's
// error is returned. A page at or past base + slot_bytes (a full slot's end page is the page below
// the next slot, or past the chunk's last one) is never lifted: it stays a guard.
std::error_code move_guard(std::byte* base, std::size_t from, std::size_t to,
                           std::size_t slot_bytes) noexcept;

}  // namespace reservoir::detail
