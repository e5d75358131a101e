// reservoir/concurrent_dynarray.hpp - ConcurrentDynArray<T>: contiguous, and appendable from many
// threads at once while others read, with no lock around reads.
//
// Because nothing ever moves, a reserve-and-commit array can hand out indices to many appending
// threads while readers index the part that is already there.
//
// Two ways to append:
//   - Through the array: push_back/emplace_back/append_range/emplace_back_with/try_emplace_back,
//     from any number of threads. Each call claims its indices on a shared counter (with plain
//     stores while one thread appends alone: solo mode, below), constructs the elements in place
//     and publishes them with plain stores before it returns. Simple, and the new element's index
//     is known at once. One index is claimed with one fetch_add, which never fails however many
//     threads claim at once (no retry); the capacity is checked after it, and a claim that finds
//     no committed index commits or waits for the commit (below). A block of consecutive indices
//     (append_range) is claimed with one compare-and-swap, checked against the capacity first; a
//     thread that loses it backs off for a microsecond or more before trying again.
//   - Through a Writer, one per thread (`auto w = arr.writer(); w.push_back(x);`): the writer
//     gathers elements in its own buffer without touching memory that other threads use, and
//     appends them as one block of consecutive indices, claimed with one atomic operation, when
//     the buffer is full, at w.flush() and when w is destroyed. The buffer starts at 16 elements
//     and doubles at each full flush up to 16 KiB worth of elements, so a writer that appends a
//     few elements holds little, and one that keeps appending pays one claim per 16 KiB.
// Memory-ordering contract:
//   - size() is the length of the published prefix: every element below it is fully constructed,
//     and its construction happens-before any read by a thread that observed that size()
//     (acquire/release). size() never decreases. Readers never take a lock.
//   - Reading element i (operator[], at, published()) is safe for i < size() while appends go on;
//     try_get(i) also finds elements published past the prefix (marked ready, below), with the
//     same happens-before. Writing to a published element is the caller's business (like any
//     shared object).
//   - Elements are published in index order. A block constructed early whose predecessor is still
//     being constructed becomes visible when the predecessor is done: size() itself extends the
//     published prefix over the blocks marked ready, so no appending thread hands the prefix to
//     another or waits for one (but once, when solo mode ends: see below), and a reader never
//     waits either (size() reads a few bytes past the prefix and may store what it found).
//   - Indices are claimed only when their elements are about to be constructed, never ahead (an
//     index claimed ahead and then left unfilled could not be returned once another thread
//     claimed after it, and would hold size() back for good). So the prefix is held back only
//     by appends in progress, never by a thread that stopped appending:
//       - an append through the array is counted by size() once it returns;
//       - an element appended through a Writer is in the array (has an index, is counted by
//         size(), is visible to readers) once that writer's flush() returns, or its destructor
//         ends; until then it is the writer's alone. The publish point is flush() or the
//         destructor; a writer that stops appending without either only hides its own buffer.
//     Once every thread that appended has returned from its last append through the array and
//     flushed or destroyed its writers, size() counts all of their elements.
//   - A full reservation (std::length_error), a refused commit (OsAllocationError) or a refused
//     barrier at the end of solo mode (std::system_error, below) is thrown to the thread that hit
//     it and claims nothing, so no hole appears and every published element stays intact.
//     append_range is all-or-nothing; a Writer's flush appends as many of its buffered elements
//     as fit, oldest first, keeps the rest and then throws std::length_error (on
//     OsAllocationError or std::system_error it keeps them all). A Writer destroyed with elements
//     its final flush cannot append never loses them silently: see ~Writer and dropped().
//   - A throwing constructor claims nothing: a constructor that cannot throw runs at the claimed
//     index; one that may throw runs before the claim, on a value built aside (on the stack, or on
//     the heap past kMaxStackValueBytes; for append_range, a block built aside) that is then moved
//     into place (T must be nothrow move constructible); a Writer constructs into its buffer,
//     which keeps what it held.
//   - Default construction, moves, swaps and destruction are not concurrent operations: no other
//     thread may use the arrays involved meanwhile, and no Writer may be alive for them. A
//     default-constructed or moved-from array has no reservation and max_size() 0 (appends throw
//     std::length_error); element addresses never change, a move hands them to the destination.
//   - Solo mode: while only one thread (the owner) has appended, its claims and publishes are
//     plain loads and stores. The first append from another thread ends it for good with one
//     process-wide barrier (Linux membarrier; elsewhere every append is shared from the start)
//     and waits for a claim or publish of the owner in progress, never for a construction; a
//     refused barrier is std::system_error and adds nothing. These waits, and an append's wait
//     for another thread's commit (asleep in the OS), are the one place where an append depends
//     on another thread being scheduled. A child forked meanwhile waits for no thread of its
//     parent. The whole contract, fork cases included: docs/design.md, "Solo mode, commits and
//     fork: the contract".
// Memory: the elements plus one ready byte per element, committed as the elements are; the ready
// bytes' pages stay untouched until a block first finishes out of order (never while one thread
// appends alone, unless it appends from inside one of its own constructions), after which each
// new commit of them is prefaulted. A block of append_with that finishes out of order stores a
// byte per element, other blocks one per power-of-two piece.
// Cost: in solo mode, an append is a few plain loads and stores around the construction. Once
// shared, a one-element append claims with one fetch_add (after a bounded spin of up to 1024 CPU
// pauses if another thread cut into its streak and holds the turn: pacing, so that streaks form), a
// block with one CAS; either, when it is next, publishes with a plain store of published_,
// otherwise it marks itself ready with one byte per power-of-two piece of it (at most 64) for
// size() to find. Appends through the array share the claim counter's cache line once per call; a
// Writer touches shared lines once per buffer. A refused commit or a one-index claim past
// max_size() closes the claims for a moment: the one-index claims at or past the committed capacity
// are undone (each throws what the refusal was) and the counter goes back to the capacity once the
// last of them has returned, so no index below a filled one stays empty; a claim made meanwhile
// throws the same error and adds nothing. size() is two loads and a byte load when nothing finished
// out of order since the last call, otherwise one byte load per ready piece it passes. Each
// publish also loads one count on the line of its own store, not 0 only while a thread sleeps in
// wait_for_size (the publish then wakes those whose count it reached: one system call each).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <reservoir/arena.hpp>
#include <reservoir/detail/alignment.hpp>
#include <reservoir/detail/concurrent_claim.hpp>
#include <reservoir/detail/concurrent_core.hpp>
#include <reservoir/detail/concurrent_publish.hpp>
#include <reservoir/detail/concurrent_solo.hpp>
#include <reservoir/max_size.hpp>

namespace reservoir {

// What a ConcurrentDynArray::Writer does at its end with buffered elements that its final flush
// cannot append (the array is full, or the OS refuses memory or the barrier) and that no flush()
// had reported by throwing. Chosen per writer (ConcurrentDynArray::writer()), decided inline in
// the user's own build, the same in every build type.
enum class WriterLoss : unsigned char {
  // The default: print to stderr which array (its address), how many elements and why, then
  // std::abort(). A loss the program was never told of is a bug, stopped as a failed check is.
  abort,
  // Destroy them and count them in the array's dropped(); the program checks dropped() itself.
  count,
};

// ConcurrentCore is padded to whole cache lines; MSVC warns (C4324) that a class holding it is
// padded too, which is the point.
#if defined(_MSC_VER)
#pragma warning(push)
#pragma warning(disable : 4324)
#endif
template <class T>
class ConcurrentDynArray {
  static_assert(std::is_object_v<T> && !std::is_const_v<T>, "a non-const object type");
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "ConcurrentDynArray<T> moves the new value into place after claiming its index: T "
                "must be nothrow move constructible");
  static_assert(alignof(T) <= detail::kMaxElementAlignment,
                "ConcurrentDynArray<T> supports element alignments up to 2 MiB "
                "(detail/alignment.hpp)");
  static_assert(detail::kByteAtomicsLockFree, "ready marks are one lock-free byte each");

 public:
  using value_type = T;
  using size_type = std::size_t;

  // Reserves room for exactly `limit.count` elements (max_bytes: as many whole elements as fit in
  // `limit.bytes`) and their ready bytes. Errors as DynArray's.
  explicit ConcurrentDynArray(max_elements limit, ArenaOptions options = {})
      : core_(limit.count, sizeof(T), alignof(T), options, "ConcurrentDynArray(max_elements)") {}
  explicit ConcurrentDynArray(max_bytes limit, ArenaOptions options = {})
      : core_(elements_in(limit), sizeof(T), alignof(T), options, "ConcurrentDynArray(max_bytes)") {
  }

  // Empty, with no reservation and max_size() == 0: every append throws std::length_error (the
  // try_ forms return std::nullopt) until a real array is move-assigned into it. Never throws.
  ConcurrentDynArray() noexcept = default;

  // Moving takes the reservation and the elements; the source is left as if default-constructed.
  // Moves, swaps and destruction are not concurrent operations: no other thread may use either
  // array meanwhile. Element addresses stay valid (they now belong to the destination).
  ConcurrentDynArray(ConcurrentDynArray&& other) noexcept { core_.take(other.core_); }
  ConcurrentDynArray& operator=(ConcurrentDynArray&& other) noexcept {
    if (this != std::addressof(other)) {
      destroy_all();
      core_.take(other.core_);
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
  // reservation is full, OsAllocationError when the OS refuses to commit, std::system_error when
  // it refuses the barrier that ends solo mode; nothing is added then.
  // The element is constructed in place when that cannot throw; otherwise it is built first
  // (on the stack, or on the heap when larger than kMaxStackValueBytes) and moved in, so a throw
  // claims nothing.
  template <class... Args>
  size_type emplace_back(Args&&... args) {
    if constexpr (std::is_trivially_constructible_v<T, Args...>) {
      // A plain copy: in solo mode, the owner claims, stores and publishes it with no section.
      const size_type end = core_.append_solo([&](size_type k) noexcept {
        std::construct_at(elements() + k, std::forward<Args>(args)...);
      });
      if (end != 0) return end - 1;
    }
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      const size_type i = claim(kPushBack);  // may throw: nothing claimed
      std::construct_at(elements() + i, std::forward<Args>(args)...);
      publish(i);
      return i;
    } else if constexpr (sizeof(T) <= kMaxStackValueBytes) {
      T value(std::forward<Args>(args)...);  // may throw: nothing claimed yet
      const size_type i = claim(kPushBack);  // may throw: nothing claimed
      std::construct_at(elements() + i, std::move(value));
      publish(i);
      return i;
    } else {
      const std::unique_ptr<T> value(new T(std::forward<Args>(args)...));
      const size_type i = claim(kPushBack);
      std::construct_at(elements() + i, std::move(*value));
      publish(i);
      return i;
    }
  }
  size_type push_back(const T& value) { return emplace_back(value); }
  size_type push_back(T&& value) { return emplace_back(std::move(value)); }

  // Appends every element of `values` as one block of consecutive indices claimed with a single
  // atomic operation (a producer with batches pays one claim per batch, not one per element), and
  // returns the block's first index; an empty range claims nothing and returns max_size(), never
  // a valid index. Thread-safe. All-or-nothing: when the block does not fit (std::length_error) or
  // the OS refuses to commit (OsAllocationError) or the barrier that ends solo mode
  // (std::system_error), nothing is added. The values are built in
  // place only from a contiguous sized range whose elements construct T without throwing (walking
  // it through a pointer cannot throw either); any other range is first built aside, so a throw
  // from an iterator or a constructor claims nothing.
  template <std::ranges::input_range R>
    requires std::constructible_from<T, std::ranges::range_reference_t<R>>
  size_type append_range(R&& values) {
    if constexpr (std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                  std::is_nothrow_constructible_v<T, std::ranges::range_reference_t<R>>) {
      return append_block("append_range", static_cast<size_type>(std::ranges::size(values)),
                          std::ranges::data(values));
    } else {
      std::vector<T> aside;  // may throw: nothing claimed yet
      for (auto&& v : values)
        aside.emplace_back(std::forward<decltype(v)>(v));
      return append_block("append_range", aside.size(), std::make_move_iterator(aside.begin()));
    }
  }

  // Claims the next index i and constructs make(i) there: for values that depend on their own
  // index (a memo table: element i describes the number i). make must not throw (it runs after
  // the claim, so a throw would leave a hole); it may read any published element. Later indices
  // are published only after this one, so a slow make delays visibility, never correctness.
  template <class Make>
  size_type emplace_back_with(Make&& make) {
    static_assert(std::is_nothrow_invocable_r_v<T, Make&, size_type>,
                  "emplace_back_with needs a noexcept make(index) returning T");
    const size_type i = claim("emplace_back_with");
    ::new (static_cast<void*>(elements() + i)) T(make(i));  // the result itself: no temporary
    publish(i);
    return i;
  }

  // Claims `count` consecutive indices with one atomic operation (as append_range) and constructs
  // make(i) at each index i of them, in index order, then publishes the block: emplace_back_with
  // for a block, so that values which depend on their own index (a memo table) are computed
  // where they go and published without waiting for any other thread. Returns the block's first
  // index; count 0 claims nothing and returns max_size(). make must not throw (it runs after the
  // claim); it may read any published element (the block's own are not published yet). Each
  // element of the block is marked ready on its own if the block finishes out of order, so
  // try_get finds it before size() passes it. Throws as append_range; nothing is added then.
  template <class Make>
  size_type append_with(size_type count, Make&& make) {
    static_assert(std::is_nothrow_invocable_r_v<T, Make&, size_type>,
                  "append_with needs a noexcept make(index) returning T");
    if (count == 0) return max_size();
    const size_type first = claim("append_with", count);
    for (size_type i = first, end = first + count; i != end; ++i)
      ::new (static_cast<void*>(elements() + i)) T(make(i));  // the result itself: no temporary
    core_.publish(first, count, true);
    return first;
  }

  // As emplace_back, but std::nullopt instead of throwing for capacity or OS reasons.
  // Constructs in place or aside as emplace_back does (a heap allocation refused for a value
  // built aside is std::nullopt too).
  template <class... Args>
  std::optional<size_type> try_emplace_back(Args&&... args) {
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      std::optional<size_type> i = core_.try_claim({sizeof(T), "try_emplace_back"});
      if (!i) return std::nullopt;
      std::construct_at(elements() + *i, std::forward<Args>(args)...);
      publish(*i);
      return i;
    } else if constexpr (sizeof(T) <= kMaxStackValueBytes) {
      T value(std::forward<Args>(args)...);
      std::optional<size_type> i = core_.try_claim({sizeof(T), "try_emplace_back"});
      if (!i) return std::nullopt;
      std::construct_at(elements() + *i, std::move(value));
      publish(*i);
      return i;
    } else {
      const std::unique_ptr<T> value(new (std::nothrow) T(std::forward<Args>(args)...));
      if (!value) return std::nullopt;
      std::optional<size_type> i = core_.try_claim({sizeof(T), "try_emplace_back"});
      if (!i) return std::nullopt;
      std::construct_at(elements() + *i, std::move(*value));
      publish(*i);
      return i;
    }
  }

  // The largest element emplace_back builds on the stack before claiming its index (when its
  // constructor may throw); a larger one is built on the heap.
  static constexpr size_type kMaxStackValueBytes = 16 * 1024;

  // The published prefix's length; never decreases.
  size_type size() const noexcept { return core_.size(); }
  // Waits until size() >= n and returns size(): for a reader that needs an element another thread
  // is appending (or has yet to append), such as the next index of a memo filled in order. Yields
  // its CPU between checks for up to a millisecond (to the appender it waits for, if that one lost
  // its CPU), then sleeps in the OS until a publish reaches n; a publish wakes only the threads
  // whose n it reached. Where the process-wide barrier of solo mode is not
  // available, or 32 threads of the process sleep here already, it yields its CPU between checks
  // instead. Returns at once if size() >= n already. Waits for good if the elements below n are
  // never all appended (an append that does not return, a Writer that is never flushed). Throws
  // std::length_error for n > max_size(), which no append can reach.
  size_type wait_for_size(size_type n) const {
    if (n > max_size()) {
      throw std::length_error("reservoir::ConcurrentDynArray::wait_for_size: " + std::to_string(n) +
                              " is more than max_size() " + std::to_string(max_size()));
    }
    return core_.wait_for_size(n);
  }
  bool empty() const noexcept { return size() == 0; }
  size_type max_size() const noexcept { return core_.max_size(); }
  // Elements that fit in committed memory.
  size_type capacity() const noexcept { return core_.capacity(); }
  // Elements this array's Writers destroyed at their end because their last flush could not
  // append them (full, or memory or the barrier refused). 0 unless elements were lost.
  size_type dropped() const noexcept { return core_.dropped(); }

  // i < size(): checked by an assertion (where NDEBUG is not defined, as DynArray's operator[]);
  // at() checks in every build.
  const T& operator[](size_type i) const noexcept {
    assert(i < size() && "reservoir::ConcurrentDynArray index out of range");
    return data()[i];
  }
  T& operator[](size_type i) noexcept {
    assert(i < size() && "reservoir::ConcurrentDynArray index out of range");
    return elements()[i];
  }
  const T& at(size_type i) const {
    if (i >= size()) {
      throw std::out_of_range("reservoir::ConcurrentDynArray::at: index " + std::to_string(i) +
                              " is not published (size " + std::to_string(size()) + ")");
    }
    return data()[i];
  }
  // Element i if it is known to be published, else nullptr: for a reader that may use any
  // element already there, not only the prefix (a memo whose lookups should not wait for the
  // slowest appender). Not null for every i < size(), for an element appended alone (push_back,
  // emplace_back, emplace_back_with, try_emplace_back) or by append_with once its append has
  // returned, and for the first element of a Writer's block or an append_range block; the
  // other elements of those blocks are found once size() passes them. Never an element whose
  // construction is not done; that construction happens-before the read through the pointer
  // (acquire on its ready mark). Any i, max_size() and past included: nullptr. A few loads, no
  // store; thread-safe.
  const T* try_get(size_type i) const noexcept {
    return core_.is_published(i) ? data() + i : nullptr;
  }
  // The published prefix as it is now; later appends do not invalidate it.
  std::span<const T> published() const noexcept { return {data(), size()}; }
  // The array as a range over its published prefix (range-for, std::ranges algorithms): begin()
  // is data(); end() is data() + size() at the moment it is called, so a loop or an algorithm
  // that takes end() once walks the prefix published then, a snapshot that later appends never
  // invalidate (nothing moves). Each call of end() may see a longer prefix: for a begin, end and
  // size that agree with each other, take published() once.
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size(); }
  const T* data() const noexcept { return static_cast<const T*>(core_.data()); }

  // Appends for one thread at a time, gathered in a buffer and appended as blocks (see the
  // contract at the top). Use one per thread; a Writer itself is not thread-safe. The array must
  // outlive it and must not be moved or swapped while it is alive. Defined in
  // detail/concurrent_writer.hpp, included at the end of this header.
  class Writer;

  // A writer for the calling thread. Cheap: it allocates its buffer on its first append.
  // `on_loss`: what its end does with buffered elements it cannot append that no flush() had
  // reported (WriterLoss: abort with a message, the default, or count them in dropped()).
  Writer writer(WriterLoss on_loss = WriterLoss::abort) noexcept { return Writer(*this, on_loss); }

 private:
  // The elements `limit` holds; fewer than one is std::invalid_argument naming this constructor.
  static size_type elements_in(max_bytes limit) {
    if (limit.bytes / sizeof(T) == 0) {
      throw std::invalid_argument(
          "reservoir::ConcurrentDynArray(max_bytes): " + std::to_string(limit.bytes) +
          " bytes hold no element of " + std::to_string(sizeof(T)) + " bytes");
    }
    return limit.bytes / sizeof(T);
  }
  T* elements() const noexcept { return static_cast<T*>(core_.data()); }
  // The call push_back and emplace_back name in their messages.
  static constexpr const char* kPushBack = "push_back/emplace_back";
  // `call` is the user's call, which the messages name.
  size_type claim(const char* call, size_type n = 1, bool partial = false,
                  size_type* claimed_count = nullptr) {
    return core_.claim({sizeof(T), call}, n, partial, claimed_count);
  }
  void publish(size_type i, size_type n = 1) noexcept { core_.publish(i, n); }

  // Claims `count` indices and constructs elements there from *it, *++it, ... (which must not
  // throw).
  template <class It>
  size_type append_block(const char* call, size_type count, It it) {
    if (count == 0) return max_size();
    const size_type first = claim(call, count);
    for (T *out = elements() + first, *end = out + count; out != end; ++out) {
      std::construct_at(out, *it);
      ++it;
    }
    publish(first, count);
    return first;
  }

  void destroy_all() noexcept {
    if (T* const first = elements()) std::destroy(first, first + core_.size());
  }

  detail::ConcurrentCore core_;
};
static_assert(std::ranges::contiguous_range<const ConcurrentDynArray<int>> &&
                  std::ranges::contiguous_range<ConcurrentDynArray<int>>,
              "the published prefix is a contiguous range");
static_assert(sizeof(void*) != 8 || sizeof(ConcurrentDynArray<int>) <= 256,
              "a ConcurrentDynArray is at most four cache lines");
#if defined(_MSC_VER)
#pragma warning(pop)
#endif

}  // namespace reservoir

// ConcurrentDynArray<T>::Writer: it needs the class above.
#include <reservoir/detail/concurrent_writer.hpp>
