// reservoir/arena_resource.hpp - ArenaResource: a std::pmr::memory_resource over an Arena.
//
// Bump allocation with correct alignment from one reservation that never moves, so std::pmr
// containers (vector, string, unordered_map, ...) can live in an arena. Deallocating the most
// recent block gives its bytes back at once; everything else is freed together by rewind(mark)
// (keeping the memory committed: the scratch pattern) or release() (decommitting it).
// Not thread-safe (like std::pmr::monotonic_buffer_resource).
//
// Exists where the standard library has <memory_resource> (__cpp_lib_memory_resource: libstdc++
// 9, MSVC 19.13, libc++ 16) and, on macOS, the deployment target is 14.0 or later (Apple ships
// std::pmr in the libc++ of macOS 14 on). The deployment target is checked here as well because a
// libc++ built without Apple's availability annotations (Zig's, for one) defines the feature
// macro at every target while the library it links may lack std::pmr.
// RESERVOIR_HAS_ARENA_RESOURCE says whether it exists. Where it does not, this header declares
// only a placeholder ArenaResource whose construction fails to compile with the reason, so
// <reservoir/reservoir.hpp> works everywhere and a use says what is missing.
#pragma once

#include <version>

#if defined(__cpp_lib_memory_resource) &&                       \
    !(defined(__ENVIRONMENT_MAC_OS_X_VERSION_MIN_REQUIRED__) && \
      __ENVIRONMENT_MAC_OS_X_VERSION_MIN_REQUIRED__ < 140000)
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
  // Owns a new arena of max_bytes (same errors as Arena's constructor: std::invalid_argument for
  // 0, std::length_error past the address space, OsAllocationError when the OS refuses).
  explicit ArenaResource(std::size_t max_bytes, ArenaOptions options = {});
  // Uses an arena the caller owns and keeps alive for the resource's lifetime; the resource
  // allocates at the arena's end and never frees what was there before it (its length now:
  // neither release() nor rewind() goes below it).
  explicit ArenaResource(Arena& arena) noexcept : arena_(&arena), start_(arena.size()) {}

  // Not copyable, not movable: containers hold its address.
  ArenaResource(const ArenaResource&) = delete;
  ArenaResource& operator=(const ArenaResource&) = delete;

  // Frees every block at once and decommits the memory (Arena::reset; a caller's arena is
  // shrunk back to the length it had when the resource was made, Arena::shrink): the next
  // allocations commit again. Containers using the resource must be gone or empty. An OS refusal
  // to decommit is ignored (nothing is lost; arena().committed() still tells the truth).
  void release() noexcept;

  // The scratch pattern through pmr (Arena::mark/rewind): mark() is the arena's length now;
  // rewind(mark) frees every block allocated since, at once, and keeps their memory committed,
  // so the next batch reuses the same pages with no system call. Containers holding blocks
  // allocated after the mark must be destroyed before the rewind: their blocks are gone with it.
  // mark > arena().size() (a mark from before a release()), or below the length a caller's arena
  // had when the resource was made, is std::invalid_argument, nothing changed.
  std::size_t mark() const noexcept { return arena_->mark(); }
  void rewind(std::size_t mark);

  // A scope that rewinds the resource to where it was when the scope began, when it ends
  // (normally or by an exception): `{ auto scope = resource.scope(); ... }`. If the arena is then
  // shorter than that mark (a release() inside the scope), it is left as it is.
  class Scope {
   public:
    explicit Scope(ArenaResource& resource) noexcept
        : resource_(&resource), mark_(resource.mark()) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (mark_ <= resource_->arena().size() && mark_ >= resource_->start_) {
        resource_->rewind(mark_);
      }
    }
    // The length the scope rewinds to.
    std::size_t mark() const noexcept { return mark_; }

   private:
    ArenaResource* resource_;
    std::size_t mark_;
  };
  [[nodiscard]] Scope scope() noexcept { return Scope(*this); }

  // The arena underneath: the owned one, or the caller's.
  Arena& arena() noexcept { return *arena_; }
  const Arena& arena() const noexcept { return *arena_; }

 protected:
  // Throws std::bad_alloc when the arena is full (std::length_error inside) and
  // OsAllocationError (a std::bad_alloc) when the OS refuses to commit. Any power-of-two
  // alignment works; above the page size it costs up to `alignment` extra bytes. Any other
  // alignment is std::invalid_argument; nothing is allocated then.
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  // Reclaims the block if it is the last one allocated; otherwise a no-op until release().
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

 private:
  std::optional<Arena> owned_;
  Arena* arena_;
  std::size_t start_ = 0;  // the caller's arena's length when the resource was made (else 0)
};

}  // namespace reservoir

#else  // !RESERVOIR_HAS_ARENA_RESOURCE

namespace reservoir {

namespace detail {
template <class...>
inline constexpr bool kArenaResourceAvailable = false;
}  // namespace detail

// The placeholder: constructing one (with any arguments) fails to compile with the reason.
class ArenaResource {
 public:
  template <class... Args>
  explicit ArenaResource(Args&&...) {
    static_assert(detail::kArenaResourceAvailable<Args...>,
                  "reservoir::ArenaResource needs std::pmr::memory_resource, which this standard "
                  "library or deployment target does not provide: on macOS, build with a "
                  "deployment target of 14.0 or later (CMAKE_OSX_DEPLOYMENT_TARGET=14.0, "
                  "-mmacosx-version-min=14.0); elsewhere, libc++ 16 or later. "
                  "RESERVOIR_HAS_ARENA_RESOURCE is 0 here.");
  }
};

}  // namespace reservoir

#endif  // RESERVOIR_HAS_ARENA_RESOURCE
