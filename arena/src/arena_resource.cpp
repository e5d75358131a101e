// ArenaResource: std::pmr::memory_resource over an Arena.
#include <reservoir/arena_resource.hpp>

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <reservoir/pal.hpp>

#if RESERVOIR_HAS_ARENA_RESOURCE

namespace reservoir {

ArenaResource::ArenaResource(std::size_t max_bytes, ArenaOptions options)
    : owned_(std::in_place, max_bytes, options), arena_(&*owned_) {}

void ArenaResource::release() noexcept {
  if (owned_) {
    (void)arena_->reset();
  } else if (arena_->size() >= start_) {
    (void)arena_->shrink(start_);  // cannot throw: start_ <= size()
  }
}

void ArenaResource::rewind(std::size_t mark) {
  if (mark < start_) {
    throw std::invalid_argument("reservoir::ArenaResource::rewind: mark " + std::to_string(mark) +
                                " is below the arena's length when the resource was made (" +
                                std::to_string(start_) + ")");
  }
  arena_->rewind(mark);
}

void* ArenaResource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (bytes == 0) bytes = 1;  // distinct pointers for distinct allocations
  // A refusal names the call the resource's users make (memory_resource::allocate).
  constexpr std::string_view kCall = "ArenaResource::allocate";
  // A precondition of memory_resource::allocate, checked: any power of two is served (past a
  // page by padding), so the arena's own bound on alignments is not the one to report.
  if (!std::has_single_bit(alignment)) {
    throw std::invalid_argument("reservoir::ArenaResource::allocate: alignment " +
                                std::to_string(alignment) + " is not a power of two");
  }
  try {
    if (alignment <= pal::page_size()) return arena_->allocate_for(kCall, bytes, alignment);
    // Over-aligned: the padding up to the alignment, then the block, which then ends at the
    // arena's end, so that deallocating it gives its bytes back as for any other block.
    const std::byte* end = arena_->base() + arena_->size();
    const std::size_t pad =
        static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(end)) & (alignment - 1);
    if (bytes > SIZE_MAX - pad) throw std::bad_alloc();
    return static_cast<std::byte*>(arena_->allocate_for(kCall, pad + bytes, 1)) + pad;
  } catch (const std::length_error&) {
    throw std::bad_alloc();  // the pmr contract: failure to allocate is bad_alloc
  }
}

void ArenaResource::do_deallocate(void* p, std::size_t bytes, std::size_t) {
  if (bytes == 0) bytes = 1;
  if (!arena_->contains(p, bytes)) return;  // first: subtracting a foreign pointer is undefined
  const auto offset = static_cast<std::size_t>(static_cast<std::byte*>(p) - arena_->base());
  if (offset + bytes == arena_->size()) arena_->rewind(offset);
}

}  // namespace reservoir

#endif  // RESERVOIR_HAS_ARENA_RESOURCE
