// Shared pieces of the conformance suite. Each TEST_CASE_TEMPLATE runs its body on
// std::vector<T> and on reservoir::DynArray<T> and asserts only what the standard requires of
// std::vector ([vector] and [sequence.reqmts]); capacities are never asserted exactly.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <reservoir/dynarray.hpp>

namespace conformance {

// An element whose copy throws on the n-th copy from now (n < 0: never).
struct Thrower {
  static inline int countdown = -1;
  static inline long long live = 0;
  int v = 0;
  Thrower() { ++live; }
  Thrower(int x) : v(x) { ++live; }  // NOLINT: implicit, as int -> element in brace lists
  Thrower(const Thrower& o) : v(o.v) {
    if (countdown >= 0 && countdown-- == 0) throw std::runtime_error("Thrower copy");
    ++live;
  }
  Thrower(Thrower&& o) noexcept : v(o.v) { ++live; }
  Thrower& operator=(const Thrower& o) {
    if (countdown >= 0 && countdown-- == 0) throw std::runtime_error("Thrower copy");
    v = o.v;
    return *this;
  }
  Thrower& operator=(Thrower&& o) noexcept {
    v = o.v;
    return *this;
  }
  ~Thrower() { --live; }
  explicit operator int() const { return v; }
  friend bool operator==(const Thrower& a, const Thrower& b) { return a.v == b.v; }
  friend bool operator<(const Thrower& a, const Thrower& b) { return a.v < b.v; }
};

// A single-pass input iterator over ints (C++20 input_iterator, not forward).
struct InputIt {
  using value_type = int;
  using difference_type = std::ptrdiff_t;
  using iterator_category = std::input_iterator_tag;
  using pointer = const int*;
  using reference = const int&;
  const int* p = nullptr;
  const int& operator*() const { return *p; }
  InputIt& operator++() {
    ++p;
    return *this;
  }
  InputIt operator++(int) {
    InputIt old = *this;
    ++p;
    return old;
  }
  friend bool operator==(const InputIt& a, const InputIt& b) { return a.p == b.p; }
};
static_assert(std::input_iterator<InputIt> && !std::forward_iterator<InputIt>);

// A forward iterator over ints whose dereference throws at a chosen position.
struct ThrowingIt {
  using value_type = int;
  using difference_type = std::ptrdiff_t;
  using iterator_category = std::forward_iterator_tag;
  using pointer = const int*;
  using reference = int;
  const int* p = nullptr;
  const int* bad = nullptr;
  int operator*() const {
    if (p == bad) throw std::runtime_error("ThrowingIt");
    return *p;
  }
  ThrowingIt& operator++() {
    ++p;
    return *this;
  }
  ThrowingIt operator++(int) {
    ThrowingIt old = *this;
    ++p;
    return old;
  }
  friend bool operator==(const ThrowingIt& a, const ThrowingIt& b) { return a.p == b.p; }
};
static_assert(std::forward_iterator<ThrowingIt>);

template <class C>
std::vector<int> values(const C& c) {
  std::vector<int> out;
  for (const auto& x : c)
    out.push_back(static_cast<int>(x));
  return out;
}
template <class C>
  requires std::same_as<typename C::value_type, std::string>
std::vector<int> values(const C& c) {
  std::vector<int> out;
  for (const auto& x : c)
    out.push_back(std::stoi(x));
  return out;
}

template <class T>
T make(int i) {
  if constexpr (std::is_same_v<T, std::string>) {
    return std::to_string(i);
  } else {
    return T(i);
  }
}

}  // namespace conformance

// The containers every case runs on.
#define CONFORMANCE_TYPES(T) std::vector<T>, reservoir::DynArray<T>
