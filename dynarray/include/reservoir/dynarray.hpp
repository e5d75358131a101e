// reservoir/dynarray.hpp - DynArray<T>: a std::vector-shaped array whose elements never move.
//
// DynArray reserves address space for max_size() elements once and commits pages at its end as it
// grows. Growth (push_back, emplace_back, insert at end, append_range, resize up, reserve) never
// moves or copies an existing element and invalidates no pointer, reference, iterator or view.
// Only removing an element (pop_back, erase, clear, resize down) or destroying the array
// invalidates what referred to the removed elements; insert/erase in the middle shift later
// elements exactly as std::vector does (the base itself never moves).
//
// Where it differs from std::vector:
//   - max_size() is the reservation, fixed at construction; growing past it is std::length_error.
//   - capacity() is the number of elements that fit in committed memory; reserve(n) commits ahead.
//   - shrink_to_fit() returns RAM to the OS without moving anything.
//   - copying (constructor, clone()) makes a new reservation of the same max_size(); copy
//     assignment keeps this array's reservation and assigns the elements.
#pragma once

#include <algorithm>
#include <cassert>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <reservoir/arena.hpp>
#include <reservoir/detail/alignment.hpp>
#include <reservoir/detail/annotations.hpp>
#include <reservoir/detail/array_iterator.hpp>
#include <reservoir/detail/fill.hpp>
#include <reservoir/detail/iterator_pairs.hpp>
#include <reservoir/max_size.hpp>

// Keeps a slow path out of the caller's inlined fast path.
#if defined(__GNUC__) || defined(__clang__)
#define RESERVOIR_COLD_NOINLINE __attribute__((noinline, cold))
#elif defined(_MSC_VER)
#define RESERVOIR_COLD_NOINLINE __declspec(noinline)
#else
#define RESERVOIR_COLD_NOINLINE
#endif

// Inlines an append's whole fast path, its call to the slow path included. Left to itself GCC
// inlines only the compare-and-store and moves the slow call, with the stores after it that tell
// the loop what end_ and cap_ are, into an outlined part: the caller's loop then reloads end_
// from memory on every append.
#if defined(__GNUC__) || defined(__clang__)
#define RESERVOIR_ALWAYS_INLINE __attribute__((always_inline)) inline
#elif defined(_MSC_VER)
#define RESERVOIR_ALWAYS_INLINE __forceinline
#else
#define RESERVOIR_ALWAYS_INLINE inline
#endif

namespace reservoir {

// Address space a default-constructed DynArray reserves: 64 GiB on 64-bit systems. That is more
// data than the RAM of nearly every machine it will run on, so `DynArray<T> a;` never runs out in
// practice, while still leaving room for about 2000 such arrays in a 128 TiB user address space.
// Reserving costs no RAM. On 32-bit systems, 256 MiB.
inline constexpr std::size_t kDefaultReserveBytes = kDefaultTierFull;  // reservations.hpp

// If the OS refuses the default reservation (a process address-space limit such as `ulimit -v`,
// or valgrind), a default-constructed DynArray asks for the next smaller default tier, and so on
// down to this, the least.
inline constexpr std::size_t kMinDefaultReserveBytes = kDefaultTierLeast;

RESERVOIR_BEGIN_ITERATOR_NAMESPACE

// T may be incomplete where the class, its default constructor, destructor and move operations
// are instantiated (`struct Node { DynArray<Node> kids; };`), as with std::vector; the other
// members need a complete T.
template <class T>
class DynArray {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  // Contiguous iterators wrapping T* (checked in debug builds: detail/array_iterator.hpp).
  using iterator = detail::array_iterator<T, detail::kCheckedIterators>;
  using const_iterator = detail::array_iterator<const T, detail::kCheckedIterators>;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  // The default reservation, in elements.
  static constexpr size_type default_max_size() noexcept {
    return kDefaultReserveBytes / sizeof(T);
  }

  // ---- construction
  // ------------------------------------------------------------------------------

  // Empty, with max_size() == default_max_size(). Reserves lazily on the first growth, so it costs
  // nothing and never throws. If the OS refuses the full default then, the array reserves the
  // largest smaller default tier the OS grants (kDefaultTiers: at least kMinDefaultReserveBytes)
  // and max_size() reports that from then on.
  DynArray() noexcept = default;

  // Reserves room for exactly `limit.count` elements now (max_bytes: as many whole elements as fit
  // in `limit.bytes`). 0 elements is std::invalid_argument; a size overflowing or exceeding the
  // address space is std::length_error (before any OS call); a refused reservation is
  // OsAllocationError (a std::bad_alloc).
  explicit DynArray(max_elements limit, ArenaOptions options = {})
      : DynArray(limit, options, "DynArray(max_elements)") {}
  explicit DynArray(max_bytes limit, ArenaOptions options = {})
      : DynArray(max_elements(elements_in(limit)), options, "DynArray(max_bytes)") {}

  // count value-initialised elements, or count copies of value, as std::vector: on the default
  // reservation. These constructors delegate to the default one, so that the destructor gives
  // back a reservation made before a refusal or a throwing element (the array holds it apart).
  explicit DynArray(size_type count) : DynArray() {
    if (count > default_max_size()) throw_length_error("DynArray(count)", count);
    resize_impl(count, value_construct{}, "DynArray(count)");
  }
  DynArray(size_type count, const T& value) : DynArray() {
    if (count > default_max_size()) throw_length_error("DynArray(count, value)", count);
    resize_impl(count, fill_with{std::addressof(value)}, "DynArray(count, value)");
  }

  // The elements of `init`, or of [first, last), in an array with the default reservation.
  DynArray(std::initializer_list<T> init) : DynArray() {
    append_from(init, "DynArray(initializer_list)");
  }
  template <class It, class S>
    requires detail::iterator_pair<It, S>
  DynArray(It first, S last) : DynArray() {
    append_iterators(first, last, "DynArray(first, last)");
  }

#if defined(__cpp_lib_containers_ranges)
  // The elements of r (C++23 std::from_range), on the default reservation or on the one given.
  template <std::ranges::input_range R>
    requires std::constructible_from<T, std::ranges::range_reference_t<R>>
  DynArray(std::from_range_t, R&& r) : DynArray() {
    append_from(std::forward<R>(r), "DynArray(from_range)");
  }
  template <std::ranges::input_range R, class Limit>
    requires std::constructible_from<T, std::ranges::range_reference_t<R>> &&
             (std::same_as<Limit, max_elements> || std::same_as<Limit, max_bytes>)
  DynArray(std::from_range_t, R&& r, Limit limit, ArenaOptions options = {})
      : DynArray(limit, options) {
    append_from(std::forward<R>(r), "DynArray(from_range, r, limit)");
  }
#endif

  DynArray(DynArray&& other) noexcept { steal(other); }
  // Steals other's elements first, then destroys the old ones: other may be owned by one of them
  // (a tree node assigned its own child's children), so destroying first would free it.
  DynArray& operator=(DynArray&& other) noexcept {
    if (this != std::addressof(other)) {
      DynArray taken(std::move(other));
      swap(taken);
    }
    return *this;
  }
  // A copy in a new reservation of other's max_size() (as clone()).
  DynArray(const DynArray& other) : DynArray(other.clone()) {}
  // Assigns other's elements into this array's own reservation (its base and max_size() stay),
  // with assign()'s guarantee.
  DynArray& operator=(const DynArray& other) {
    if (this != std::addressof(other)) assign(other.begin(), other.end());
    return *this;
  }

  // Inlined whole, as the appends are: an out-of-line destructor would be given the array's
  // address (on an exception's cleanup path too), which keeps end_ in memory (see State).
  RESERVOIR_ALWAYS_INLINE ~DynArray() {
    static_assert(std::is_object_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T>,
                  "DynArray<T> needs a non-const, non-volatile object type");
    static_assert(alignof(T) <= detail::kMaxElementAlignment,
                  "DynArray<T> supports element alignments up to 2 MiB (detail/alignment.hpp)");
    destroy_all();
    annotate(end_, cap_);  // the memory goes back whole: nothing in it is reported any more
    if (arena_ != nullptr) release(arena_);
  }

  // A copy of every element in a new reservation of the same max_size() and options (for a
  // default-constructed array: the default reservation, which may fall back to less).
  [[nodiscard]] DynArray clone() const {
    // A default-reserved array's copy is reserved the default way too (with its fallback).
    DynArray copy = arena_ != nullptr && !default_reservation()
                        ? DynArray(max_elements(reserved_size()), arena_->options())
                        : DynArray();
    copy.append_from(*this, "DynArray::clone");
    return copy;
  }

  // ---- element access
  // ----------------------------------------------------------------------------

  reference operator[](size_type i) noexcept {
    assert(i < size() && "reservoir::DynArray index out of range");
    return first_element()[i];
  }
  const_reference operator[](size_type i) const noexcept {
    assert(i < size() && "reservoir::DynArray index out of range");
    return first_element()[i];
  }
  reference at(size_type i) {
    if (i >= size()) throw_out_of_range("at", i);
    return first_element()[i];
  }
  const_reference at(size_type i) const {
    if (i >= size()) throw_out_of_range("at", i);
    return first_element()[i];
  }
  reference front() noexcept { return (*this)[0]; }
  const_reference front() const noexcept { return (*this)[0]; }
  reference back() noexcept { return (*this)[size() - 1]; }
  const_reference back() const noexcept { return (*this)[size() - 1]; }
  T* data() noexcept { return first_element(); }
  const T* data() const noexcept { return first_element(); }

  // ---- iterators (contiguous, and never invalidated by growth) ----------------------------------

  iterator begin() noexcept { return make_iterator(first_element()); }
  const_iterator begin() const noexcept { return make_iterator(first_element()); }
  const_iterator cbegin() const noexcept { return begin(); }
  iterator end() noexcept { return make_iterator(end_); }
  const_iterator end() const noexcept { return make_iterator(end_); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator crbegin() const noexcept { return rbegin(); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  const_reverse_iterator crend() const noexcept { return rend(); }

  // ---- capacity
  // ----------------------------------------------------------------------------------

  [[nodiscard]] bool empty() const noexcept { return end_ == first_element(); }
  size_type size() const noexcept { return static_cast<size_type>(end_ - first_element()); }
  // Elements that fit in committed memory; appends up to it make no system call.
  size_type capacity() const noexcept { return static_cast<size_type>(cap_ - first_element()); }
  // The reservation: the most elements this array can ever hold.
  size_type max_size() const noexcept {
    return reserved_size() ? reserved_size() : default_max_size();
  }
  // The arena underneath (committed bytes, granule, options).
  const Arena& arena() const noexcept { return arena_ ? *arena_ : no_arena(); }

  // Commits memory for at least n elements. Never moves anything. n > max_size() is
  // std::length_error; a refused commit is OsAllocationError; the array is unchanged then.
  // With prefault on, at most the next kPopulatedStepLimit (2 MiB) is backed with RAM at once;
  // the rest is backed on first touch, like std::vector::reserve, so an upper bound that is never
  // reached costs no RSS (see Arena::Populate).
  void reserve(size_type n) { commit_ahead(n, Arena::Populate::first_step, "DynArray::reserve"); }

  // Returns the committed memory beyond size() to the OS (whole commit granules), without moving
  // anything. Non-binding, as in std::vector: if the OS refuses to decommit, the memory stays
  // committed and capacity() says so.
  void shrink_to_fit() noexcept {
    if (arena_ == nullptr) return;
    (void)arena_->trim(bytes_for(size()));
    update_capacity();
  }

  // ---- appending (never moves an existing element) ----------------------------------------------

  RESERVOIR_ALWAYS_INLINE void push_back(const T& value) { emplace_back(value); }
  RESERVOIR_ALWAYS_INLINE void push_back(T&& value) { emplace_back(std::move(value)); }

  // Constructs the new last element in place and returns it. Strong guarantee: if the
  // reservation is full (std::length_error), the OS refuses to commit (OsAllocationError) or T's
  // constructor throws, the array is exactly as it was, capacity() included.
  template <class... Args>
  RESERVOIR_ALWAYS_INLINE reference emplace_back(Args&&... args) {
    if (end_ != cap_) [[likely]] {  // the whole fast path: a compare and a store
      return *construct_one(std::forward<Args>(args)...);
    }
    if constexpr (kSlowPathByValue<Args...>) {
      // A small trivially copyable value goes to the slow path in a register: passing its
      // address would force the caller's loop to keep it in memory on every iteration. The slow
      // path is given a copy of the members, not the array's address, and they are taken back
      // from it here, however it ends: the caller's loop then keeps end_ and cap_ in registers
      // and stores neither on an append (see State).
      State st{arena_, end_, cap_, max_size_};
      try {
        emplace_back_slow_value(&st, T(std::forward<Args>(args)...));
      } catch (...) {
        take(st);
        throw;
      }
      take(st);
      return end_[-1];
    } else {
      return emplace_back_slow(std::forward<Args>(args)...);
    }
  }

  // Never throw for capacity or OS reasons: false / nullptr and the array unchanged instead.
  // (T's own constructor may still throw, unless it is noexcept.)
  bool try_push_back(const T& value) noexcept(std::is_nothrow_copy_constructible_v<T>) {
    return try_emplace_back(value) != nullptr;
  }
  bool try_push_back(T&& value) noexcept(std::is_nothrow_move_constructible_v<T>) {
    return try_emplace_back(std::move(value)) != nullptr;
  }
  template <class... Args>
  T* try_emplace_back(Args&&... args) noexcept(std::is_nothrow_constructible_v<T, Args...>) {
    if (end_ == cap_) [[unlikely]] {
      return try_emplace_back_slow(std::forward<Args>(args)...);
    }
    return construct_one(std::forward<Args>(args)...);
  }

  // Appends every element of r, committing once. Strong guarantee.
  template <std::ranges::input_range R>
    requires std::constructible_from<T, std::ranges::range_reference_t<R>>
  void append_range(R&& r) {
    append_from(std::forward<R>(r), "DynArray::append_range");
  }

  // ---- assigning (replace every element; the reservation and its base stay) --------------------

  // Replaces the contents with count copies of value, or with the elements of [first, last), of
  // init or of r. The source may be, or refer to, this array's own elements.
  //
  // Strong guarantee when T's move constructor is noexcept: if copying an element, walking the
  // source or committing memory throws, size(), every element and capacity() are as before.
  //   - When building the new elements cannot throw (T nothrow constructible from a contiguous
  //     source's elements, or nothrow copy constructible for assign(count, value)), memory for
  //     them is committed first and the old elements are replaced in place: no extra cost.
  //   - Otherwise the new elements are built past the old ones, in this array's own
  //     reservation; then the old ones are destroyed and the new ones moved down to the front
  //     (a memmove for trivially copyable T). Cost: one move of each new element, and memory for
  //     the old and the new elements together at the peak, which stays committed afterwards
  //     (capacity() >= old size() + new size(); shrink_to_fit() returns it).
  //   - A source made of this array's own contiguous elements (assign(begin() + 1, end())) is
  //     kept by destroying the other elements and moving it to the front: no copy at all.
  // Where that cannot hold:
  //   - More new elements than max_size(): std::length_error, nothing changed.
  //   - Old and new elements together exceed max_size(): the old elements are destroyed first
  //     and the new ones built in their place, so a throw leaves the array empty, with
  //     capacity() as before (basic guarantee). A single-pass input (its length unknown) that
  //     runs into this does so when it reaches the end of the reservation: the new elements
  //     built so far move to the front and the rest follow them. A source given by non-contiguous
  //     iterators into this array's own elements must then not be used (they are destroyed).
  //   - T's move constructor may throw: a throw while copying still leaves everything as before,
  //     but if a move throws while the new elements move down, the array is left empty, with
  //     capacity() as before (basic guarantee).
  void assign(size_type count, const T& value) {
    const T* const source = std::addressof(value);
    if constexpr (std::is_nothrow_copy_constructible_v<T>) {
      if (!holds(source)) {
        if (count > max_size()) throw_length_error("DynArray::assign", count);
        commit_for_write(count, "DynArray::assign");
        clear();
        annotate(end_, first_element() + count);
        detail::uninitialized_fill_n(first_element(), count, value);
        end_ = first_element() + count;
        return;
      }
    }
    if (holds(source) && count <= max_size() && count > max_size() - size()) {
      // The old elements are destroyed before the new ones are built: copy value out first.
      const std::unique_ptr<const T> copy = std::make_unique<const T>(value);
      assign_counted(count, detail::repeat_source<T>{copy.get()});
    } else {
      assign_counted(count, detail::repeat_source<T>{source});
    }
  }
  template <class It, class S>
    requires detail::iterator_pair<It, S>
  void assign(It first, S last) {
    if constexpr (std::contiguous_iterator<It> && std::sized_sentinel_for<S, It> &&
                  std::is_same_v<std::remove_cv_t<std::iter_value_t<It>>, T>) {
      const auto n = static_cast<size_type>(last - first);
      const T* const source = n == 0 ? nullptr : std::to_address(first);
      if (n != 0 && holds(source)) {
        keep_only(static_cast<size_type>(source - first_element()), n);
        return;
      }
      if constexpr (std::is_nothrow_constructible_v<T, std::iter_reference_t<It>>) {
        if (n > max_size()) throw_length_error("DynArray::assign", n);
        commit_for_write(n, "DynArray::assign");
        clear();
        annotate(end_, first_element() + n);
        if (n != 0) std::uninitialized_copy_n(source, n, first_element());
        end_ = first_element() + n;
        return;
      }
    }
    if constexpr (detail::multi_pass<It>) {
      assign_counted(static_cast<size_type>(detail::pair_distance(first, last)), std::move(first));
    } else {
      assign_single_pass(std::move(first), std::move(last));
    }
  }
  void assign(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  template <std::ranges::input_range R>
    requires std::constructible_from<T, std::ranges::range_reference_t<R>>
  void assign_range(R&& r) {
    assign(std::ranges::begin(r), std::ranges::end(r));
  }
  DynArray& operator=(std::initializer_list<T> init) {
    assign(init);
    return *this;
  }

  // ---- removing
  // ----------------------------------------------------------------------------------

  // Destroys the last element. On an empty array: std::out_of_range (std::vector leaves it
  // undefined).
  void pop_back() {
    if (end_ == first_element())
      throw std::out_of_range("reservoir::DynArray::pop_back on an empty array");
    --end_;
    std::destroy_at(end_);
    annotate(end_ + 1, end_);
  }

  // Destroys every element; keeps the committed memory (see shrink_to_fit).
  void clear() noexcept { erase_tail(0); }

  // ---- insert / erase (shift later elements as std::vector does) --------------------------------

  iterator insert(const_iterator pos, const T& value) { return emplace(pos, value); }
  iterator insert(const_iterator pos, T&& value) { return emplace(pos, std::move(value)); }
  // The insert overloads below: at the end, an append (strong guarantee). In the middle, as
  // std::vector: memory for the new elements is committed first (a length_error or a refused
  // commit changes nothing), then the later elements move up once and the new ones are copied
  // into the gap; if an element's copy or move throws there, the array is valid and nothing
  // leaks (basic guarantee). A single-pass input range, whose length is unknown, is appended and
  // rotated into place instead. value may be an element of the array.
  iterator insert(const_iterator pos, size_type count, const T& value) {
    const size_type index = checked_index("insert", pos);
    if (index == size()) {
      resize_impl(size() + count_checked(count, "DynArray::insert"),
                  fill_with{std::addressof(value)}, "DynArray::insert");
    } else {
      const T copy(value);
      insert_shifting(index, count_checked(count, "DynArray::insert"),
                      detail::repeat_source<T>{std::addressof(copy)}, "DynArray::insert");
    }
    return make_iterator(first_element() + index);
  }
  template <class It>
    requires detail::iterator_pair<It, It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_type index = checked_index("insert", pos);
    if constexpr (detail::multi_pass<It>) {
      if (index != size()) {
        const auto n = static_cast<size_type>(detail::pair_distance(first, last));
        insert_shifting(index, n, first, "DynArray::insert");
        return make_iterator(first_element() + index);
      }
    }
    const size_type old_size = size();
    append_iterators(first, last, "DynArray::insert");
    std::rotate(first_element() + index, first_element() + old_size, first_element() + size());
    return make_iterator(first_element() + index);
  }
  iterator insert(const_iterator pos, std::initializer_list<T> init) {
    return insert_range(pos, init);
  }

  // Inserts the elements of r before pos, as insert(pos, first, last).
  template <std::ranges::input_range R>
  iterator insert_range(const_iterator pos, R&& r) {
    const size_type index = checked_index("insert", pos);
    if constexpr (std::ranges::forward_range<R>) {
      if (index != size()) {
        const auto n =
            static_cast<size_type>(detail::distance(std::ranges::begin(r), std::ranges::end(r)));
        insert_shifting(index, n, std::ranges::begin(r), "DynArray::insert_range");
        return make_iterator(first_element() + index);
      }
    }
    const size_type old_size = size();
    append_from(std::forward<R>(r), "DynArray::insert_range");
    std::rotate(first_element() + index, first_element() + old_size, first_element() + size());
    return make_iterator(first_element() + index);
  }

  template <class... Args>
  iterator emplace(const_iterator pos, Args&&... args) {
    const size_type index = checked_index("emplace", pos);
    if (size() == max_size()) throw_length_error("DynArray::insert/emplace", size() + 1);
    // The room for one more is committed here, so that a refusal names this call; what a throw
    // below committed is given back (at the end, the strong guarantee of emplace_back), unless
    // an element already lives there (a throwing shift after the last element moved up: the
    // basic guarantee, as std::vector's).
    const size_type old_capacity = capacity();
    commit_for_append(1, "DynArray::insert/emplace");
    try {
      if (index == size()) {
        emplace_back(std::forward<Args>(args)...);
        return make_iterator(first_element() + index);
      }
      // As std::vector: the new value is built first (args may refer to an element), the last
      // element moves into the new place past the end, the rest shift up one place, the value
      // moves into the gap.
      T value(std::forward<Args>(args)...);
      emplace_back(std::move(back()));
      std::move_backward(first_element() + index, end_ - 2, end_ - 1);
      first_element()[index] = std::move(value);
    } catch (...) {
      if (size() <= old_capacity) undo_commit(old_capacity);
      throw;
    }
    return make_iterator(first_element() + index);
  }

  iterator erase(const_iterator pos) {
    const size_type index = checked_index("erase", pos);
    if (index == size()) throw_out_of_range("erase", index);
    return erase(pos, pos + 1);
  }
  iterator erase(const_iterator first, const_iterator last) {
    const size_type i = checked_index("erase", first);
    const size_type j = checked_index("erase", last);
    if (i > j) throw std::invalid_argument("reservoir::DynArray::erase: first is after last");
    if (i != j) {
      std::move(first_element() + j, first_element() + size(), first_element() + i);
      erase_tail(size() - (j - i));
    }
    return make_iterator(first_element() + i);
  }

  // ---- resize
  // ------------------------------------------------------------------------------------

  // Grows with value-initialised (or copied) elements, or destroys the tail. Strong guarantee.
  void resize(size_type n) { resize_impl(n, value_construct{}, "DynArray::resize"); }
  void resize(size_type n, const T& value) {
    resize_impl(n, fill_with{std::addressof(value)}, "DynArray::resize");
  }

  void swap(DynArray& other) noexcept {
    using std::swap;
    swap(end_, other.end_);
    swap(cap_, other.cap_);
    swap(max_size_, other.max_size_);
    swap(arena_, other.arena_);
  }
  friend void swap(DynArray& a, DynArray& b) noexcept { a.swap(b); }

  friend bool operator==(const DynArray& a, const DynArray& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  // Lexicographic, through synth-three-way as std::vector: T's <=> where it has one, otherwise
  // its < (weak_ordering), so `a < b` works for a T with only < and ==.
  friend auto operator<=>(const DynArray& a, const DynArray& b)
    requires requires(const T& x) { detail::synth_three_way(x, x); }
  {
    using Cat =
        decltype(detail::synth_three_way(std::declval<const T&>(), std::declval<const T&>()));
    const T* i = a.first_element();
    const T* j = b.first_element();
    for (; i != a.end_ && j != b.end_; ++i) {
      if (Cat c = detail::synth_three_way(*i, *j); c != 0) return c;
      ++j;
    }
    return static_cast<Cat>(a.size() <=> b.size());
  }

 private:
  // The max_elements and max_bytes constructors: `call` names the one the user called, in every
  // exception (the Arena's refusals included).
  DynArray(max_elements limit, ArenaOptions options, const char* call)
      : arena_(new Arena(
            detail::make_arena(checked_bytes(limit.count, call), slot_options(options), call))),
        end_(first_element()),
        cap_(end_),
        max_size_(limit.count) {
    update_capacity();  // a reservation from the cache arrives with its first pages committed
  }

  // A sub-page slot is aligned to kSubPageSlotAlignment only: more strictly aligned elements
  // keep a page-granular reservation.
  static ArenaOptions slot_options(ArenaOptions options) noexcept {
    if constexpr (alignof(T) > kSubPageSlotAlignment) options.sub_page_slot = false;
    return options;
  }
  // The reservation's bytes for max_size elements; `op` is the constructor the user called, for
  // the message.
  static size_type checked_bytes(size_type max_size, const char* op) {
    constexpr size_type kSlack = detail::kAlignmentSlack<T>;
    if (max_size == 0) {
      throw std::invalid_argument("reservoir::" + std::string(op) +
                                  ": max_elements must be greater than 0");
    }
    if (max_size > ((std::numeric_limits<size_type>::max)() - kSlack) / sizeof(T)) {
      throw std::length_error("reservoir::" + std::string(op) + ": " + std::to_string(max_size) +
                              " elements of " + std::to_string(sizeof(T)) +
                              " bytes overflow the address space");
    }
    return max_size * sizeof(T) + kSlack;
  }
  static size_type elements_in(max_bytes limit) {
    if (limit.bytes / sizeof(T) == 0) {
      throw std::invalid_argument("reservoir::DynArray(max_bytes): " + std::to_string(limit.bytes) +
                                  " bytes hold no element of " + std::to_string(sizeof(T)) +
                                  " bytes");
    }
    return limit.bytes / sizeof(T);
  }

  // The first element's address in the reservation: its base, or the first address past it
  // aligned for an over-page-aligned T (detail/alignment.hpp).
  T* first_element() const noexcept {
    if (arena_ == nullptr) return nullptr;
    T* const first =
        reinterpret_cast<T*>(arena_->base() + detail::element_offset<T>(arena_->base()));
    assert(reinterpret_cast<std::uintptr_t>(first) % alignof(T) == 0);
    return first;
  }
  // Bytes of the reservation before first_element() (0 unless T is aligned beyond a page).
  size_type data_offset() const noexcept {
    if constexpr (alignof(T) <= detail::kMinBaseAlignment) {
      return 0;
    } else {
      return arena_ ? detail::element_offset<T>(arena_->base()) : 0;
    }
  }
  // The committed bytes that hold n elements from first_element(): what the arena is asked to
  // commit or to keep (it commits a prefix of the reservation, which starts before first_element()
  // for an over-aligned T).
  size_type bytes_for(size_type n) const noexcept {
    return n == 0 ? 0 : data_offset() + n * sizeof(T);
  }

  // `op` names the call the user made ("DynArray::resize", "DynArray(count)").
  [[noreturn]] void throw_length_error(const char* op, size_type wanted) const {
    if (default_reservation() && reserved_size() < default_max_size()) {
      // The default reservation came out smaller for lack of address space: out of memory, as
      // std::vector reports it, not a length the caller chose.
      throw OsAllocationError(
          "grow a default DynArray past its reservation of", reserved_size() * sizeof(T),
          first_element(), make_error_code(Refusal::default_reservation_full),
          "reservoir::" + std::string(op) + " needed it. " + address_space_advice());
    }
    throw std::length_error("reservoir::" + std::string(op) + ": " + std::to_string(wanted) +
                            " elements exceed max_size() " + std::to_string(max_size()));
  }
  [[noreturn]] void throw_out_of_range(const char* op, size_type i) const {
    throw std::out_of_range("reservoir::DynArray::" + std::string(op) + ": index " +
                            std::to_string(i) + " is out of range for size " +
                            std::to_string(size()));
  }

  size_type checked_index(const char* op, const_iterator it) const {
    const T* pos = it.base();
    if (pos < first_element() || pos > first_element() + size()) {
      throw std::out_of_range("reservoir::DynArray::" + std::string(op) +
                              ": iterator does not point into the array");
    }
    return static_cast<size_type>(pos - first_element());
  }

  // Iterators carry the reservation's bounds (used only by checked iterators).
  const T* reservation_end() const noexcept {
    const T* const first = first_element();
    return first ? first + reserved_size() : first;
  }
  iterator make_iterator(T* p) noexcept { return iterator(p, first_element(), reservation_end()); }
  const_iterator make_iterator(const T* p) const noexcept {
    return const_iterator(p, first_element(), reservation_end());
  }

  // Tells the sanitizers that the live elements now end at new_end instead of old_end, within
  // the committed [first_element(), cap_) (detail/annotations.hpp). Nothing without them.
  void annotate([[maybe_unused]] const T* old_end,
                [[maybe_unused]] const T* new_end) const noexcept {
    if constexpr (detail::kAnnotateContainers) {
      detail::annotate_contiguous(first_element(), cap_, old_end, new_end);
    }
  }

  // Constructs one element at end_ and advances end_. Under the sanitizers, the slot is made
  // accessible first and reported again if the constructor throws.
  template <class... Args>
  T* construct_one(Args&&... args) {
    if constexpr (detail::kAnnotateContainers) {
      annotate(end_, end_ + 1);
      try {
        std::construct_at(end_, std::forward<Args>(args)...);
      } catch (...) {
        annotate(end_ + 1, end_);
        throw;
      }
    } else {
      std::construct_at(end_, std::forward<Args>(args)...);
    }
    return end_++;
  }

  // Reserves the default address space on first use (default-constructed or moved-from arrays):
  // what the process-wide budget grants (default_reservation_size(): kDefaultReserveBytes while
  // few arrays exist, less when many do). If the OS refuses that (an address-space limit,
  // valgrind), it asks for the next smaller of the default tiers (kDefaultTiers, the sizes the
  // slot pools hold), down to kMinDefaultReserveBytes; max_size() reports what was granted.
  static constexpr std::size_t next_default_tier(std::size_t refused) noexcept {
    for (const std::size_t tier : kDefaultTiers)
      if (tier < refused) return tier;
    return 0;
  }
  static std::optional<Arena> reserve_default(size_type* max_size, std::error_code* ec) noexcept {
    for (std::size_t bytes = default_reservation_size(kDefaultReserveBytes);
         bytes >= kMinDefaultReserveBytes; bytes = next_default_tier(bytes)) {
      if (bytes / sizeof(T) == 0) break;
      if (std::optional<Arena> a =
              Arena::create(bytes / sizeof(T) * sizeof(T) + detail::kAlignmentSlack<T>, {}, ec)) {
        *max_size = bytes / sizeof(T);
        return a;
      }
    }
    return std::nullopt;
  }
  // `op` names the user's call that reserved.
  [[noreturn]] static void throw_reserve_error(std::error_code ec, const char* op) {
    // No OS call made when the budget granted nothing: the refusal is reservoir's own.
    throw OsAllocationError("reserve", kMinDefaultReserveBytes, nullptr,
                            ec ? ec : make_error_code(Refusal::address_space_budget),
                            "reservoir::" + std::string(op) +
                                " needed it. The process has no address space left for another "
                                "default DynArray: " +
                                address_space_advice());
  }
  // False (and nothing changed, `a` kept) if there is no memory for the arena's own block. The
  // throwing operator new, caught: the nothrow one calls it through the C++ runtime's own lazily
  // bound entry, one symbol binding more in a process's first array.
  [[nodiscard]] bool adopt(Arena&& a, size_type max_size) noexcept {
    Arena* held = nullptr;
    try {
      held = new Arena(std::move(a));
    } catch (const std::bad_alloc&) {
      return false;
    }
    delete arena_;
    arena_ = held;
    max_size_ = max_size | kDefaultReservation;
    // capacity() stays 0 until the caller's commit succeeds (update_capacity): a reservation
    // may arrive with its first pages committed (a recycled pool slot), and a refused first
    // growth must leave capacity() as it was.
    end_ = cap_ = first_element();
    return true;
  }
  void ensure_reserved(const char* op) {
    if (arena_ != nullptr) return;
    size_type max_size = 0;
    std::error_code ec;
    std::optional<Arena> a = reserve_default(&max_size, &ec);
    if (!a) throw_reserve_error(ec, op);
    if (!adopt(std::move(*a), max_size)) throw std::bad_alloc();
  }
  bool try_ensure_reserved() noexcept {
    if (arena_ != nullptr) return true;
    size_type max_size = 0;
    std::error_code ec;
    std::optional<Arena> a = reserve_default(&max_size, &ec);
    if (!a) return false;
    return adopt(std::move(*a), max_size);
  }

  // cap_ from the arena's committed size (after it changed). The sanitizers' view moves with it:
  // [end_, old cap_) is accessible again, [end_, new cap_) reported.
  void update_capacity() noexcept {
    annotate(end_, cap_);
    const size_type offset = data_offset();
    const size_type held = arena_ ? arena_->committed() : 0;
    const size_type committed = held > offset ? held - offset : 0;
    cap_ = first_element() + (std::min)(committed / sizeof(T), reserved_size());
    annotate(cap_, end_);
  }

  // Appends [first, last): with forward iterators it commits once; either way, if anything throws,
  // what was built is destroyed and the commit undone (strong guarantee).
  // `op` names the user's call in a std::length_error.
  template <class It, class S>
  void append_iterators(It first, S last, const char* op) {
    const size_type old_size = size();
    const size_type old_capacity = capacity();
    try {
      if constexpr (detail::multi_pass<It>) {
        const auto n = static_cast<size_type>(detail::pair_distance(first, last));
        commit_for_append(n, op);
        for (; first != last; ++first)
          construct_one(*first);
      } else {
        for (; first != last; ++first) {
          if (size() == max_size()) throw_length_error(op, size() + 1);
          if (end_ == cap_) commit_for_append(1, op);  // a refusal names op
          emplace_back(*first);
        }
      }
    } catch (...) {
      erase_tail(old_size);
      undo_commit(old_capacity);
      throw;
    }
  }

  // append_range(r), with `op` naming the user's call in a std::length_error. Strong guarantee.
  template <class R>
  void append_from(R&& r, const char* op) {
    if constexpr (std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                  std::is_trivially_copyable_v<T> &&
                  std::is_same_v<std::remove_cvref_t<std::ranges::range_reference_t<R>>, T>) {
      const auto n = static_cast<size_type>(std::ranges::size(r));
      commit_for_append(n, op);
      annotate(end_, end_ + n);
      if (n) std::memcpy(static_cast<void*>(end_), std::ranges::data(r), n * sizeof(T));
      end_ += n;
    } else {
      append_iterators(std::ranges::begin(r), std::ranges::end(r), op);
    }
  }

  // Whether p points at one of the elements.
  bool holds(const T* p) const noexcept {
    return !std::less<const T*>()(p, first_element()) && std::less<const T*>()(p, end_);
  }

  // assign() of n elements read from src (*src, ++src): built past the old elements when both fit
  // in the reservation, in their place otherwise (see assign()).
  template <class Src>
  void assign_counted(size_type n, Src src) {
    if (n > max_size()) throw_length_error("DynArray::assign", n);
    const size_type old_size = size();
    const size_type old_capacity = capacity();
    if (n <= max_size() - old_size) {
      commit_for_append(n, "DynArray::assign");  // strong
      try {
        for (size_type k = 0; k < n; ++k) {
          construct_one(*src);
          ++src;
        }
      } catch (...) {
        erase_tail(old_size);
        undo_commit(old_capacity);
        throw;
      }
      replace_front(old_size, old_capacity);
    } else {
      commit_for_write(n, "DynArray::assign");  // strong
      clear();
      try {
        for (size_type k = 0; k < n; ++k) {
          construct_one(*src);
          ++src;
        }
      } catch (...) {
        clear();
        undo_commit(old_capacity);
        throw;
      }
    }
  }

  // assign() from a single-pass input: built past the old elements until the reservation ends
  // (see assign()).
  template <class It, class S>
  void assign_single_pass(It first, S last) {
    const size_type old_capacity = capacity();
    size_type old = size();  // old elements still in front of the new ones
    try {
      for (; first != last; ++first) {
        // `old` is 0 before the move: if it throws, replace_front has destroyed everything.
        if (old != 0 && size() == max_size()) replace_front(std::exchange(old, 0), old_capacity);
        if (size() == max_size()) throw_length_error("DynArray::assign", size() + 1);
        if (end_ == cap_) commit_for_append(1, "DynArray::assign");  // a refusal names it
        emplace_back(*first);
      }
    } catch (...) {
      erase_tail(old);
      undo_commit(old_capacity);
      throw;
    }
    replace_front(old, old_capacity);
  }

  // The new contents were built past the first `old` elements: destroys those and moves the new
  // ones down to the front.
  void replace_front(size_type old, size_type old_capacity) {
    std::destroy(first_element(), first_element() + old);
    move_down(old, old_capacity);
  }
  // Keeps only the elements [i, i + n) (n >= 1), moved to the front; destroys the others.
  void keep_only(size_type i, size_type n) {
    erase_tail(i + n);
    std::destroy(first_element(), first_element() + i);
    move_down(i, capacity());
  }
  // [first_element(), first_element() + gap) holds no live element, [first_element() + gap, end_)
  // the contents: moves them to the front. If T's move constructor throws, every element is
  // destroyed and the commit undone down to old_capacity.
  void move_down(size_type gap, size_type old_capacity) {
    if (gap == 0) return;
    const size_type n = size() - gap;
    T* const from = first_element() + gap;
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (n != 0) std::memmove(static_cast<void*>(first_element()), from, n * sizeof(T));
    } else {
      size_type k = 0;
      try {
        for (; k < n; ++k) {  // slot k is free: it held an old element, or a source moved earlier
          std::construct_at(first_element() + k, std::move(from[k]));
          std::destroy_at(from + k);
        }
      } catch (...) {
        std::destroy(first_element(), first_element() + k);
        std::destroy(from + k, end_);
        annotate(end_, first_element());
        end_ = first_element();
        undo_commit(old_capacity);
        throw;
      }
    }
    annotate(end_, first_element() + n);
    end_ = first_element() + n;
  }

  size_type count_checked(size_type count, const char* op) const {
    if (count > max_size() - size()) throw_length_error(op, count);
    return count;
  }

  // Commits room for n more elements (the slow path of every append). `op` names the user's call
  // in every exception: a std::length_error, a refused reservation or commit.
  void commit_for_append(size_type n, const char* op) {
    if (n <= capacity() - size()) return;
    if (n > max_size() - size()) throw_length_error(op, n > max_size() ? n : size() + n);
    commit_for_write(size() + n, op);
  }
  // Commits for n elements about to be written: all of the new commit is backed with RAM at
  // once (Populate::all). reserve() is the one other way to commit ahead (Populate::first_step).
  void commit_for_write(size_type n, const char* op) { commit_ahead(n, Arena::Populate::all, op); }
  // Commits for n elements, backing `populate` of the new commit with RAM at once. The name of
  // the user's call, `op`, travels only down this slow path: a refusal's message is composed
  // once, from the arena's ArenaError, where it is thrown.
  void commit_ahead(size_type n, Arena::Populate populate, const char* op) {
    if (n <= capacity()) return;
    if (n > max_size()) throw_length_error(op, n);
    ensure_reserved(op);
    // The first reservation may have been granted smaller than default_max_size() (the
    // address-space budget, or a refusing OS): check again against what max_size() is now.
    if (n > reserved_size()) throw_length_error(op, n);
    if (ArenaError error; !arena_->try_commit(bytes_for(n), populate, &error)) error.raise(op);
    update_capacity();
  }
  bool try_commit_for_append(size_type n) noexcept {
    if (n > max_size() - size() || !try_ensure_reserved()) return false;
    if (n > reserved_size() - size()) return false;  // the reservation came out smaller
    if (!arena_->try_commit(bytes_for(size() + n))) return false;
    update_capacity();
    return true;
  }

  // Inserts n elements, read in order from src (*src, ++src), before first_element() + index <
  // size(): the one shift of std::vector's insert. The gap is [pos, pos + n); elements that land
  // past the old end are constructed there, the others assigned.
  template <class Src>
  void insert_shifting(size_type index, size_type n, Src src, const char* op) {
    if (n == 0) return;
    commit_for_append(n, op);
    T* const pos = first_element() + index;
    T* const old_end = end_;
    const auto tail = static_cast<size_type>(old_end - pos);
    if (n <= tail) {
      for (T* p = old_end - n; p != old_end; ++p)
        construct_one(std::move(*p));
      std::move_backward(pos, old_end - n, old_end);
      for (T* p = pos; p != pos + n; ++p) {
        assign_from(*p, *src);
        ++src;
      }
    } else {
      Src rest = src;  // the new elements that go past the old end
      for (size_type k = 0; k < tail; ++k)
        ++rest;
      for (size_type k = tail; k < n; ++k) {
        construct_one(*rest);
        ++rest;
      }
      for (T* p = pos; p != old_end; ++p)
        construct_one(std::move(*p));
      for (T* p = pos; p != old_end; ++p) {
        assign_from(*p, *src);
        ++src;
      }
    }
  }
  // *dst = value where T is assignable from it; otherwise (T only constructible from it, as
  // insert requires) a T built from it is move-assigned.
  template <class U>
  static void assign_from(T& dst, U&& value) {
    if constexpr (std::is_assignable_v<T&, U&&>) {
      dst = std::forward<U>(value);
    } else {
      dst = T(std::forward<U>(value));
    }
  }

  template <class... Args>
  static constexpr bool kSlowPathByValue =
      sizeof...(Args) == 1 && (std::is_same_v<std::remove_cvref_t<Args>, T> && ...) &&
      std::is_trivially_copyable_v<T> && sizeof(T) <= 2 * sizeof(void*);

  // The by-value slow path's view of an array: its members, copied. It is static and takes the
  // caller's copy, never the array's address: an array whose address no opaque call receives can
  // live in registers, so the caller's append loop keeps end_ there rather than storing it back
  // to the array on every append (an out-of-line call given `this` could read it).
  struct State {
    Arena* arena;
    T* end;
    T* cap;
    size_type max_size;
  };
  void take(const State& st) noexcept {
    arena_ = st.arena;
    end_ = st.end;
    cap_ = st.cap;
    max_size_ = st.max_size;
  }
  // Commits for one more element and appends `value`, on *st. However it ends (a refused commit
  // throws) *st holds what the array is then, for the caller to take: a reservation made before
  // a refused commit is kept, as the member slow path keeps it.
  RESERVOIR_COLD_NOINLINE static void emplace_back_slow_value(State* st, T value) {
    DynArray work;
    work.take(*st);
    struct GiveBack {
      DynArray& from;
      State* to;
      ~GiveBack() {
        *to = State{from.arena_, from.end_, from.cap_, from.max_size_};
        from.arena_ = nullptr;
        from.end_ = from.cap_ = nullptr;
        from.max_size_ = 0;
      }
    } give{work, st};
    // Trivially copyable: constructing it cannot throw afterwards.
    work.commit_for_append(1, "DynArray::push_back/emplace_back");
    work.construct_one(value);
  }

  template <class... Args>
  RESERVOIR_COLD_NOINLINE reference emplace_back_slow(Args&&... args) {
    const size_type old_capacity = capacity();
    commit_for_append(1, "DynArray::push_back/emplace_back");
    try {
      return *construct_one(std::forward<Args>(args)...);
    } catch (...) {
      undo_commit(old_capacity);
      throw;
    }
  }

  template <class... Args>
  RESERVOIR_COLD_NOINLINE T* try_emplace_back_slow(Args&&... args) noexcept(
      std::is_nothrow_constructible_v<T, Args...>) {
    const size_type old_capacity = capacity();
    if (!try_commit_for_append(1)) return nullptr;
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      return construct_one(std::forward<Args>(args)...);
    } else {
      try {
        return construct_one(std::forward<Args>(args)...);
      } catch (...) {
        undo_commit(old_capacity);  // the strong guarantee: capacity() as before
        throw;
      }
    }
  }

  // Gives back what a failed operation committed, so capacity() is as before.
  void undo_commit(size_type old_capacity) noexcept {
    if (arena_ != nullptr) (void)arena_->trim(bytes_for(old_capacity));
    update_capacity();
  }

  // The element makers of resize_impl: value-initialised, or copies of *value.
  struct value_construct {
    void operator()(T* p, size_type k) const { std::uninitialized_value_construct_n(p, k); }
  };
  struct fill_with {
    const T* value;
    void operator()(T* p, size_type k) const { detail::uninitialized_fill_n(p, k, *value); }
  };

  // Resizes to n, making the new elements with construct(first, count); `op` names the user's
  // call in every exception.
  template <class Construct>
  void resize_impl(size_type n, Construct construct, const char* op) {
    if (n <= size()) {
      erase_tail(n);
      return;
    }
    const size_type old_capacity = capacity();
    commit_for_append(n - size(), op);
    annotate(end_, first_element() + n);
    try {
      construct(end_, n - size());  // destroys what it built if it throws
    } catch (...) {
      annotate(first_element() + n, end_);
      undo_commit(old_capacity);
      throw;
    }
    end_ = first_element() + n;
  }

  void erase_tail(size_type new_size) noexcept {
    std::destroy(first_element() + new_size, end_);
    annotate(end_, first_element() + new_size);
    end_ = first_element() + new_size;
  }

  void destroy_all() noexcept { erase_tail(0); }

  // Releases the reservation and the arena's block, given the block only.
  static void release(Arena* arena) noexcept { delete arena; }
  // What arena() shows before the first reservation: an empty arena.
  static const Arena& no_arena() noexcept {
    static const Arena empty;
    return empty;
  }

  void steal(DynArray& other) noexcept {
    delete arena_;
    arena_ = std::exchange(other.arena_, nullptr);
    end_ = std::exchange(other.end_, nullptr);
    cap_ = std::exchange(other.cap_, nullptr);
    max_size_ = std::exchange(other.max_size_, 0);
  }

  // The elements reserved, without the flag; 0: the default reservation, not made yet.
  size_type reserved_size() const noexcept { return max_size_ & ~kDefaultReservation; }
  // Reserved lazily, the default way (a copy is a default array too).
  bool default_reservation() const noexcept { return (max_size_ & kDefaultReservation) != 0; }
  // No reservation holds 2^63 elements of any size: the top bit of max_size_ is free.
  static constexpr size_type kDefaultReservation = ~(static_cast<size_type>(-1) >> 1);

  // Four words, as std::vector's three plus the reservation: the first element is the arena's
  // base (or the first address past it aligned for T), so it is not stored. The arena is held
  // apart (one block, made with the reservation), so that the slow paths and the destructor
  // reach it through a pointer that is not into the array (see State).
  Arena* arena_ = nullptr;
  T* end_ = nullptr;        // one past the last element (std::vector's representation: the append
  T* cap_ = nullptr;        // fast path compares two pointers and stores through one)
  size_type max_size_ = 0;  // reserved_size(), with kDefaultReservation when reserved lazily
};
static_assert(sizeof(void*) != 8 || sizeof(DynArray<int>) <= 64, "a DynArray is eight words");

template <class It, class S>
  requires detail::iterator_pair<It, S>
DynArray(It, S) -> DynArray<typename std::iterator_traits<It>::value_type>;

// C++20 uniform container erasure, found by ADL: erases every element equal to value / for which
// pred is true, keeping the order of the rest; returns how many were erased.
template <class T, class U>
typename DynArray<T>::size_type erase(DynArray<T>& a, const U& value) {
  const auto it = std::remove(a.begin(), a.end(), value);
  const auto n = static_cast<typename DynArray<T>::size_type>(a.end() - it);
  a.erase(it, a.end());
  return n;
}
template <class T, class Pred>
typename DynArray<T>::size_type erase_if(DynArray<T>& a, Pred pred) {
  const auto it = std::remove_if(a.begin(), a.end(), pred);
  const auto n = static_cast<typename DynArray<T>::size_type>(a.end() - it);
  a.erase(it, a.end());
  return n;
}

RESERVOIR_END_ITERATOR_NAMESPACE

}  // namespace reservoir
