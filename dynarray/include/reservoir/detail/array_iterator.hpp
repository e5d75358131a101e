// reservoir/detail/array_iterator.hpp - the contiguous iterator of DynArray.
//
// A class wrapping a T* (as libstdc++'s __normal_iterator), so that `--a.end()` works where a raw
// pointer prvalue would not. It models std::contiguous_iterator, so std::span, std::to_address
// and every algorithm see a pointer.
//
// Checked iterators (RESERVOIR_CHECKED_ITERATORS, on by default when NDEBUG is not defined): the
// iterator also carries its array's reservation [base, base + max_size()), which never moves, so
// it stays valid however the array grows or is moved. Dereferencing a value-initialised iterator
// or one outside the reservation, arithmetic that leaves it, and comparing or subtracting
// iterators of different arrays print a message to stderr and abort, as a failed assert does.
// Reads in [size(), capacity()) are the sanitizer annotations' job (annotations.hpp); reads past
// the committed memory fault on the guard pages. Unchecked, the iterator is one pointer and every
// operation compiles to the pointer operation.
//
// A checked iterator is a different type (three pointers), so DynArray lives in the inline
// namespace reservoir::checked_iterators then: translation units that disagree on the macro get
// different symbols (a link error where they exchange arrays) instead of a silent ODR violation.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <type_traits>

#if !defined(RESERVOIR_CHECKED_ITERATORS)
#if defined(NDEBUG)
#define RESERVOIR_CHECKED_ITERATORS 0
#else
#define RESERVOIR_CHECKED_ITERATORS 1
#endif
#endif

#if RESERVOIR_CHECKED_ITERATORS
#define RESERVOIR_BEGIN_ITERATOR_NAMESPACE inline namespace checked_iterators {
#define RESERVOIR_END_ITERATOR_NAMESPACE }
#else
#define RESERVOIR_BEGIN_ITERATOR_NAMESPACE
#define RESERVOIR_END_ITERATOR_NAMESPACE
#endif

namespace reservoir::detail {

// This translation unit's choice (internal linkage: translation units may differ).
constexpr bool kCheckedIterators = RESERVOIR_CHECKED_ITERATORS != 0;

[[noreturn]] inline void iterator_check_failed(const char* what) noexcept {
  std::fprintf(stderr, "reservoir::DynArray iterator: %s\n", what);
  std::abort();
}
inline constexpr void iterator_check(bool ok, const char* what) noexcept {
  if (!ok) iterator_check_failed(what);
}

// The reservation an iterator may point into: carried only by checked iterators.
template <bool Checked>
struct iterator_bounds {
  constexpr iterator_bounds() noexcept = default;
  constexpr iterator_bounds(const void*, const void*) noexcept {}
};
template <>
struct iterator_bounds<true> {
  constexpr iterator_bounds() noexcept = default;
  constexpr iterator_bounds(const void* lo_, const void* hi_) noexcept : lo(lo_), hi(hi_) {}
  const void* lo = nullptr;
  const void* hi = nullptr;
};

// E is T for iterator and const T for const_iterator. E may be incomplete until an operation is
// used. Checked and unchecked iterators are different types, so translation units that choose
// differently never share one.
template <class E, bool Checked>
class array_iterator {
 public:
  using iterator_concept = std::contiguous_iterator_tag;
  using iterator_category = std::random_access_iterator_tag;
  using value_type = std::remove_cv_t<E>;
  using difference_type = std::ptrdiff_t;
  using pointer = E*;
  using reference = E&;
  // For std::pointer_traits (std::to_address, std::contiguous_iterator): libc++ before 15 cannot
  // deduce it from a template with a non-type parameter.
  using element_type = E;

  constexpr array_iterator() noexcept = default;
  // p in the reservation [lo, hi) of its array (only checked iterators keep lo and hi).
  constexpr array_iterator(E* p, const E* lo, const E* hi) noexcept : p_(p), bounds_(lo, hi) {}
  // iterator -> const_iterator.
  template <class U>
    requires std::is_same_v<const U, E> && (!std::is_same_v<U, E>)
  constexpr array_iterator(const array_iterator<U, Checked>& other) noexcept
      : p_(other.p_), bounds_(other.bounds_) {}

  // The pointer it wraps.
  constexpr E* base() const noexcept { return p_; }

  constexpr reference operator*() const noexcept {
    check_dereferenceable(p_);
    return *p_;
  }
  constexpr pointer operator->() const noexcept {
    // Not checked: std::to_address takes end() through here, which points one past the last.
    return p_;
  }
  constexpr reference operator[](difference_type n) const noexcept {
    check_dereferenceable(p_ + n);
    return p_[n];
  }

  constexpr array_iterator& operator++() noexcept { return *this += 1; }
  constexpr array_iterator operator++(int) noexcept {
    array_iterator old = *this;
    *this += 1;
    return old;
  }
  constexpr array_iterator& operator--() noexcept { return *this -= 1; }
  constexpr array_iterator operator--(int) noexcept {
    array_iterator old = *this;
    *this -= 1;
    return old;
  }
  constexpr array_iterator& operator+=(difference_type n) noexcept {
    if constexpr (Checked) {
      iterator_check(n == 0 || p_ != nullptr, "arithmetic on a value-initialised iterator");
      const auto* lo = static_cast<const E*>(bounds_.lo);
      const auto* hi = static_cast<const E*>(bounds_.hi);
      iterator_check(n >= lo - p_ && n <= hi - p_,
                     "arithmetic moves the iterator out of its array's reservation");
    }
    p_ += n;
    return *this;
  }
  constexpr array_iterator& operator-=(difference_type n) noexcept { return *this += -n; }
  friend constexpr array_iterator operator+(array_iterator it, difference_type n) noexcept {
    return it += n;
  }
  friend constexpr array_iterator operator+(difference_type n, array_iterator it) noexcept {
    return it += n;
  }
  friend constexpr array_iterator operator-(array_iterator it, difference_type n) noexcept {
    return it -= n;
  }
  friend constexpr difference_type operator-(const array_iterator& a,
                                             const array_iterator& b) noexcept {
    a.check_same_array(b);
    return a.p_ - b.p_;
  }

  friend constexpr bool operator==(const array_iterator& a, const array_iterator& b) noexcept {
    a.check_same_array(b);
    return a.p_ == b.p_;
  }
  friend constexpr std::strong_ordering operator<=>(const array_iterator& a,
                                                    const array_iterator& b) noexcept {
    a.check_same_array(b);
    return a.p_ <=> b.p_;
  }

 private:
  template <class U, bool C>
  friend class array_iterator;

  constexpr void check_dereferenceable([[maybe_unused]] const E* p) const noexcept {
    if constexpr (Checked) {
      iterator_check(p != nullptr, "dereferencing a value-initialised iterator");
      iterator_check(p >= bounds_.lo && p < bounds_.hi,
                     "dereferencing outside the array's reservation");
    }
  }
  constexpr void check_same_array([[maybe_unused]] const array_iterator& other) const noexcept {
    if constexpr (Checked) {
      iterator_check(bounds_.lo == other.bounds_.lo,
                     "comparing or subtracting iterators of different arrays");
    }
  }

  E* p_ = nullptr;
  [[no_unique_address]] iterator_bounds<Checked> bounds_;
};

}  // namespace reservoir::detail
