// reservoir/arena_resource.hpp - ArenaResource: a std::pmr::memory_resource over an Arena.
//
// Bump allocation with correct alignment from one reservation that never moves, so std::pmr
// containers (vector, string, unordered_map, ...) can live in an arena. Deallocating the most
// recent block gives its bytes back at once; everything else is freed together by release().
// Not thread-safe (like std::pmr::monotonic_buffer_resource).
//
// Exists where the standard library has <memory_resource> (__cpp_lib_memory_resource: libstdc++
// 9, MSVC 19.13, libc++ 16; Apple's libc++ also needs a macOS 14 deployment target).
// RESERVOIR_HAS_ARENA_RESOURCE says whether it does; without it this header declares nothing, so
// <reservoir/reservoir.hpp> works everywhere.
#pragma once

#include <version>

#if defined(__cpp_lib_memory_resource)
#define RESERVOIR_HAS_ARENA_RESOURCE 1
#else
#define RESERVOIR_HAS_ARENA_RESOURCE 0
#endif

#if RESERVOIR_HAS_ARENA_RESOURCE

#include <cstddef>
#include <memory_resource>
#include <optional>

#include <reservoir/arena.hpp>

namespace reservoir {

class ArenaResource : public std::pmr::memory_resource {
 public:
  // Owns a new arena of max_bytes (same errors as Arena's constructor).
  explicit ArenaResource(std::size_t max_bytes, ArenaOptions options = {});
  // Uses an arena the caller owns and keeps alive.
  explicit ArenaResource(Arena& arena) noexcept : arena_(&arena) {}

  ArenaResource(const ArenaResource&) = delete;
  ArenaResource& operator=(const ArenaResource&) = delete;

  // Frees every block at once and decommits the memory (Arena::reset). Containers using the
  // resource must be gone or empty.
  void release() noexcept;

  Arena& arena() noexcept { return *arena_; }
  const Arena& arena() const noexcept { return *arena_; }

 protected:
  // Throws std::bad_alloc when the arena is full (std::length_error inside) and
  // OsAllocationError (a std::bad_alloc) when the OS refuses to commit. Any power-of-two
  // alignment works; above the page size it costs up to `alignment` extra bytes.
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  // Reclaims the block if it is the last one allocated; otherwise a no-op until release().
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

 private:
  std::optional<Arena> owned_;
  Arena* arena_;
};

}  // namespace reservoir

#endif  // RESERVOIR_HAS_ARENA_RESOURCE
