// [container.reqmts], [sequence.reqmts], [vector]: element types that take the container's code at
// its word. Each one calls every member std::vector has that its requirements allow, on
// std::vector<T> and DynArray<T> alike; that the case compiles for both is half of the test.
//   - Amp overloads unary operator& (the container must use std::addressof);
//   - Comma has an ADL operator, for any operands that is deleted (a loop written `++a, ++b` over
//     iterators associated with it does not compile);
//   - EqOnly has == and no < (comparisons other than == must not be required);
//   - FromInt is constructible but not assignable from int (inserting ints needs construction
//     only, and move assignment for a middle insert);
//   - MoveOnly has no copy;
//   - conformance::Thrower copies that throw (here only when told to).
#include <algorithm>
#include <memory>
#include <ranges>
#include <span>
#include <utility>

#include "conformance.hpp"

namespace hostile {

struct Amp {
  int v = 0;
  Amp() = default;
  explicit Amp(int x) : v(x) {}
  int operator&() const { return 0; }
  friend bool operator==(const Amp& a, const Amp& b) { return a.v == b.v; }
  friend bool operator<(const Amp& a, const Amp& b) { return a.v < b.v; }
};

struct Comma {
  int v = 0;
  Comma() = default;
  explicit Comma(int x) : v(x) {}
  template <class A, class B>
  friend void operator,(A&&, B&&) = delete;
  friend bool operator==(const Comma& a, const Comma& b) { return a.v == b.v; }
  friend bool operator<(const Comma& a, const Comma& b) { return a.v < b.v; }
};

struct EqOnly {
  int v = 0;
  EqOnly() = default;
  explicit EqOnly(int x) : v(x) {}
  friend bool operator==(const EqOnly& a, const EqOnly& b) { return a.v == b.v; }
};

struct FromInt {
  int v;
  FromInt(int x) : v(x) {}  // NOLINT: implicit, so a range of ints constructs it
  friend bool operator==(const FromInt& a, const FromInt& b) { return a.v == b.v; }

 private:
  void operator=(int);
};
static_assert(std::is_constructible_v<FromInt, int&> && !std::is_assignable_v<FromInt&, int&>);

struct MoveOnly {
  std::unique_ptr<int> p;
  MoveOnly() : p(std::make_unique<int>(0)) {}
  explicit MoveOnly(int x) : p(std::make_unique<int>(x)) {}
  MoveOnly(MoveOnly&&) noexcept = default;
  MoveOnly& operator=(MoveOnly&&) noexcept = default;
  int value() const { return p ? *p : -1; }
  friend bool operator==(const MoveOnly& a, const MoveOnly& b) { return a.value() == b.value(); }
};

template <class T>
int value_of(const T& x) {
  if constexpr (std::is_same_v<T, MoveOnly>) {
    return x.value();
  } else {
    return x.v;
  }
}
template <class C>
std::vector<int> ints(const C& c) {
  std::vector<int> out;
  for (const auto& x : c)
    out.push_back(value_of(x));
  return out;
}

// A single-pass input iterator over T (its value type, so T is associated with it).
template <class T>
struct Input {
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using iterator_category = std::input_iterator_tag;
  using pointer = const T*;
  using reference = const T&;
  const T* p = nullptr;
  const T& operator*() const { return *p; }
  Input& operator++() {
    ++p;
    return *this;
  }
  Input operator++(int) {
    Input old = *this;
    ++p;
    return old;
  }
  friend bool operator==(const Input& a, const Input& b) { return a.p == b.p; }
};

}  // namespace hostile

using hostile::ints;
using hostile::value_of;

namespace {

// Every member of std::vector that a copyable T's requirements allow.
template <class V>
void every_member() {
  using T = typename V::value_type;
  constexpr bool kDefault = std::is_default_constructible_v<T>;
  constexpr bool kLess = requires(const T& x) { x < x; };
  const T one(1), two(2), three(3);
  const std::vector<T> src{T(4), T(5), T(6)};
  const T* const src_data = src.data();

  // Constructors.
  V empty;
  CHECK(empty.empty());
  V counted(2, one);
  CHECK(ints(counted) == std::vector<int>{1, 1});
  if constexpr (kDefault) {
    V defaulted(3);
    CHECK(defaulted.size() == 3);
  }
  V ranged(src.begin(), src.end());
  CHECK(ints(ranged) == std::vector<int>{4, 5, 6});
  V input(hostile::Input<T>{src_data}, hostile::Input<T>{src_data + 3});
  CHECK(ints(input) == std::vector<int>{4, 5, 6});
  V listed{one, two, three};
  CHECK(ints(listed) == std::vector<int>{1, 2, 3});
  V copied(listed);
  V moved(std::move(copied));
  CHECK(ints(moved) == std::vector<int>{1, 2, 3});

  // Assignment: both operators (and self-assignment), the list, every assign overload.
  copied = listed;
  CHECK(ints(copied) == std::vector<int>{1, 2, 3});
  V& self = copied;
  copied = self;
  CHECK(ints(copied) == std::vector<int>{1, 2, 3});
  moved = std::move(copied);
  CHECK(ints(moved) == std::vector<int>{1, 2, 3});
  moved = {three, one};
  CHECK(ints(moved) == std::vector<int>{3, 1});
  moved.assign(3, two);
  CHECK(ints(moved) == std::vector<int>{2, 2, 2});
  moved.assign(src.begin(), src.end());
  CHECK(ints(moved) == std::vector<int>{4, 5, 6});
  moved.assign(hostile::Input<T>{src_data}, hostile::Input<T>{src_data + 2});
  CHECK(ints(moved) == std::vector<int>{4, 5});
  moved.assign({one, three});
  CHECK(ints(moved) == std::vector<int>{1, 3});
  moved.assign(listed.begin() + 1, listed.end());
  moved.assign(moved.begin() + 1, moved.end());  // a source inside the array
  CHECK(ints(moved) == std::vector<int>{3});
#if defined(__cpp_lib_containers_ranges)
  moved.assign_range(src);
  CHECK(ints(moved) == std::vector<int>{4, 5, 6});
  V from_range(std::from_range, src);
  CHECK(ints(from_range) == std::vector<int>{4, 5, 6});
#endif
  if constexpr (std::is_same_v<V, reservoir::DynArray<T>>) {
    moved.assign_range(src);
    CHECK(ints(moved) == std::vector<int>{4, 5, 6});
  }

  // Access, iteration, capacity.
  V a{one, two, three};
  CHECK(value_of(a.at(1)) == 2);
  CHECK(value_of(a[2]) == 3);
  CHECK(value_of(a.front()) == 1);
  CHECK(value_of(a.back()) == 3);
  CHECK(value_of(*a.data()) == 1);
  CHECK(std::distance(a.begin(), a.end()) == 3);
  CHECK(std::distance(a.cbegin(), a.cend()) == 3);
  CHECK(value_of(*a.rbegin()) == 3);
  CHECK(std::distance(a.crbegin(), a.crend()) == 3);
  CHECK(a.max_size() >= a.size());
  a.reserve(20);
  CHECK(a.capacity() >= 20);
  a.shrink_to_fit();
  CHECK(a.capacity() >= a.size());

  // Modifiers.
  a.push_back(one);
  a.push_back(T(2));
  a.emplace_back(7);
  a.pop_back();
  CHECK(ints(a) == std::vector<int>{1, 2, 3, 1, 2});
  a.insert(a.begin() + 1, three);
  a.insert(a.begin() + 1, T(4));
  a.insert(a.begin(), 2, two);
  a.insert(a.end(), 1, one);
  CHECK(ints(a) == std::vector<int>{2, 2, 1, 4, 3, 2, 3, 1, 2, 1});
  a.insert(a.begin() + 3, src.begin(), src.end());
  a.insert(a.end(), src.begin(), src.begin() + 1);
  a.insert(a.begin() + 1, hostile::Input<T>{src_data}, hostile::Input<T>{src_data + 2});
  a.insert(a.begin(), {three, three});
  CHECK(ints(a) == std::vector<int>{3, 3, 2, 4, 5, 2, 1, 4, 5, 6, 4, 3, 2, 3, 1, 2, 1, 4});
  a.emplace(a.begin() + 2, 9);
  a.emplace(a.end(), 8);
  a.erase(a.begin());
  a.erase(a.begin() + 1, a.begin() + 4);
  CHECK(ints(a) == std::vector<int>{3, 5, 2, 1, 4, 5, 6, 4, 3, 2, 3, 1, 2, 1, 4, 8});
#if defined(__cpp_lib_containers_ranges)
  a.insert_range(a.begin() + 1, src);
  a.append_range(src);
  a.erase(a.end() - 3, a.end());
  a.erase(a.begin() + 1, a.begin() + 4);
#endif
  if constexpr (std::is_same_v<V, reservoir::DynArray<T>>) {
    a.insert_range(a.begin() + 1, src);
    a.append_range(src);
    a.erase(a.end() - 3, a.end());
    a.erase(a.begin() + 1, a.begin() + 4);
  }
  CHECK(ints(a) == std::vector<int>{3, 5, 2, 1, 4, 5, 6, 4, 3, 2, 3, 1, 2, 1, 4, 8});
  if constexpr (kDefault) {
    a.resize(17);
    CHECK(a.size() == 17);
  }
  a.resize(18, three);
  if constexpr (kDefault) {
    a.resize(4);  // resize(n) requires DefaultInsertable even when it shrinks
  } else {
    a.erase(a.begin() + 4, a.end());
  }
  CHECK(ints(a) == std::vector<int>{3, 5, 2, 1});

  V b{one};
  a.swap(b);
  CHECK(ints(a) == std::vector<int>{1});
  using std::swap;
  swap(a, b);
  CHECK(ints(a) == std::vector<int>{3, 5, 2, 1});

  // Comparisons.
  CHECK(a == a);
  CHECK(a != b);
  if constexpr (kLess) {
    CHECK(b < a);
    CHECK(a > b);
    CHECK(a <= a);
    if constexpr (requires { a <=> b; }) {  // libc++ before 17: vector has no <=>
      CHECK((a <=> b) > 0);
    }
  }

  // Uniform erasure (std::erase for std::vector, reservoir::erase for DynArray: ADL).
  using std::erase;
  using std::erase_if;
  CHECK(erase(a, two) == 1);
  CHECK(erase_if(a, [](const T& x) { return value_of(x) == 5; }) == 1);
  CHECK(ints(a) == std::vector<int>{3, 1});
  a.clear();
  CHECK(a.empty());
}

// The members a move-only T's requirements allow.
template <class V>
void every_move_only_member() {
  using T = typename V::value_type;
  V a(2);
  CHECK(ints(a) == std::vector<int>{0, 0});
  a.push_back(T(1));
  a.emplace_back(2);
  a.emplace(a.begin(), 3);
  a.insert(a.begin() + 1, T(4));
  CHECK(ints(a) == std::vector<int>{3, 4, 0, 0, 1, 2});
  std::vector<T> src;
  src.emplace_back(5);
  src.emplace_back(6);
  a.insert(a.begin() + 2, std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
  CHECK(ints(a) == std::vector<int>{3, 4, 5, 6, 0, 0, 1, 2});
  src.clear();
  src.emplace_back(7);
  V b(std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
  src.clear();
  src.emplace_back(8);
  b.assign(std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
  CHECK(ints(b) == std::vector<int>{8});
  V c(std::move(a));
  a = std::move(c);
  a.erase(a.begin() + 4, a.begin() + 6);
  a.erase(a.begin());
  a.pop_back();
  CHECK(ints(a) == std::vector<int>{4, 5, 6, 1});
  a.resize(6);
  a.resize(3);
  a.reserve(50);
  a.shrink_to_fit();
  a.swap(b);
  CHECK(ints(a) == std::vector<int>{8});
  CHECK(a != b);
  CHECK(a == a);
  a.clear();
  CHECK(a.empty());
}

}  // namespace

TEST_SUITE("conformance_hostile") {
  TEST_CASE_TEMPLATE("hostile element types: every member compiles and behaves", V,
                     CONFORMANCE_TYPES(hostile::Amp), CONFORMANCE_TYPES(hostile::Comma),
                     CONFORMANCE_TYPES(hostile::EqOnly), CONFORMANCE_TYPES(conformance::Thrower)) {
    every_member<V>();
  }

  TEST_CASE_TEMPLATE("an element constructible but not assignable from the source", V,
                     CONFORMANCE_TYPES(hostile::FromInt)) {
    // insert(pos, first, last) needs T constructible from *first, and move assignment of T for a
    // middle insert ([sequence.reqmts]); never assignment from *first. libstdc++ 12 and libc++ 14
    // assign from *first in a middle insert (std::copy), so their std::vector does not compile
    // these calls: they run on DynArray only.
    int ints3[] = {1, 2, 3};
    if constexpr (std::is_same_v<V, reservoir::DynArray<hostile::FromInt>>) {
      V a;
      a.insert(a.end(), ints3, ints3 + 3);
      a.insert(a.begin() + 1, ints3, ints3 + 2);
      a.insert(a.begin(), std::begin(ints3), std::end(ints3));
      a.insert_range(a.end(), std::span<int>(ints3));
      a.insert_range(a.begin() + 2, std::span<int>(ints3));
      CHECK(ints(a) == std::vector<int>{1, 2, 1, 2, 3, 3, 1, 1, 2, 2, 3, 1, 2, 3});
    }
    V b(ints3, ints3 + 3);  // (assign(first, last) requires assignment from *first: not called)
    CHECK(ints(b) == std::vector<int>{1, 2, 3});
    every_member<V>();
  }

  TEST_CASE_TEMPLATE("a move-only element: every member it allows", V,
                     CONFORMANCE_TYPES(hostile::MoveOnly)) {
    every_move_only_member<V>();
  }

  TEST_CASE_TEMPLATE("throwing copies through every assignment: valid, nothing leaks", V,
                     CONFORMANCE_TYPES(conformance::Thrower)) {
    using conformance::Thrower;
    Thrower::live = 0;
    {
      const std::vector<Thrower> src{Thrower(4), Thrower(5), Thrower(6), Thrower(7)};
      for (int k = 0; k < 5; ++k) {
        V a{Thrower(1), Thrower(2)};
        const V b(src.begin(), src.end());
        Thrower::countdown = k;
        try {
          a.assign(src.begin(), src.end());
        } catch (const std::runtime_error&) {
        }
        Thrower::countdown = k;
        try {
          a.assign(6, src[0]);
        } catch (const std::runtime_error&) {
        }
        Thrower::countdown = k;
        try {
          a = b;
        } catch (const std::runtime_error&) {
        }
        Thrower::countdown = k;
        try {
          a = {Thrower(8), Thrower(9)};
        } catch (const std::runtime_error&) {
        }
        Thrower::countdown = -1;
        a.push_back(Thrower(3));  // still usable
        CHECK(a.back().v == 3);
      }
    }
    Thrower::countdown = -1;
    CHECK(Thrower::live == 0);
  }
}
