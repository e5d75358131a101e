// reservoir/concurrent_dynarray.hpp - ConcurrentDynArray<T>: contiguous, and appendable from many
// threads at once while others read, with no lock around reads.
//
// Because nothing ever moves, a reserve-and-commit array can hand out slots to many appending
// threads while readers index the part that is already there.
//
// Memory-ordering contract:
//   - emplace_back/push_back/append_range may be called from any number of threads concurrently.
//     Each call claims its slots (one slot, or a block of consecutive slots for append_range) with
//     one compare-and-swap on a counter (no lock), constructs the elements in place, and publishes
//     them. Only the thread that finds the committed memory exhausted takes a mutex to commit the
//     next step; the others wait for it only if they, too, need the new memory.
//   - size() is the length of the published prefix: every element below it is fully constructed,
//     and its construction happens-before any read by a thread that observed that size()
//     (acquire/release). size() never decreases. Readers never take a lock.
//   - Reading element i (operator[], at, published()) is safe for i < size() while appends go on.
//     Writing to a published element is the caller's business (like any shared object).
//   - Elements are published in index order. An element constructed early whose predecessor is
//     still being constructed becomes visible when the predecessor is done; any appending thread
//     advances the published prefix, so none waits for another.
//   - No publish point: no thread keeps claimed slots between calls, so the prefix is held back
//     only by appends in progress, never by a thread that stopped appending. Once every thread
//     that appended has returned from its last append, size() counts all of their elements.
//   - A full reservation (std::length_error) or a refused commit (OsAllocationError) is thrown to
//     the thread that hit it; no slot is claimed, so no hole appears and every published element
//     stays intact. append_range is all-or-nothing: a block that does not fit claims nothing.
//   - The value is constructed before a slot is claimed and moved into it (T must be nothrow move
//     constructible), so a throwing constructor claims nothing either; append_range builds a
//     block aside first unless constructing from its elements cannot throw.
//   - Default construction, moves, swaps and destruction are not concurrent operations: no other
//     thread may use the arrays involved meanwhile. A default-constructed or moved-from array has
//     no reservation and max_size() 0 (appends throw std::length_error); element addresses never
//     change, a move hands them to the destination.
// Memory: the elements plus one ready byte per element, both committed in the same steps.
// Cost: an append whose slot is next publishes with one CAS; one that finishes before its
// predecessor writes its ready byte and leaves it to be published with it. Appends from several
// threads share the claim counter's cache line, so many threads doing nothing but single appends
// contend on it (see the README's concurrent table); append_range pays that once per block.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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

  // Empty, with no reservation and max_size() == 0: every append throws std::length_error (the
  // try_ forms return std::nullopt) until a real array is move-assigned into it. Never throws.
  ConcurrentDynArray() noexcept = default;

  // Moving takes the reservation and the elements; the source is left as if default-constructed.
  // Moves, swaps and destruction are not concurrent operations: no other thread may use either
  // array meanwhile. Element addresses stay valid (they now belong to the destination).
  ConcurrentDynArray(ConcurrentDynArray&& other) noexcept { take(other); }
  ConcurrentDynArray& operator=(ConcurrentDynArray&& other) noexcept {
    if (this != &other) {
      destroy_all();
      take(other);
    }
    return *this;
  }
  friend void swap(ConcurrentDynArray& a, ConcurrentDynArray& b) noexcept {
    ConcurrentDynArray tmp(std::move(a));
    a = std::move(b);
    b = std::move(tmp);
  }
  ConcurrentDynArray(const ConcurrentDynArray&) = delete;
  ConcurrentDynArray& operator=(const ConcurrentDynArray&) = delete;

  ~ConcurrentDynArray() { destroy_all(); }

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

  // Appends every element of `values` as one block of consecutive indices claimed with a single
  // atomic operation (a producer with batches pays one claim per batch, not one per element), and
  // returns the block's first index; an empty range claims nothing and returns max_size(), never
  // a valid index. Thread-safe. All-or-nothing: when the block does not fit (std::length_error) or
  // the OS refuses to commit (OsAllocationError), nothing is added. When constructing T from an
  // element may throw, or the range can be walked only once, the values are first built aside,
  // so a throw claims nothing either.
  template <std::ranges::input_range R>
  requires std::constructible_from<T, std::ranges::range_reference_t<R>> size_type
  append_range(R&& values) {
    if constexpr (std::ranges::forward_range<R> &&
                  std::is_nothrow_constructible_v<T, std::ranges::range_reference_t<R>>) {
      // The length without std::ranges::distance (absent in libc++ before 16).
      size_type n = 0;
      if constexpr (std::ranges::sized_range<R>) {
        n = static_cast<size_type>(std::ranges::size(values));
      } else {
        for (auto it = std::ranges::begin(values); it != std::ranges::end(values); ++it)
          ++n;
      }
      return append_block(n, std::ranges::begin(values));
    } else {
      std::vector<T> aside;  // may throw: nothing claimed yet
      for (auto&& v : values)
        aside.emplace_back(std::forward<decltype(v)>(v));
      return append_block(aside.size(), std::make_move_iterator(aside.begin()));
    }
  }

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

  // Claims the next n (>= 1) consecutive slots with one CAS and returns the first, committing
  // more memory first if needed. Backs off briefly after a lost CAS, so that contending threads
  // stop invalidating the counter's cache line on every attempt.
  size_type claim(size_type n = 1) {
    for (;;) {
      size_type i = claimed_.load(std::memory_order_relaxed);
      unsigned spins = 1;
      for (;;) {
        const size_type cap = capacity_.load(std::memory_order_acquire);
        if (i > cap || n > cap - i) break;
        if (claimed_.compare_exchange_weak(i, i + n, std::memory_order_relaxed)) return i;
        for (unsigned k = 0; k < spins; ++k)
          std::atomic_signal_fence(std::memory_order_seq_cst);  // a compiler-only pause
        spins = (std::min)(spins * 2, 64u);
      }
      grow(i, n);  // throws, or makes capacity_ >= i + n (or another thread did)
    }
  }
  std::optional<size_type> try_claim() noexcept {
    try {
      return claim();
    } catch (...) {  // length_error or OsAllocationError: both are "no"
      return std::nullopt;
    }
  }

  // Commits memory for slots [i, i + n): once, whichever thread gets here first.
  void grow(size_type i, size_type n) {
    std::lock_guard lock(commit_mutex_);
    const size_type cap = capacity_.load(std::memory_order_relaxed);
    if (i <= cap && n <= cap - i) return;  // another thread did it
    if (i > max_size_ || n > max_size_ - i) {
      throw std::length_error("reservoir::ConcurrentDynArray: full at max_size() " +
                              std::to_string(max_size_));
    }
    // Both arenas reach their step ends; the capacity is what both can hold. Ready bytes come
    // from fresh or decommitted memory, so they read as zero (not ready).
    data_arena_.reserve((i + n) * sizeof(T));  // strong guarantee on failure
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

  // Claims `count` slots and constructs them from *it, *++it, ... (which must not throw).
  template <class It>
  size_type append_block(size_type count, It it) {
    if (count == 0) return max_size_;
    const size_type first = claim(count);
    for (T *out = data_ + first, *end = out + count; out != end; ++out, ++it)
      std::construct_at(out, *it);
    publish(first, count);
    return first;
  }

  void destroy_all() noexcept {
    if (data_ != nullptr) std::destroy(data_, data_ + published_.load(std::memory_order_acquire));
  }
  // Takes other's state, leaving other empty as if default-constructed (not concurrent).
  void take(ConcurrentDynArray& other) noexcept {
    max_size_ = std::exchange(other.max_size_, 0);
    data_arena_ = std::move(other.data_arena_);
    ready_arena_ = std::move(other.ready_arena_);
    data_ = std::exchange(other.data_, nullptr);
    ready_ = std::exchange(other.ready_, nullptr);
    claimed_.store(other.claimed_.exchange(0, std::memory_order_relaxed),
                   std::memory_order_relaxed);
    published_.store(other.published_.exchange(0, std::memory_order_relaxed),
                     std::memory_order_relaxed);
    capacity_.store(other.capacity_.exchange(0, std::memory_order_relaxed),
                    std::memory_order_relaxed);
  }

  // Publishes the constructed slots [i, i + n).
  void publish(size_type i, size_type n = 1) noexcept {
    // 1. The common case: slot i is next, so publish the block directly; its ready bytes are never
    //    needed.
    size_type p = i;
    if (published_.compare_exchange_strong(p, i + n, std::memory_order_seq_cst)) {
      p = i + n;
    } else {
      // 2. A predecessor is still constructing: leave ready marks for whoever publishes it. Every
      //    mark is stored before published_ is read again, so a publisher that stopped at any
      //    slot of this block (having read its mark as 0) is seen below, and this thread goes on.
      for (size_type k = i; k < i + n; ++k)
        ready(k).store(1, std::memory_order_seq_cst);
      p = published_.load(std::memory_order_seq_cst);
    }
    // 3. Advance over every consecutive ready slot. seq_cst on the flags and the counter: of two
    //    threads finishing neighbouring slots, at least one sees the other's store.
    while (p < claimed_.load(std::memory_order_seq_cst) &&
           ready(p).load(std::memory_order_seq_cst)) {
      if (published_.compare_exchange_weak(p, p + 1, std::memory_order_seq_cst)) ++p;
    }
  }

  size_type max_size_ = 0;
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
