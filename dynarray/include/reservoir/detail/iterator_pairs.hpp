// reservoir/detail/iterator_pairs.hpp - what DynArray's iterator-pair and comparison members need
// of iterators and elements, apart from any container: the iterator pairs they accept, how far
// apart a pair is, and the standard's synth-three-way.
#pragma once

#include <compare>
#include <concepts>
#include <cstddef>
#include <iterator>

namespace reservoir {
namespace detail {

// std::ranges::distance for an iterator and its sentinel (libc++ before 16 lacks it).
template <std::input_iterator It, std::sentinel_for<It> S>
constexpr std::iter_difference_t<It> distance(It first, S last) {
  if constexpr (std::sized_sentinel_for<S, It>) {
    return last - first;
  } else {
    std::iter_difference_t<It> n = 0;
    for (; first != last; ++first)
      ++n;
    return n;
  }
}

// The standard's exposition-only synth-three-way ([expos.only.entity]): <=> when T has it,
// otherwise a weak ordering built from <.
template <class T>
constexpr auto synth_three_way(const T& x, const T& y)
  requires requires {
    { x < y } -> std::convertible_to<bool>;
    { y < x } -> std::convertible_to<bool>;
  }
{
  if constexpr (std::three_way_comparable<T>) {
    return x <=> y;
  } else {
    if (x < y) return std::weak_ordering::less;
    if (y < x) return std::weak_ordering::greater;
    return std::weak_ordering::equivalent;
  }
}

// A C++17 LegacyInputIterator that may not model std::input_iterator (not default-constructible,
// or with a non-const operator*): the iterator-pair members accept it, as std::vector's do.
template <class It>
concept legacy_input_iterator =
    requires { typename std::iterator_traits<It>::iterator_category; } &&
    std::derived_from<typename std::iterator_traits<It>::iterator_category,
                      std::input_iterator_tag>;

// An iterator pair the iterator-pair members take: a C++20 iterator and sentinel, or two
// LegacyInputIterators of the same type.
template <class It, class S>
concept iterator_pair = (std::input_iterator<It> && std::sentinel_for<S, It>) ||
                        (legacy_input_iterator<It> && std::same_as<It, S>);

// Whether [first, last) may be walked twice (its length known before copying).
template <class It>
concept multi_pass = std::forward_iterator<It> ||
                     (legacy_input_iterator<It> &&
                      std::derived_from<typename std::iterator_traits<It>::iterator_category,
                                        std::forward_iterator_tag>);

// A source of the same value, for DynArray's insert(pos, n, value): *src and ++src only.
template <class T>
struct repeat_source {
  const T* value;
  const T& operator*() const noexcept { return *value; }
  repeat_source& operator++() noexcept { return *this; }
};

template <class It, class S>
constexpr std::ptrdiff_t pair_distance(It first, S last) {
  if constexpr (std::sized_sentinel_for<S, It>) {
    return static_cast<std::ptrdiff_t>(last - first);
  } else {
    std::ptrdiff_t n = 0;
    for (; first != last; ++first)
      ++n;
    return n;
  }
}

}  // namespace detail

}  // namespace reservoir
