// ArenaResource: std::pmr::memory_resource over an Arena.
#include <reservoir/arena_resource.hpp>

#include <cstdint>

#include <reservoir/pal.hpp>

#if RESERVOIR_HAS_ARENA_RESOURCE

namespace reservoir {

ArenaResource::ArenaResource(std::size_t max_bytes, ArenaOptions options)
    : owned_(std::in_place, max_bytes, options), arena_(&*owned_) {}

void ArenaResource::release() noexcept {
  (void)arena_->reset();
}

void* ArenaResource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (bytes == 0) bytes = 1;  // distinct pointers for distinct allocations
  try {
    if (alignment <= pal::page_size()) return arena_->allocate(bytes, alignment);
    // Over-aligned: take alignment - 1 extra bytes and align inside them.
    if (bytes > SIZE_MAX - alignment) throw std::bad_alloc();
    auto* raw = static_cast<std::byte*>(arena_->allocate(bytes + alignment - 1, 1));
    const std::size_t pad =
        static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(raw)) & (alignment - 1);
    return raw + pad;
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
