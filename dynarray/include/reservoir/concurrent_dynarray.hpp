// reservoir/concurrent_dynarray.hpp - ConcurrentDynArray<T>: contiguous, and appendable from many
// threads at once while others read, with no lock around reads.
//
// Because nothing ever moves, a reserve-and-commit array can hand out slots to many appending
// threads while readers index the part that is already there.
//
// Memory-ordering contract:
//   - emplace_back/push_back may be called from any number of threads concurrently. Each claims a
//     slot with one compare-and-swap on a counter (no lock), constructs the element in place, and
//     publishes it. Only the thread that finds the committed memory exhausted takes a mutex to
//     commit the next step; the others wait for it only if they, too, need the new memory.
//   - size() is the length of the published prefix: every element below it is fully constructed,
//     and its construction happens-before any read by a thread that observed that size()
//     (acquire/release). size() never decreases.
//   - Reading element i (operator[], at, published()) is safe for i < size() while appends go on.
//     Writing to a published element is the caller's business (like any shared object).
//   - Elements are published in index order. An element constructed early whose predecessor is
//     still being constructed becomes visible when the predecessor is done; any appending thread
//     advances the published prefix, so none waits for another.
//   - A full reservation (std::length_error) or a refused commit (OsAllocationError) is thrown to
//     the thread that hit it; no slot is claimed, so no hole appears and every published element
//     stays intact.
//   - The value is constructed before a slot is claimed and moved into it (T must be nothrow move
//     constructible), so a throwing constructor claims nothing either.
//   - Destruction, clear-like operations and moves are not concurrent operations: the array is
//     neither movable nor copyable, and must outlive every thread using it.
// Memory: the elements plus one ready byte per element, both committed in the same steps.
// Cost: an append whose slot is next publishes with one CAS; one that finishes before its
// predecessor writes its ready byte and leaves it to be published with it. Appends from several
// threads share the claim counter's cache line, so many threads doing nothing but append contend
// on it (see the README's concurrent table); the gain is that readers never wait.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <reservoir/arena.hpp>
#include <reservoir/max_size.hpp>

namespace reservoir {

// The counters are alignas(64) so that each has its own cache line; MSVC warns (C4324) that the
// class is padded for it, which is the point.
#if defined(_MSC_VER)
#pragma warning(push)
#pragma warning(disable : 4324)
#endif
template <class T>
class ConcurrentDynArray {
  static_assert(std::is_object_v<T> && !std::is_const_v<T>, "a non-const object type");
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "ConcurrentDynArray<T> moves the new value into its slot after claiming it: T "
                "must be nothrow move constructible");
  static_assert(alignof(T) <= 4096, "elements are aligned to at most 4096 bytes");
  static_assert(sizeof(std::atomic<unsigned char>) == 1 &&
                    std::atomic<unsigned char>::is_always_lock_free,
                "ready flags are one lock-free byte each");

 public:
  using value_type = T;
  using size_type = std::size_t;

  // Reserves room for exactly `limit.count` elements (max_bytes: as many whole elements as fit in
  // `limit.bytes`) and their ready bytes. Errors as DynArray's.
  explicit ConcurrentDynArray(max_elements limit, ArenaOptions options = {})
      : max_size_(checked(limit.count)),
        data_arena_(max_size_ * sizeof(T), options),
        ready_arena_(max_size_, fresh(options)) {
    data_ = reinterpret_cast<T*>(data_arena_.base());
    ready_ = reinterpret_cast<std::atomic<unsigned char>*>(ready_arena_.base());
  }
  explicit ConcurrentDynArray(max_bytes limit, ArenaOptions options = {})
      : ConcurrentDynArray(max_elements(limit.bytes / sizeof(T)), options) {}

  ConcurrentDynArray(const ConcurrentDynArray&) = delete;
  ConcurrentDynArray& operator=(const ConcurrentDynArray&) = delete;

  ~ConcurrentDynArray() { std::destroy(data_, data_ + published_.load(std::memory_order_acquire)); }

  // Appends; returns the new element's index. Thread-safe. Throws std::length_error when the
  // reservation is full and OsAllocationError when the OS refuses to commit; nothing is added then.
  template <class... Args>
  size_type emplace_back(Args&&... args) {
    T value(std::forward<Args>(args)...);  // may throw: nothing claimed yet
    const size_type i = claim();           // may throw: nothing claimed
    std::construct_at(data_ + i, std::move(value));
    publish(i);
    return i;
  }
  size_type push_back(const T& value) { return emplace_back(value); }
  size_type push_back(T&& value) { return emplace_back(std::move(value)); }

  // Claims the next slot i and constructs make(i) in it: for values that depend on their own
  // index (a memo table: element i describes the number i). make must not throw (it runs after
  // the claim, so a throw would leave a hole); it may read any published element. Later slots
  // are published only after this one, so a slow make delays visibility, never correctness.
  template <class Make>
  size_type emplace_back_with(Make&& make) {
    static_assert(std::is_nothrow_invocable_r_v<T, Make&, size_type>,
                  "emplace_back_with needs a noexcept make(index) returning T");
    const size_type i = claim();
    std::construct_at(data_ + i, make(i));
    publish(i);
    return i;
  }

  // As emplace_back, but std::nullopt instead of throwing for capacity or OS reasons.
  template <class... Args>
  std::optional<size_type> try_emplace_back(Args&&... args) {
    T value(std::forward<Args>(args)...);
    std::optional<size_type> i = try_claim();
    if (!i) return std::nullopt;
    std::construct_at(data_ + *i, std::move(value));
    publish(*i);
    return i;
  }

  // The published prefix's length; never decreases.
  size_type size() const noexcept { return published_.load(std::memory_order_acquire); }
  bool empty() const noexcept { return size() == 0; }
  size_type max_size() const noexcept { return max_size_; }
  // Elements that fit in committed memory.
  size_type capacity() const noexcept { return capacity_.load(std::memory_order_acquire); }

  // i < size() (checked in debug builds by at()).
  const T& operator[](size_type i) const noexcept { return data_[i]; }
  T& operator[](size_type i) noexcept { return data_[i]; }
  const T& at(size_type i) const {
    if (i >= size()) {
      throw std::out_of_range("reservoir::ConcurrentDynArray::at: index " + std::to_string(i) +
                              " is not published (size " + std::to_string(size()) + ")");
    }
    return data_[i];
  }
  // The published prefix as it is now; later appends do not invalidate it.
  std::span<const T> published() const noexcept { return {data_, size()}; }
  const T* data() const noexcept { return data_; }

 private:
  // Ready bytes must start at zero: never take their reservation from the cache (whose first
  // step holds old bytes), so every byte is fresh or decommitted memory.
  static ArenaOptions fresh(ArenaOptions o) noexcept {
    o.reuse_reservation = false;
    return o;
  }
  std::atomic<unsigned char>& ready(size_type i) const noexcept { return ready_[i]; }

  static size_type checked(size_type max_size) {
    if (max_size == 0) throw std::invalid_argument("reservoir::ConcurrentDynArray: max_size 0");
    if (max_size > static_cast<size_type>(-1) / sizeof(T)) {
      throw std::length_error("reservoir::ConcurrentDynArray: max_size overflows");
    }
    return max_size;
  }

  // Claims the next slot, committing more memory first if needed.
  size_type claim() {
    for (;;) {
      size_type i = claimed_.load(std::memory_order_relaxed);
      while (i < capacity_.load(std::memory_order_acquire)) {
        if (claimed_.compare_exchange_weak(i, i + 1, std::memory_order_relaxed)) return i;
      }
      grow(i);  // throws, or makes capacity_ > i (or another thread did)
    }
  }
  std::optional<size_type> try_claim() noexcept {
    try {
      return claim();
    } catch (...) {  // length_error or OsAllocationError: both are "no"
      return std::nullopt;
    }
  }

  // Commits memory for index i and beyond: once, whichever thread gets here first.
  void grow(size_type i) {
    std::lock_guard lock(commit_mutex_);
    if (capacity_.load(std::memory_order_relaxed) > i) return;  // another thread did it
    if (i >= max_size_) {
      throw std::length_error("reservoir::ConcurrentDynArray: full at max_size() " +
                              std::to_string(max_size_));
    }
    // Both arenas reach their step ends; the capacity is what both can hold. Ready bytes come
    // from fresh or decommitted memory, so they read as zero (not ready).
    data_arena_.reserve((i + 1) * sizeof(T));  // strong guarantee on failure
    const size_type data_cap = (std::min)(data_arena_.committed() / sizeof(T), max_size_);
    const size_type old_flags = (std::min)(ready_arena_.committed(), max_size_);
    ready_arena_.reserve(data_cap);  // on failure data_arena_ keeps a step: harmless, unclaimed
    const size_type flags = (std::min)(ready_arena_.committed(), max_size_);
    // Begin the new flags' lifetime (as 0: not ready). No thread reads a flag at or above the
    // old capacity before the release store below publishes it.
    for (size_type k = old_flags; k < flags; ++k)
      std::construct_at(ready_ + k, static_cast<unsigned char>(0));
    capacity_.store((std::min)(data_cap, flags), std::memory_order_release);
  }

  void publish(size_type i) noexcept {
    // 1. The common case: slot i is next, so publish it directly; its ready byte is never needed.
    size_type p = i;
    if (published_.compare_exchange_strong(p, i + 1, std::memory_order_seq_cst)) {
      p = i + 1;
    } else {
      // 2. A predecessor is still constructing: leave a ready mark for whoever publishes it.
      ready(i).store(1, std::memory_order_seq_cst);
      p = published_.load(std::memory_order_seq_cst);
    }
    // 3. Advance over every consecutive ready slot. seq_cst on the flags and the counter: of two
    //    threads finishing neighbouring slots, at least one sees the other's store.
    while (p < claimed_.load(std::memory_order_seq_cst) &&
           ready(p).load(std::memory_order_seq_cst)) {
      if (published_.compare_exchange_weak(p, p + 1, std::memory_order_seq_cst)) ++p;
    }
  }

  const size_type max_size_;
  Arena data_arena_;
  Arena ready_arena_;
  T* data_ = nullptr;
  std::atomic<unsigned char>* ready_ = nullptr;  // one flag per slot (constructed as committed)
  // Each counter on its own cache line: appenders hammer claimed_ and published_, readers poll
  // published_, and capacity_ is read-mostly.
  alignas(64) std::atomic<size_type> claimed_{0};    // slots handed out
  alignas(64) std::atomic<size_type> published_{0};  // prefix that is constructed and visible
  alignas(64) std::atomic<size_type> capacity_{0};   // slots backed by committed memory
  alignas(64) std::mutex commit_mutex_;
};
#if defined(_MSC_VER)
#pragma warning(pop)
#endif

}  // namespace reservoir
