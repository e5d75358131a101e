// ConcurrentDynArray's core, out of line: its two reservations (elements and ready marks), moves,
// try_claim. The concerns' own files are listed in detail/concurrent_core.hpp.
#include <reservoir/detail/concurrent_core.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <reservoir/detail/alignment.hpp>
#include <reservoir/detail/process_identity.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {

namespace {

// Ready marks must start at zero: never take their reservation from the cache (whose first step
// holds old bytes), so every byte is fresh or decommitted memory, which the OS fills with zeros.
// Their steps are populated when commit_locked asks for it (once blocks finish out of order), so
// that an appender writing a mark takes no page fault: prefault on.
ArenaOptions fresh(ArenaOptions o) noexcept {
  o.reuse_reservation = false;
  o.prefault = true;
  return o;
}

// The data arena is page-granular: its commits are published to readers step by step, and its
// element alignment may exceed a sub-page slot's.
ArenaOptions page_granular(ArenaOptions o) noexcept {
  o.sub_page_slot = false;
  return o;
}

// The bytes to reserve for max_size elements whose first is aligned to `alignment`.
// The messages name `call`, the constructor the user called.
std::size_t data_bytes(std::size_t max_size, std::size_t element_size, std::size_t alignment,
                       const char* call) {
  const std::string prefix = "reservoir::" + std::string(call) + ": ";
  if (max_size == 0) {
    throw std::invalid_argument(prefix + "max_elements must be greater than 0");
  }
  const std::size_t slack = alignment > kMinBaseAlignment ? alignment - kMinBaseAlignment : 0;
  if (max_size > (static_cast<std::size_t>(-1) - slack) / element_size) {
    throw std::length_error(prefix + std::to_string(max_size) + " elements of " +
                            std::to_string(element_size) + " bytes overflow the address space");
  }
  if (max_size > (std::uint64_t{1} << 47)) {  // the claims count in 48 bits (with headroom)
    throw std::length_error(prefix + std::to_string(max_size) +
                            " elements exceed the 2^47 supported");
  }
  return max_size * element_size + slack;
}

}  // namespace

ConcurrentCore::ConcurrentCore(size_type max_size, size_type element_size, size_type alignment,
                               ArenaOptions options, const char* call)
    : data_arena_(detail::make_arena(data_bytes(max_size, element_size, alignment, call),
                                     page_granular(options), call)),
      ready_arena_(detail::make_arena(max_size, fresh(options), call)),
      max_size_(max_size) {
  ready_ = reinterpret_cast<unsigned char*>(ready_arena_.base());
  const auto base = reinterpret_cast<std::uintptr_t>(data_arena_.base());
  data_offset_ =
      static_cast<std::uint32_t>(alignment > kMinBaseAlignment ? -base & (alignment - 1) : 0);
  if (pal::process_barrier_supported()) {
    mode_.store(kSolo, std::memory_order_relaxed);
    waits_sleep_ = true;
  }
  register_fork_count();
}

void ConcurrentCore::take(ConcurrentCore& other) noexcept {
  data_arena_ = std::move(other.data_arena_);
  ready_arena_ = std::move(other.ready_arena_);
  max_size_ = std::exchange(other.max_size_, 0);
  ready_ = std::exchange(other.ready_, nullptr);
  data_offset_ = std::exchange(other.data_offset_, 0);
  solo_end_ = std::exchange(other.solo_end_, 0);
  waits_sleep_ = std::exchange(other.waits_sleep_, false);
  dropped_.store(other.dropped_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  solo_claimed_.store(other.solo_claimed_.exchange(0, std::memory_order_relaxed),
                      std::memory_order_relaxed);
  claimed_.store(other.claimed_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  published_.store(other.published_.exchange(0, std::memory_order_relaxed),
                   std::memory_order_relaxed);
  capacity_.store(other.capacity_.exchange(0, std::memory_order_relaxed),
                  std::memory_order_relaxed);
  out_of_order_.store(other.out_of_order_.exchange(false, std::memory_order_relaxed),
                      std::memory_order_relaxed);
  mode_.store(other.mode_.exchange(kShared, std::memory_order_relaxed), std::memory_order_relaxed);
  ahead_refused_at_.store(other.ahead_refused_at_.exchange(0, std::memory_order_relaxed),
                          std::memory_order_relaxed);
  owner_.store(other.owner_.exchange(nullptr, std::memory_order_relaxed),
               std::memory_order_relaxed);
  runner_.store(other.runner_.exchange(nullptr, std::memory_order_relaxed),
                std::memory_order_relaxed);
}

}  // namespace reservoir::detail
