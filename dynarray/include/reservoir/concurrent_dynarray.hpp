// reservoir/concurrent_dynarray.hpp - ConcurrentDynArray<T>: contiguous, and appendable from many
// threads at once while others read, with no lock around reads.
//
// Because nothing ever moves, a reserve-and-commit array can hand out slots to many appending
// threads while readers index the part that is already there.
//
// Two ways to append:
//   - Through the array: push_back/emplace_back/append_range/emplace_back_with/try_emplace_back,
//     from any number of threads. Each call claims its slots (one slot, or a block of consecutive
//     slots for append_range) with one compare-and-swap on a shared counter (with plain stores
//     while one thread appends alone: solo mode, below), constructs the elements in place and
//     publishes them before it returns. Simple, and the new element's index is known at once, but
//     threads that do nothing else contend on that counter's cache line.
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
//   - Reading element i (operator[], at, published()) is safe for i < size() while appends go on.
//     Writing to a published element is the caller's business (like any shared object).
//   - Elements are published in index order. A block constructed early whose predecessor is still
//     being constructed becomes visible when the predecessor is done; any appending thread
//     advances the published prefix, so none waits for another (but once, when solo mode ends:
//     see below).
//   - Slots are claimed only when their elements are about to be constructed, never ahead (a slot
//     claimed ahead and then left unfilled could not be returned once another thread claimed
//     after it, and would hold size() back for good). So the prefix is held back only by appends
//     in progress, never by a thread that stopped appending:
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
//     OsAllocationError or std::system_error it keeps them all).
//   - A throwing constructor claims nothing: a constructor that cannot throw runs in the claimed
//     slot; one that may throw runs before the claim, on a value built aside (on the stack, or on
//     the heap past kMaxStackValueBytes; for append_range, a block built aside) that is then moved
//     into the slot (T must be nothrow move constructible); a Writer constructs into its buffer,
//     which keeps what it held.
//   - Default construction, moves, swaps and destruction are not concurrent operations: no other
//     thread may use the arrays involved meanwhile, and no Writer may be alive for them. A
//     default-constructed or moved-from array has no reservation and max_size() 0 (appends throw
//     std::length_error); element addresses never change, a move hands them to the destination.
//   - Solo mode: while only one thread (the owner) has appended, its claims and publishes are
//     plain loads and stores: no atomic read-modify-write after its first claim, which takes
//     ownership with one CAS. The first append (or attempt: a full array too) from another
//     thread ends solo mode for good: that thread issues one process-wide memory barrier (Linux
//     membarrier, tens of microseconds) and waits for a claim or publish of the owner that is in
//     progress (a few instructions, or one commit step), never for a construction. That wait is
//     the one place where an append depends on another thread being scheduled: a real-time
//     thread that preempts the owner on the owner's CPU, or a child forked while the owner was in
//     a claim or publish, would wait for good. If the OS refuses the barrier, that append throws
//     std::system_error and adds nothing, and the array stays in solo mode (each later attempt
//     asks again). Where no such barrier is available (Windows, macOS, FreeBSD, the
//     posix-generic build) every append takes the shared path from the start. A thread started
//     after the owner ended may be taken for the owner (same thread-local address), which is
//     harmless: the owner is gone.
// Memory: the elements plus one ready byte per element, committed as the elements are; the ready
// bytes' pages stay untouched until a block first finishes out of order (never while one thread
// appends alone, unless it appends from inside one of its own constructions), after which each
// new commit of them is prefaulted.
// Cost: in solo mode, an append is a few plain loads and stores around the construction. Once
// shared, an append claims with one CAS and, when its block is next, publishes it with one more;
// one that finishes before its predecessor marks its block ready with one byte per power-of-two
// chunk of it (at most 64) and leaves it to be published with the predecessor. Appends through
// the array share the claim counter's cache line once per call; a Writer touches shared lines
// once per buffer.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <reservoir/arena.hpp>
#include <reservoir/detail/alignment.hpp>
#include <reservoir/max_size.hpp>
#include <reservoir/pal.hpp>

namespace reservoir {
namespace detail {

// Atomic access to a plain byte (ConcurrentDynArray's ready marks), sequentially consistent.
#if defined(__cpp_lib_atomic_ref)
inline constexpr bool kByteAtomicsLockFree =
    std::atomic_ref<unsigned char>::is_always_lock_free &&
    std::atomic_ref<unsigned char>::required_alignment == 1;
inline unsigned char atomic_load_byte(unsigned char* p) noexcept {
  return std::atomic_ref<unsigned char>(*p).load(std::memory_order_seq_cst);
}
inline void atomic_store_byte(unsigned char* p, unsigned char v) noexcept {
  std::atomic_ref<unsigned char>(*p).store(v, std::memory_order_seq_cst);
}
#else  // standard libraries without std::atomic_ref (libc++ before 19): the GCC/Clang builtins
inline constexpr bool kByteAtomicsLockFree = __atomic_always_lock_free(1, 0);
inline unsigned char atomic_load_byte(unsigned char* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}
inline void atomic_store_byte(unsigned char* p, unsigned char v) noexcept {
  __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}
#endif

// An address unique to the calling thread while it runs (a thread started after it ended may get
// the same one). Constant-initialized, so reaching it costs no call.
inline const void* thread_token() noexcept {
  static thread_local const char token = 0;
  return &token;
}

}  // namespace detail

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
      : max_size_(checked(limit.count)),
        data_arena_(max_size_ * sizeof(T) + detail::kAlignmentSlack<T>, options),
        ready_arena_(max_size_, fresh(options)) {
    data_offset_ = detail::element_offset<T>(data_arena_.base());
    data_ = reinterpret_cast<T*>(data_arena_.base() + data_offset_);
    ready_ = reinterpret_cast<unsigned char*>(ready_arena_.base());
    if (pal::process_barrier_supported()) mode_.store(kSolo, std::memory_order_relaxed);
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
    if (this != std::addressof(other)) {
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
  // reservation is full, OsAllocationError when the OS refuses to commit, std::system_error when
  // it refuses the barrier that ends solo mode; nothing is added then.
  // The element is constructed in its slot when that cannot throw; otherwise it is built first
  // (on the stack, or on the heap when larger than kMaxStackValueBytes) and moved in, so a throw
  // claims nothing.
  template <class... Args>
  size_type emplace_back(Args&&... args) {
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      const size_type i = claim();  // may throw: nothing claimed
      std::construct_at(data_ + i, std::forward<Args>(args)...);
      publish(i);
      return i;
    } else if constexpr (sizeof(T) <= kMaxStackValueBytes) {
      T value(std::forward<Args>(args)...);  // may throw: nothing claimed yet
      const size_type i = claim();           // may throw: nothing claimed
      std::construct_at(data_ + i, std::move(value));
      publish(i);
      return i;
    } else {
      const std::unique_ptr<T> value(new T(std::forward<Args>(args)...));
      const size_type i = claim();
      std::construct_at(data_ + i, std::move(*value));
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
  requires std::constructible_from<T, std::ranges::range_reference_t<R>> size_type
  append_range(R&& values) {
    if constexpr (std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                  std::is_nothrow_constructible_v<T, std::ranges::range_reference_t<R>>) {
      return append_block(static_cast<size_type>(std::ranges::size(values)),
                          std::ranges::data(values));
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
    ::new (static_cast<void*>(data_ + i)) T(make(i));  // the result itself: no temporary
    publish(i);
    return i;
  }

  // As emplace_back, but std::nullopt instead of throwing for capacity or OS reasons.
  // Constructs in place or aside as emplace_back does (a heap allocation refused for a value
  // built aside is std::nullopt too).
  template <class... Args>
  std::optional<size_type> try_emplace_back(Args&&... args) {
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      std::optional<size_type> i = try_claim();
      if (!i) return std::nullopt;
      std::construct_at(data_ + *i, std::forward<Args>(args)...);
      publish(*i);
      return i;
    } else if constexpr (sizeof(T) <= kMaxStackValueBytes) {
      T value(std::forward<Args>(args)...);
      std::optional<size_type> i = try_claim();
      if (!i) return std::nullopt;
      std::construct_at(data_ + *i, std::move(value));
      publish(*i);
      return i;
    } else {
      const std::unique_ptr<T> value(new (std::nothrow) T(std::forward<Args>(args)...));
      if (!value) return std::nullopt;
      std::optional<size_type> i = try_claim();
      if (!i) return std::nullopt;
      std::construct_at(data_ + *i, std::move(*value));
      publish(*i);
      return i;
    }
  }

  // The largest element emplace_back builds on the stack before claiming its slot (when its
  // constructor may throw); a larger one is built on the heap.
  static constexpr size_type kMaxStackValueBytes = 16 * 1024;

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

  // Appends for one thread at a time, gathered in a buffer and appended as blocks (see the
  // contract at the top). Use one per thread; a Writer itself is not thread-safe. The array must
  // outlive it and must not be moved or swapped while it is alive.
  class Writer {
   public:
    // Takes other's buffered elements; other stays a usable writer of the same array, with an
    // empty buffer.
    Writer(Writer&& other) noexcept
        : array_(other.array_),
          buffer_(std::exchange(other.buffer_, {})),
          head_(std::exchange(other.head_, 0)),
          block_(std::exchange(other.block_, 0)) {}
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    Writer& operator=(Writer&&) = delete;

    // Flushes. A destructor cannot report errors: buffered elements that do not fit (or that the
    // OS refuses memory or the barrier for) are destroyed unseen. Call flush() first to learn of
    // it.
    ~Writer() {
      try {
        flush();
      } catch (...) {  // std::length_error, OsAllocationError or std::system_error: see above
      }
    }

    // Adds an element to the buffer, flushing it first if it is full; the element has no index
    // and is not visible until the next flush. Throws what that flush throws (std::length_error
    // when the array is full: the elements that fit were appended, the rest stay buffered;
    // OsAllocationError; std::system_error), and whatever constructing T throws; the new element
    // is not added then.
    // Amortized cost: a compare and a construction in the writer's own buffer, plus one move per
    // element and one claim per buffer at the flush.
    template <class... Args>
    void emplace_back(Args&&... args) {
      if (buffer_.size() == block_) make_room();
      buffer_.emplace_back(std::forward<Args>(args)...);  // fits: never reallocates
    }
    void push_back(const T& value) { emplace_back(value); }
    void push_back(T&& value) { emplace_back(std::move(value)); }

    // The publish point: appends the buffered elements to the array as one block of consecutive
    // indices claimed with one atomic operation, and returns the block's first index (max_size()
    // when nothing was buffered). After it returns they are published: counted by size() and
    // visible to every reader. When fewer slots are left than elements buffered, appends those
    // that fit (oldest first), keeps the rest buffered and throws std::length_error; when the OS
    // refuses to commit (OsAllocationError) or the barrier that ends solo mode
    // (std::system_error), appends nothing and keeps them all.
    size_type flush() {
      const size_type pending = buffer_.size() - head_;
      if (pending == 0) return array_->max_size_;
      size_type count = 0;
      const size_type first = array_->claim(pending, true, &count);  // throws: none taken
      std::uninitialized_move_n(buffer_.begin() + static_cast<std::ptrdiff_t>(head_), count,
                                array_->data_ + first);  // nothrow
      array_->publish(first, count);
      if (count == pending) {
        buffer_.clear();
        head_ = 0;
        return first;
      }
      // The rest stays buffered after the moved-from ones (no assignment: T need not have one).
      head_ += count;
      throw std::length_error(
          "reservoir::ConcurrentDynArray::Writer: the array is full at "
          "max_size() " +
          std::to_string(array_->max_size_) + ": appended " + std::to_string(count) + " of " +
          std::to_string(pending) + " buffered elements at index " + std::to_string(first) +
          ", the rest stay buffered");
    }

    // Elements appended to this writer and not yet flushed.
    size_type buffered() const noexcept { return buffer_.size() - head_; }

   private:
    friend class ConcurrentDynArray;
    explicit Writer(ConcurrentDynArray& array) noexcept : array_(&array) {}

    // The buffer is full (or not allocated yet): flush it, then let the next block be twice as
    // long, from 16 elements up to 16 KiB of them, never longer than the array.
    void make_room() {
      flush();
      constexpr size_type kFirst = 16, kMaxBytes = 16 * 1024;
      const size_type longest = (std::max)(size_type{1}, kMaxBytes / sizeof(T));
      size_type next = block_ == 0 ? (std::min)(kFirst, longest) : (std::min)(block_ * 2, longest);
      next = (std::min)(next, array_->max_size_);
      if (next == 0) array_->throw_full();  // an array with no reservation
      if (next > block_) {
        buffer_.reserve(next);  // empty after the flush: nothing moves
        block_ = next;
      }
    }

    ConcurrentDynArray* array_;
    std::vector<T> buffer_;  // [head_, size()) buffered; before head_: moved into the array
    size_type head_ = 0;
    size_type block_ = 0;  // flush when the buffer holds this many
  };

  // A writer for the calling thread. Cheap: it allocates its buffer on its first append.
  Writer writer() noexcept { return Writer(*this); }

 private:
  // Ready marks must start at zero: never take their reservation from the cache (whose first
  // step holds old bytes), so every byte is fresh or decommitted memory, which the OS fills with
  // zeros.
  static ArenaOptions fresh(ArenaOptions o) noexcept {
    o.reuse_reservation = false;
    return o;
  }
  // The marks are plain bytes, only ever accessed atomically. unsigned char is an
  // implicit-lifetime type, and the OS's zero-filled pages hold such objects without a write
  // (as memory from malloc does), so a mark needs no construction and its page stays untouched
  // until a mark on it is set.
  unsigned char load_mark(size_type i) const noexcept {
    return detail::atomic_load_byte(ready_ + i);
  }
  void store_mark(size_type i, unsigned char mark) noexcept {
    detail::atomic_store_byte(ready_ + i, mark);
  }

  static size_type checked(size_type max_size) {
    if (max_size == 0) throw std::invalid_argument("reservoir::ConcurrentDynArray: max_size 0");
    if (max_size > (static_cast<size_type>(-1) - detail::kAlignmentSlack<T>) / sizeof(T)) {
      throw std::length_error("reservoir::ConcurrentDynArray: max_size overflows");
    }
    return max_size;
  }

  // ---- solo mode --------------------------------------------------------------------------------
  //
  // While only one thread (the owner) has appended, its claims and publishes are plain loads and
  // stores: no other thread writes the counters or the marks. The owner announces each claim and
  // each publish in solo_depth_ and then checks mode_ with only a compiler barrier between; the
  // first other thread to append sets mode_ to kRevoking, issues a process-wide barrier (which
  // orders the owner's accesses as a full fence would have), waits until no solo claim or publish
  // is in progress, and sets kShared for good. Either the owner sees kRevoking and goes on the
  // shared way, or the other thread sees its claim or publish in progress and waits for it: never
  // both at once. Constructions are outside these sections, so nobody waits for one.
  enum : unsigned char { kSolo, kRevoking, kShared };

  // One claim or one publish: solo or shared, decided when it starts.
  class Section {
   public:
    // For a claim: a thread that is not the owner ends solo mode first (or waits while another
    // thread ends it). Throws std::system_error if the OS refuses the barrier that ends it.
    struct ForClaim {};
    Section(ConcurrentDynArray& array, ForClaim) : array_(&array) {
      if (array.mode_.load(std::memory_order_acquire) == kShared) return;
      const void* const me = detail::thread_token();
      while (array.mode_.load(std::memory_order_acquire) != kShared) {
        const void* owner = array.owner_.load(std::memory_order_relaxed);
        if (owner == nullptr &&
            array.owner_.compare_exchange_strong(owner, me, std::memory_order_relaxed))
          owner = me;
        if (owner == me) {
          enter_as_owner();
          return;
        }
        array.end_solo();
      }
    }
    // For a publish: a thread that is not the owner claimed in shared mode, which never ends.
    struct ForPublish {};
    Section(ConcurrentDynArray& array, ForPublish) noexcept : array_(&array) {
      if (array.mode_.load(std::memory_order_acquire) != kShared &&
          array.owner_.load(std::memory_order_relaxed) == detail::thread_token())
        enter_as_owner();
    }
    ~Section() {
      if (solo_) array_->solo_depth_.store(depth_, std::memory_order_release);
    }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    bool solo() const noexcept { return solo_; }

   private:
    void enter_as_owner() noexcept {
      const unsigned depth = array_->solo_depth_.load(std::memory_order_relaxed);
      array_->solo_depth_.store(depth + 1, std::memory_order_relaxed);
      // Paired with end_solo's process-wide barrier: a full fence between the store above and
      // the load below, paid by the thread that ends solo mode.
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (array_->mode_.load(std::memory_order_relaxed) == kSolo) {
        solo_ = true;
        depth_ = depth;
        return;
      }
      // Ending: go on the shared way. No other thread appends before it has seen this store.
      array_->solo_depth_.store(depth, std::memory_order_release);
    }

    ConcurrentDynArray* array_;
    bool solo_ = false;
    unsigned depth_ = 0;
  };

  // Ends solo mode, or waits while another thread ends it (then the mode is kShared, or kSolo
  // again if that thread's barrier was refused).
  void end_solo() {
    unsigned char mode = kSolo;
    if (mode_.compare_exchange_strong(mode, kRevoking, std::memory_order_seq_cst)) {
      if (const std::error_code ec = pal::process_barrier()) {
        mode_.store(kSolo, std::memory_order_release);
        throw std::system_error(ec,
                                "reservoir::ConcurrentDynArray: a second appending thread "
                                "needs a process-wide memory barrier");
      }
      // A solo claim or publish in progress finishes (the owner's next one sees kRevoking).
      while (solo_depth_.load(std::memory_order_acquire) != 0)
        pal::yield_thread();
      mode_.store(kShared, std::memory_order_release);
      return;
    }
    while (mode_.load(std::memory_order_acquire) == kRevoking)
      pal::yield_thread();
  }

  // The owner's claim in solo mode: as claim_shared, with a plain store.
  size_type claim_solo(size_type n, bool partial, size_type* claimed_count) {
    const size_type i = claimed_.load(std::memory_order_relaxed);
    size_type k = n;
    if (partial) {
      k = (std::min)(n, max_size_ - i);  // claimed_ <= capacity_ <= max_size_
      if (k == 0) throw_full();
    }
    const size_type cap = capacity_.load(std::memory_order_relaxed);
    if (i > cap || k > cap - i) grow(i, k);  // throws, or makes capacity_ >= i + k
    claimed_.store(i + k, std::memory_order_relaxed);
    if (claimed_count != nullptr) *claimed_count = k;
    return i;
  }

  // The owner's publish in solo mode: as publish_shared, with plain loads and a release store.
  // A block is out of order only when an append nested in another one's construction (the owner
  // appending from make() or from a constructor) finishes first; the outer one publishes it.
  void publish_solo(size_type i, size_type n) noexcept {
    if (published_.load(std::memory_order_relaxed) != i) {
      mark_ready(i, n);
      return;
    }
    published_.store(ready_run_end(i + n, claimed_.load(std::memory_order_relaxed)),
                     std::memory_order_release);
  }

  // Claims the next n (>= 1) consecutive slots and returns the first (see claim_shared).
  size_type claim(size_type n = 1, bool partial = false, size_type* claimed_count = nullptr) {
    const Section section(*this, typename Section::ForClaim{});
    return section.solo() ? claim_solo(n, partial, claimed_count)
                          : claim_shared(n, partial, claimed_count);
  }
  // Publishes the constructed slots [i, i + n) (n >= 1; see publish_shared).
  void publish(size_type i, size_type n = 1) noexcept {
    const Section section(*this, typename Section::ForPublish{});
    if (section.solo()) {
      publish_solo(i, n);
    } else {
      publish_shared(i, n);
    }
  }

  // ---- shared mode ------------------------------------------------------------------------------

  // Claims the next n (>= 1) consecutive slots with one CAS and returns the first, committing
  // more memory first if needed. With `partial`, claims as many of them as fit below max_size()
  // instead (at least one) and stores that count in *claimed_count. Backs off briefly after a lost
  // CAS, so that contending threads stop invalidating the counter's cache line on every attempt.
  size_type claim_shared(size_type n, bool partial, size_type* claimed_count) {
    for (;;) {
      size_type i = claimed_.load(std::memory_order_relaxed);
      size_type k = n;
      unsigned spins = 1;
      for (;;) {
        if (partial) {
          k = (std::min)(n, max_size_ - i);  // claimed_ <= capacity_ <= max_size_
          if (k == 0) throw_full();
        }
        const size_type cap = capacity_.load(std::memory_order_acquire);
        if (i > cap || k > cap - i) break;
        // seq_cst, as publish's reads of claimed_: a thread that publishes up to slot i and then
        // reads claimed_ must see this claim if the claimer's ready mark may be there to see.
        if (claimed_.compare_exchange_weak(i, i + k, std::memory_order_seq_cst,
                                           std::memory_order_relaxed)) {
          if (claimed_count != nullptr) *claimed_count = k;
          return i;
        }
        for (unsigned spin = 0; spin < spins; ++spin)
          std::atomic_signal_fence(std::memory_order_seq_cst);  // a compiler-only pause
        spins = (std::min)(spins * 2, 64u);
      }
      grow(i, k);  // throws, or makes capacity_ >= i + k (or another thread did)
    }
  }
  std::optional<size_type> try_claim() noexcept {
    try {
      return claim();
    } catch (...) {  // length_error, OsAllocationError or a refused barrier: all are "no"
      return std::nullopt;
    }
  }
  [[noreturn]] void throw_full() const {
    throw std::length_error("reservoir::ConcurrentDynArray: full at max_size() " +
                            std::to_string(max_size_));
  }

  // Commits memory for slots [i, i + n): once, whichever thread gets here first.
  void grow(size_type i, size_type n) {
    std::lock_guard lock(commit_mutex_);
    const size_type cap = capacity_.load(std::memory_order_relaxed);
    if (i <= cap && n <= cap - i) return;  // another thread did it
    if (i > max_size_ || n > max_size_ - i) throw_full();
    // Both arenas reach their step ends; the capacity is what both can hold. Ready bytes come
    // from fresh or decommitted memory, so they read as zero (not ready).
    data_arena_.reserve(data_offset_ + (i + n) * sizeof(T));  // strong guarantee on failure
    const size_type data_cap =
        (std::min)((data_arena_.committed() - data_offset_) / sizeof(T), max_size_);
    // The marks are written only when blocks finish out of order, so while one thread appends
    // alone their pages are never touched and cost no RAM and no faults: commit them without
    // prefault. Once a block has finished out of order, more marks will be written, and the new
    // pages are backed here in one call rather than by a page fault in an appending thread.
    const auto populate = out_of_order_.load(std::memory_order_relaxed) ? Arena::Populate::all
                                                                        : Arena::Populate::none;
    // On failure data_arena_ keeps a step: harmless, unclaimed.
    ready_arena_.reserve(data_cap, populate);
    const size_type flags = (std::min)(ready_arena_.committed(), max_size_);
    // No thread reads a mark at or above the old capacity before the release store below
    // publishes it.
    capacity_.store((std::min)(data_cap, flags), std::memory_order_release);
  }

  // Claims `count` slots and constructs them from *it, *++it, ... (which must not throw).
  template <class It>
  size_type append_block(size_type count, It it) {
    if (count == 0) return max_size_;
    const size_type first = claim(count);
    for (T *out = data_ + first, *end = out + count; out != end; ++out) {
      std::construct_at(out, *it);
      ++it;
    }
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
    data_offset_ = std::exchange(other.data_offset_, 0);
    ready_ = std::exchange(other.ready_, nullptr);
    claimed_.store(other.claimed_.exchange(0, std::memory_order_relaxed),
                   std::memory_order_relaxed);
    published_.store(other.published_.exchange(0, std::memory_order_relaxed),
                     std::memory_order_relaxed);
    capacity_.store(other.capacity_.exchange(0, std::memory_order_relaxed),
                    std::memory_order_relaxed);
    out_of_order_.store(other.out_of_order_.exchange(false, std::memory_order_relaxed),
                        std::memory_order_relaxed);
    mode_.store(other.mode_.exchange(kShared, std::memory_order_relaxed),
                std::memory_order_relaxed);
    owner_.store(other.owner_.exchange(nullptr, std::memory_order_relaxed),
                 std::memory_order_relaxed);
  }

  // The end of the run of ready chunks that starts at slot p (p itself if its mark is 0), reading
  // marks below `end` (claimed slots) only.
  size_type ready_run_end(size_type p, size_type end) const noexcept {
    while (p < end) {
      const unsigned char mark = load_mark(p);
      if (mark == 0) break;
      p += size_type{1} << (mark - 1);
    }
    return p;
  }

  // Marks the constructed block [i, i + n) ready, chunk by chunk (see publish_shared).
  void mark_ready(size_type i, size_type n) noexcept {
    if (!out_of_order_.load(std::memory_order_relaxed))
      out_of_order_.store(true, std::memory_order_relaxed);
    for (size_type k = i, left = n; left != 0;) {
      const size_type chunk = std::bit_floor(left);
      store_mark(k, static_cast<unsigned char>(std::bit_width(chunk)));
      k += chunk;
      left -= chunk;
    }
  }

  // Publishes the constructed slots [i, i + n) (n >= 1).
  //
  // Ready bytes mark blocks, not elements: a block [i, i + n) is split into power-of-two chunks
  // (largest first), and the byte of each chunk's first slot holds log2(chunk length) + 1; the
  // other bytes stay 0. The published prefix only ever ends at a block's or a chunk's end, so a
  // thread advancing it reads only chunk-start bytes, and skips a whole chunk per byte.
  void publish_shared(size_type i, size_type n) noexcept {
    // 1. The common case: the block is next, so publish it directly; its ready bytes are never
    //    needed.
    size_type p = i;
    if (published_.compare_exchange_strong(p, i + n, std::memory_order_seq_cst)) {
      p = i + n;
    } else {
      // 2. A predecessor is still constructing: mark the block ready for whoever publishes it.
      //    Every mark is stored before published_ is read again, so a publisher that stopped at
      //    any chunk of this block (having read its mark as 0) is seen below, and this thread
      //    goes on.
      mark_ready(i, n);
      p = published_.load(std::memory_order_seq_cst);
    }
    // 3. Advance over every run of ready chunks with one CAS per run. seq_cst on the marks and the
    //    counters: of two threads finishing neighbouring blocks, at least one sees the other's
    //    claim and mark. Only marks of claimed slots are read (committed before the claim), so a
    //    thread appending alone never touches them.
    for (;;) {
      const size_type q = ready_run_end(p, claimed_.load(std::memory_order_seq_cst));
      if (q == p) return;
      if (published_.compare_exchange_strong(p, q, std::memory_order_seq_cst)) p = q;
      // else p is the prefix another thread published (a chunk boundary too): scan from there
    }
  }

  size_type max_size_ = 0;
  Arena data_arena_;
  Arena ready_arena_;
  T* data_ = nullptr;
  size_type data_offset_ = 0;  // bytes of data_arena_ before data_ (detail/alignment.hpp)
  unsigned char* ready_ = nullptr;            // one mark per slot, zero until set (see load_mark)
  std::atomic<unsigned char> mode_{kShared};  // kSolo from construction where barriers work
  std::atomic<const void*> owner_{nullptr};   // the thread that appended first (solo mode)
  // Each counter on its own cache line: appenders hammer claimed_ and published_, readers poll
  // published_, and capacity_ is read-mostly.
  alignas(64) std::atomic<size_type> claimed_{0};    // slots handed out
  std::atomic<unsigned> solo_depth_{0};              // the owner's solo appends in progress
  alignas(64) std::atomic<size_type> published_{0};  // prefix that is constructed and visible
  alignas(64) std::atomic<size_type> capacity_{0};   // slots backed by committed memory
  std::atomic<bool> out_of_order_{false};  // some block was marked ready (read by grow() only)
  alignas(64) std::mutex commit_mutex_;
};
#if defined(_MSC_VER)
#pragma warning(pop)
#endif

}  // namespace reservoir
