// Shared helpers of the ConcurrentDynArray tests (test_concurrent_*.cpp): scales for stress
// loops, encoded values, checks for holes, element types that throw or construct slowly. In an
// unnamed namespace, as they were in one file: the unity build compiles the test files together,
// and each helper's name is unique among them.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <reservoir/concurrent_dynarray.hpp>

#include "support.hpp"

#if defined(_WIN32)
#include <io.h>  // _dup2
#else
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <reservoir/concurrent_dynarray.hpp>

#include "support.hpp"

using reservoir::ConcurrentDynArray;
namespace pal = reservoir::pal;

namespace {
constexpr int kWriters = 4;

// How much stress work a test does: far less under valgrind (which serialises threads and runs
// the concurrent suite in CI) and TSan (which slows every access), the full amount otherwise.
inline std::uint64_t stress_scale(std::uint64_t full) {
  if (test::under_valgrind()) return (std::max<std::uint64_t>)(full / 50, 1);
  if (kThreadSanitizer) return (std::max<std::uint64_t>)(full / 5, 1);
  return full;
}
// As stress_scale, but the full amount under TSan too: for loops that TSan runs in reasonable
// time, where the count only multiplies the interleavings tried. Under valgrind, which runs one
// thread at a time, more of the same interleavings buy nothing but minutes.
inline std::uint64_t valgrind_scale(std::uint64_t full) {
  return test::under_valgrind() ? (std::max<std::uint64_t>)(full / 50, 1) : full;
}

// Appends per writer in the tests with 4 writers and 2 readers.
inline std::uint64_t per_writer() {
  return valgrind_scale(250'000);
}

// Never 0, so an unconstructed (zero) element can be told from a real one.
inline std::uint64_t encode(std::uint64_t thread, std::uint64_t seq) {
  return ((thread + 1) << 32) | seq;
}

// Every published value is non-zero (a hole, an unconstructed element, would read 0) and appears
// once (no element published twice).
inline void require_no_hole_no_duplicate(const ConcurrentDynArray<std::uint64_t>& a) {
  std::set<std::uint64_t> seen;
  for (std::uint64_t v : a.published()) {
    REQUIRE(v != 0);
    REQUIRE(seen.insert(v).second);
  }
}

// Starts a thread whose emplace_back_with claims the next index of `a` and holds it (its make()
// waits until `release` is set, then returns encode(tag, index)); returns once the index is
// claimed.
inline std::thread hold_next_index(ConcurrentDynArray<std::uint64_t>& a, std::uint64_t tag,
                                   const std::atomic<bool>& release) {
  std::atomic<bool> claimed{false};  // the thread is done with it before this returns
  std::thread holder([&a, tag, &release, &claimed] {
    a.emplace_back_with([&](std::size_t i) noexcept {
      claimed = true;
      while (!release.load())
        std::this_thread::yield();
      return encode(tag, i);
    });
  });
  while (!claimed.load())
    std::this_thread::yield();
  return holder;
}

// Copying throws when the value is a multiple of 7 (the "poisoned" values); moving never throws.
struct Picky {
  std::uint64_t v = 0;
  explicit Picky(std::uint64_t x) : v(x) {}
  Picky(const Picky& o) : v(o.v) {
    if (o.v % 7 == 0) throw std::runtime_error("poisoned");
  }
  Picky(Picky&& o) noexcept : v(o.v) {}
  Picky& operator=(const Picky&) = default;
};

// Every member on an array that holds nothing and has no reservation.
template <class A>
void check_empty_unreserved(A& a) {
  const A& c = a;
  CHECK(c.size() == 0);
  CHECK(c.empty());
  CHECK(c.max_size() == 0);
  CHECK(c.capacity() == 0);
  CHECK(c.published().empty());
  CHECK(c.data() == nullptr);
  CHECK_THROWS_AS((void)c.at(0), std::out_of_range);
  CHECK_THROWS_AS(a.push_back(1), std::length_error);
  const int one = 1;
  CHECK_THROWS_AS(a.push_back(one), std::length_error);
  CHECK_THROWS_AS(a.emplace_back(1), std::length_error);
  CHECK_THROWS_AS(a.emplace_back_with([](std::size_t) noexcept { return 1; }), std::length_error);
  CHECK_FALSE(a.try_emplace_back(1).has_value());
  const std::vector<int> two{1, 2};
  CHECK_THROWS_AS(a.append_range(two), std::length_error);
  CHECK(a.append_range(std::vector<int>{}) == a.max_size());  // empty: nothing claimed
  CHECK_THROWS_AS(a.append_with(2, [](std::size_t) noexcept { return 1; }), std::length_error);
  CHECK(a.append_with(0, [](std::size_t) noexcept { return 1; }) == a.max_size());
  CHECK(c.try_get(0) == nullptr);  // no element, no reservation: null, nothing dereferenced
  CHECK(c.try_get(std::numeric_limits<std::size_t>::max()) == nullptr);
  CHECK(c.wait_for_size(0) == 0);                                // reached already: returns at once
  CHECK_THROWS_AS((void)c.wait_for_size(1), std::length_error);  // no append can reach it
  {
    auto w = a.writer();
    CHECK_THROWS_AS(w.push_back(1), std::length_error);  // no room for even a buffer
    CHECK(w.buffered() == 0);
    CHECK(w.flush() == a.max_size());  // nothing buffered
  }
  CHECK(a.size() == 0);
  A moved(std::move(a));  // moving an empty array is fine too
  CHECK(moved.max_size() == 0);
  a = std::move(moved);
  CHECK(a.max_size() == 0);
}

// Element types that take the container's code at its word (as in tests/conformance/hostile.cpp).
// In a namespace of their own: Comma's deleted operator, is a template of the enclosing namespace,
// which test_dynarray.cpp's Comma declares too when a unity build compiles both files as one.
namespace concurrent_hostile {
struct Amp {
  int v = 0;
  Amp() = default;
  explicit Amp(int x) noexcept : v(x) {}
  int operator&() const { return 0; }
};
struct Comma {
  int v = 0;
  Comma() = default;
  explicit Comma(int x) noexcept : v(x) {}
  template <class A, class B>
  friend void operator,(A&&, B&&) = delete;
};
struct MayThrow {  // a constructor that may throw: built aside, then moved in
  int v = 0;
  MayThrow() = default;
  explicit MayThrow(int x) noexcept(false) : v(x) {}
};
}  // namespace concurrent_hostile

// Every member of ConcurrentDynArray<T>, from one thread.
template <class T>
void every_member() {
  using A = ConcurrentDynArray<T>;
  A a(reservoir::max_elements(64));
  A b(reservoir::max_bytes(64 * sizeof(T)), reservoir::ArenaOptions{});
  A empty;
  const T one(1);
  CHECK(a.push_back(one) == 0);
  CHECK(a.push_back(T(2)) == 1);
  CHECK(a.emplace_back(3) == 2);
  CHECK(a.emplace_back_with([](std::size_t i) noexcept { return T(static_cast<int>(i) + 1); }) ==
        3);
  CHECK(a.try_emplace_back(5) == std::optional<std::size_t>(4));
  const T block[] = {T(6), T(7)};
  CHECK(a.append_range(block) == 5);  // contiguous: in place
  std::deque<T> aside;                // not contiguous: built aside, then moved into the block
  aside.emplace_back(8);
  CHECK(a.append_range(aside) == 7);
  {
    auto w = a.writer();
    w.push_back(one);
    w.push_back(T(9));
    w.emplace_back(10);
    CHECK(w.buffered() == 3);
    CHECK(w.flush() == 8);
  }
  CHECK(a.size() == 11);
  CHECK(!a.empty());
  CHECK(a.capacity() >= a.size());
  CHECK(a.max_size() == 64);
  CHECK(a[2].v == 3);
  CHECK(a.at(10).v == 10);
  CHECK(a.published().size() == 11);
  CHECK(a.data()[7].v == 8);
  const A& ca = a;
  CHECK(ca[4].v == 5);
  b = std::move(a);
  A c(std::move(b));
  swap(c, empty);
  CHECK(empty.size() == 11);
  CHECK(c.max_size() == 0);
  A& self = empty;
  empty = std::move(self);  // self move-assignment keeps the elements
  CHECK(empty[0].v == 1);
}

// An element whose construction takes a while and writes its fields one after another: a reader
// that saw an element under construction (or never constructed: zero) finds the fields
// inconsistent.
struct Slow {
  static constexpr std::uint64_t kSeal = 0x5ea1'5ea1'5ea1'5ea1;
  std::uint64_t value = 0;
  std::uint64_t check = 0;  // ~value once constructed
  std::uint64_t seal = 0;   // kSeal once constructed
  explicit Slow(std::uint64_t v) noexcept : value(v) {
    // Stores apart (every 16th value gives up the CPU in between), so that a premature read has
    // room to catch the element half done.
    if (v % 16 == 5) std::this_thread::yield();
    check = ~v;
    seal = kSeal;
  }
  bool whole() const noexcept { return seal == kSeal && check == ~value && value != 0; }
};

}  // namespace
