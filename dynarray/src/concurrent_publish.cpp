// ConcurrentDynArray's walk of published_ over the ready marks (size(), and blocks that finish
// out of order); the publishes themselves are inline in detail/concurrent_publish.hpp.
#include <reservoir/detail/concurrent_publish.hpp>

#include <algorithm>
#include <atomic>

namespace reservoir::detail {

// Moves published_ from p (a value it had) over the ready pieces that follow it, and returns the
// prefix found (at least p). Several threads may do it at once: the furthest wins.
ConcurrentCore::size_type ConcurrentCore::advance_published(size_type p) const noexcept {
  // Marks below capacity_ are committed, and those of unclaimed indices read 0.
  const size_type q = ready_end(p, capacity_.load(std::memory_order_acquire));
  if (q == p) return p;
  // published_ only grows, and every value it takes is a prefix of ready elements: move it to q
  // unless another thread has moved it as far already (a lost CAS means it moved: bounded).
  size_type current = p;
  while (current < q && !published_.compare_exchange_weak(current, q, std::memory_order_acq_rel,
                                                          std::memory_order_acquire)) {
  }
  return (std::max)(current, q);
}

}  // namespace reservoir::detail
