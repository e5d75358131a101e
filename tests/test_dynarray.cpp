// Tests of <reservoir/dynarray.hpp>: stability, no copies on growth, std::vector semantics,
// strong guarantees, limits, moves.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <ranges>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

using reservoir::DynArray;
using test::Tracked;
namespace pal = reservoir::pal;

static_assert(std::ranges::contiguous_range<DynArray<int>>);
static_assert(std::ranges::sized_range<DynArray<int>>);
static_assert(std::ranges::contiguous_range<const DynArray<std::string>>);
static_assert(std::is_nothrow_move_constructible_v<DynArray<int>>);
static_assert(std::is_copy_constructible_v<DynArray<int>>);
static_assert(std::is_nothrow_default_constructible_v<DynArray<int>>);
static_assert(RESERVOIR_VERSION_MAJOR == 0);

namespace {

// How many reservations a default array's first growth asks for before its own 64 GiB mapping:
// the slot pool's chunk of 64 GiB slots where one may be reserved (1), none where the address
// space is too small for one (valgrind: 0). With only the first reservation refused, the array
// still gets the full default if what was refused was the chunk.
std::uint64_t chunk_reserves() {
  test::FaultGuard first(pal::Op::reserve, 0, 1);
  DynArray<int> a;
  a.push_back(1);
  return a.max_size() == DynArray<int>::default_max_size() ? 1 : 0;
}

// A tree node holding an array of itself: T is incomplete where DynArray<Node> is a member.
struct Node {
  int value = 0;
  DynArray<Node> kids;
};
static_assert(std::is_nothrow_move_constructible_v<Node>);

// A C++17 LegacyInputIterator that is not a C++20 std::input_iterator: no default constructor,
// a non-const operator*.
struct LegacyIn {
  using iterator_category = std::input_iterator_tag;
  using value_type = int;
  using difference_type = std::ptrdiff_t;
  using pointer = const int*;
  using reference = const int&;
  explicit LegacyIn(const int* p) : p_(p) {}
  const int& operator*() { return *p_; }
  LegacyIn& operator++() {
    ++p_;
    return *this;
  }
  LegacyIn operator++(int) {
    LegacyIn old = *this;
    ++p_;
    return old;
  }
  friend bool operator==(const LegacyIn& a, const LegacyIn& b) { return a.p_ == b.p_; }
  const int* p_;
};
static_assert(!std::input_iterator<LegacyIn>);

// Copies throw on request; moves never do (so assign can give the strong guarantee).
struct CopyThrows {
  static inline int countdown = -1;
  int value = 0;
  explicit CopyThrows(int v) : value(v) {}
  CopyThrows(const CopyThrows& o) : value(o.value) {
    if (countdown >= 0 && countdown-- == 0) throw std::runtime_error("CopyThrows");
  }
  CopyThrows(CopyThrows&& o) noexcept : value(o.value) {}
  CopyThrows& operator=(const CopyThrows&) = default;
  CopyThrows& operator=(CopyThrows&&) noexcept = default;
};

// Counts move constructions and move assignments together (what a shift costs).
struct MoveCounter {
  static inline long long moves = 0;
  int v = 0;
  MoveCounter() = default;
  explicit MoveCounter(int x) : v(x) {}
  MoveCounter(const MoveCounter&) = default;
  MoveCounter(MoveCounter&& o) noexcept : v(o.v) { ++moves; }
  MoveCounter& operator=(const MoveCounter&) = default;
  MoveCounter& operator=(MoveCounter&& o) noexcept {
    v = o.v;
    ++moves;
    return *this;
  }
};

// A forward iterator over "x" strings whose distances are known without reading them.
struct Strings {
  using value_type = std::string;
  using difference_type = std::ptrdiff_t;
  using iterator_concept = std::forward_iterator_tag;
  std::size_t i = 0;
  std::string operator*() const { return "x"; }
  Strings& operator++() {
    ++i;
    return *this;
  }
  Strings operator++(int) { return {i++}; }
  bool operator==(const Strings&) const = default;
  friend difference_type operator-(const Strings& a, const Strings& b) {
    return static_cast<difference_type>(a.i - b.i);
  }
};
struct StringsRange {
  Strings first, last;
  Strings begin() const { return first; }
  Strings end() const { return last; }
};

// std::ranges::equal, which libc++ 14 lacks.
template <class A, class B>
bool equal_to(const A& a, const B& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

template <class T>
void check_equal(const DynArray<T>& a, const std::vector<T>& v) {
  REQUIRE(a.size() == v.size());
  CHECK(a.empty() == v.empty());
  CHECK(std::equal(a.begin(), a.end(), v.begin(), v.end()));
}

// Fills the committed memory exactly, so the next append must commit.
template <class T>
T make(std::size_t i) {
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(1, static_cast<char>(i));
  } else {
    return T(static_cast<int>(i));
  }
}

template <class T>
void fill_to_capacity(DynArray<T>& a) {
  if (a.size() == a.capacity()) a.reserve(a.size() + 1);
  while (a.size() < a.capacity())
    a.emplace_back(make<T>(a.size()));
}

// An ADL operator, that matches any operands and is deleted.
struct Comma {
  int v = 0;
  template <class A, class B>
  friend void operator,(A&&, B&&) = delete;
};

}  // namespace

namespace {
// Throws from its move constructor when the armed countdown reaches 0; copies never throw.
struct MoveBomb {
  static inline long long live = 0;
  static inline int moves_left = -1;  // the move that finds 0 throws; -1: none
  int value;
  MoveBomb(int v) : value(v) { ++live; }  // NOLINT: built from the int sources below
  MoveBomb(const MoveBomb& o) : value(o.value) { ++live; }
  MoveBomb(MoveBomb&& o) noexcept(false) : value(o.value) {
    if (moves_left >= 0 && moves_left-- == 0) throw std::runtime_error("move");
    ++live;
  }
  MoveBomb& operator=(const MoveBomb&) = default;
  MoveBomb& operator=(MoveBomb&&) = default;
  ~MoveBomb() { --live; }
};
}  // namespace

TEST_SUITE("dynarray") {
  TEST_CASE("the vector-shaped basics") {
    DynArray<int> a;
    CHECK(a.empty());
    CHECK(a.max_size() == DynArray<int>::default_max_size());
    CHECK(a.capacity() == 0);
    a.push_back(1);
    int two = 2;
    a.push_back(two);
    CHECK(a.emplace_back(3) == 3);
    CHECK(a.size() == 3);
    CHECK(a.front() == 1);
    CHECK(a.back() == 3);
    CHECK(a[1] == 2);
    CHECK(a.at(2) == 3);
    CHECK_THROWS_AS(a.at(3), std::out_of_range);
    CHECK(*a.data() == 1);
    CHECK(std::vector<int>(a.rbegin(), a.rend()) == std::vector<int>{3, 2, 1});
    CHECK(std::vector<int>(a.cbegin(), a.cend()) == std::vector<int>{1, 2, 3});
    std::span<int> s = a;
    CHECK(s.size() == 3);
    CHECK(s.data() == a.data());
    std::span<const int> cs = std::as_const(a);
    CHECK(cs[2] == 3);
    CHECK(std::find(a.begin(), a.end(), 2) == a.begin() + 1);
    a.pop_back();
    CHECK(a.size() == 2);
    a.clear();
    CHECK(a.empty());
    CHECK(a.capacity() > 0);  // clear keeps committed memory, like std::vector
    CHECK_THROWS_AS(a.pop_back(), std::out_of_range);
    DynArray<int> init{4, 5, 6};
    CHECK(init.size() == 3);
    CHECK(init[2] == 6);
  }

  TEST_CASE("assign and the iterator constructor behave like std::vector's; the base stays") {
    std::vector<std::string> words = {"alpha", "beta", "gamma", "delta"};
    DynArray<std::string> a(words.begin(), words.end());
    CHECK(equal_to(a, words));
    const std::string* base = a.data();
    a.assign(3, a[1]);  // the value may be one of the array's own elements
    CHECK(equal_to(a, std::vector<std::string>(3, "beta")));
    a.assign({"x", "y"});
    CHECK(equal_to(a, std::vector<std::string>{"x", "y"}));
    a = {"p", "q", "r", "s", "t"};
    CHECK(a.size() == 5);
    CHECK(a.back() == "t");
    std::istringstream in("one two three");
    a.assign(std::istream_iterator<std::string>(in), std::istream_iterator<std::string>());
    CHECK(equal_to(a, std::vector<std::string>{"one", "two", "three"}));
    a.assign_range(std::deque<std::string>(words.rbegin(), words.rend()));
    CHECK(a.front() == "delta");
    CHECK(a.data() == base);  // assigning never moves the array

    // Past max_size: length_error before anything changes. A throwing copy, with room for the
    // old and new elements together: the array exactly as before (the new ones are built past
    // the old ones), every element built destroyed exactly once.
    Tracked::reset();
    {
      DynArray<Tracked> t(reservoir::max_elements(10));
      for (int i = 0; i < 4; ++i)
        t.emplace_back(i);
      CHECK_THROWS_AS(t.assign(11, Tracked(7)), std::length_error);
      CHECK(t.size() == 4);
      CHECK(t[3].value == 3);
      Tracked::throw_countdown = 3;  // the value, two elements, then a throw
      CHECK_THROWS_AS(t.assign(6, Tracked(9)), std::runtime_error);
      CHECK(Tracked::live() == static_cast<long long>(t.size()));
      CHECK(t.size() == 4);
      CHECK(t[3].value == 3);
      std::vector<Tracked> src(5, Tracked(5));
      Tracked::throw_countdown = 2;  // two copies, then a throw: the old elements stay
      CHECK_THROWS_AS(t.assign(src.begin(), src.end()), std::runtime_error);
      CHECK(t.size() == 4);
      CHECK(t[1].value == 1);
      t.assign(src.begin(), src.end());
      CHECK(t.size() == 5);
      CHECK(t[4].value == 5);
    }
    CHECK(Tracked::live() == 0);
  }

  TEST_CASE("assign with a move that throws as the new elements move down: empty, nothing leaks") {
    // The basic guarantee assign() documents for a throwing move constructor: after the throw
    // the array is empty with capacity() as before, every element built was destroyed once, and
    // the array is usable. Each way assign() moves elements down, a throw at every move.
    // Fills `a` with `old`, then assigns through `assign`; the expected contents if no move throws.
    auto run = [](const char* how, std::size_t limit, const std::vector<int>& old,
                  const std::function<void(DynArray<MoveBomb>&)>& assign,
                  const std::vector<int>& expected) {
      CAPTURE(how);
      int thrown = 0;
      for (int at = 0; at < 8; ++at) {
        CAPTURE(at);
        {
          DynArray<MoveBomb> a{reservoir::max_elements(limit)};
          REQUIRE(a.max_size() == limit);
          for (int v : old)
            a.emplace_back(v);
          const std::size_t capacity = a.capacity();
          MoveBomb::moves_left = at;
          try {
            assign(a);
            MoveBomb::moves_left = -1;
            REQUIRE(a.size() == expected.size());
            for (std::size_t i = 0; i < expected.size(); ++i)
              CHECK(a[i].value == expected[i]);
          } catch (const std::runtime_error&) {
            MoveBomb::moves_left = -1;
            ++thrown;
            CHECK(a.empty());
            CHECK(a.capacity() == capacity);
            CHECK(MoveBomb::live == 0);
          }
          CHECK(MoveBomb::live == static_cast<long long>(a.size()));
          a.emplace_back(99);  // usable
          CHECK(a.back().value == 99);
        }
        CHECK(MoveBomb::live == 0);
      }
      CHECK(thrown > 0);  // some move did throw
    };
    // A single-pass source that runs into the end of the reservation: the new elements built so
    // far move to the front (two moves), then the rest follow.
    run("single pass", 4, {1, 2},
        [](DynArray<MoveBomb>& a) {
          std::istringstream in("10 20 30");
          a.assign(std::istream_iterator<int>(in), std::istream_iterator<int>());
        },
        {10, 20, 30});
    // A sized source with room past the old elements: built there, then moved down (three moves).
    run("sized", 16, {1, 2},
        [](DynArray<MoveBomb>& a) {
          const std::vector<int> src{10, 20, 30};
          a.assign(src.begin(), src.end());
        },
        {10, 20, 30});
    // The array's own tail: kept, moved to the front (three moves).
    run("own elements", 16, {1, 2, 3, 4},
        [](DynArray<MoveBomb>& a) { a.assign(a.begin() + 1, a.end()); }, {2, 3, 4});
  }

  TEST_CASE("pointers and string_views stay valid across a million appends") {
    DynArray<char> text;
    std::vector<std::string_view> views;
    std::vector<std::string> expected;
    std::mt19937 rng(42);
    std::size_t appended = 0;
    while (appended < 1'000'000) {
      std::string word(1 + rng() % 40, 'a');
      for (char& c : word)
        c = static_cast<char>('a' + rng() % 26);
      const std::size_t start = text.size();
      text.append_range(word);
      views.emplace_back(text.data() + start, word.size());
      expected.push_back(std::move(word));
      appended += views.back().size();
    }
    // Growth crossed many commit steps ...
    CHECK(text.arena().committed() / text.arena().commit_granule() > 10);
    // ... and every view taken along the way still reads its word.
    for (std::size_t i = 0; i < views.size(); ++i)
      REQUIRE(views[i] == expected[i]);
    CHECK(views.front().data() == text.data());
  }

  TEST_CASE("element addresses never change during growth") {
    DynArray<std::uint64_t> a;
    std::vector<const std::uint64_t*> addresses;
    for (std::uint64_t i = 0; i < 300'000; ++i) {
      a.push_back(i);
      if (i % 1000 == 0) addresses.push_back(&a.back());
    }
    a.reserve(a.size() + 1'000'000);
    a.resize(a.size() + 10);
    for (std::size_t k = 0; k < addresses.size(); ++k) {
      REQUIRE(addresses[k] == a.data() + k * 1000);
      REQUIRE(*addresses[k] == k * 1000);
    }
  }

  TEST_CASE("growth constructs in place: no element is moved or copied, each destroyed once") {
    Tracked::reset();
    {
      DynArray<Tracked> a;
      for (int i = 0; i < 200'000; ++i)
        a.emplace_back(i);
      a.resize(250'000);
      a.reserve(400'000);
      CHECK(Tracked::copies == 0);
      CHECK(Tracked::moves == 0);
      CHECK(Tracked::value_constructions == 250'000);
      CHECK(a[123'456].value == 123'456);
      a.resize(100);
      CHECK(Tracked::destructions == 250'000 - 100);
    }
    CHECK(Tracked::live() == 0);
  }

  TEST_CASE("a throwing constructor leaves the array exactly as it was") {
    Tracked::reset();
    {
      DynArray<Tracked> a(reservoir::max_elements(100'000));
      fill_to_capacity(a);  // the next emplace_back must commit
      const std::size_t size = a.size(), capacity = a.capacity();
      Tracked::throw_countdown = 0;
      CHECK_THROWS_AS(a.emplace_back(-1), std::runtime_error);
      CHECK(a.size() == size);
      CHECK(a.capacity() == capacity);  // the commit was undone
      Tracked::throw_countdown = 0;
      CHECK_THROWS_AS(a.emplace_back(-1), std::runtime_error);  // the fast path too (no commit)
      a.pop_back();
      Tracked::throw_countdown = 0;
      CHECK_THROWS_AS(a.emplace_back(-1), std::runtime_error);
      CHECK(a.size() == size - 1);
      std::vector<Tracked> ten(10);
      const long long live = Tracked::live();
      Tracked::throw_countdown = 5;  // the 6th of 10 throws: the first 5 are destroyed again
      CHECK_THROWS_AS(a.append_range(ten), std::runtime_error);
      CHECK(a.size() == size - 1);
      CHECK(Tracked::live() == live);
      Tracked::throw_countdown = 3;
      CHECK_THROWS_AS(a.resize(a.size() + 50'000), std::runtime_error);
      CHECK(a.size() == size - 1);
      CHECK(a.capacity() == capacity);
      CHECK(test::first_wrong(a.size(), [&](std::size_t i) {
              return a[i].value == static_cast<int>(i);
            }) == a.size());
    }
    CHECK(Tracked::live() == 0);
  }

  TEST_CASE("the strong guarantee holds exactly with a granule that is not a power of two") {
    // Steps grow with the array; they must stay whole granules, or undoing a commit would round
    // to a different length than the array had before the failed append.
    reservoir::ArenaOptions o;
    o.commit_granule = 3 * pal::page_size();
    Tracked::reset();
    {
      DynArray<Tracked> a(reservoir::max_elements(8'000'000), o);
      int failures = 0;
      while (a.arena().committed() < 4 * reservoir::kPopulatedStepLimit) {
        fill_to_capacity(a);
        const std::size_t size = a.size(), capacity = a.capacity();
        const std::size_t committed = a.arena().committed();
        REQUIRE(committed % a.arena().commit_granule() == 0);
        Tracked::throw_countdown = 0;
        REQUIRE_THROWS_AS(a.emplace_back(-1), std::runtime_error);
        ++failures;
        REQUIRE(a.size() == size);
        REQUIRE(a.capacity() == capacity);
        REQUIRE(a.arena().committed() == committed);
        a.emplace_back(static_cast<int>(size));
      }
      CHECK(a.arena().commit_step() > a.arena().commit_granule());
      // One failure per step: doubling from 3 pages to 8 MiB takes about log2(8 MiB / granule)
      // steps; bounded steps take more.
      const auto steps =
          std::bit_width(4 * reservoir::kPopulatedStepLimit / a.arena().commit_granule());
      CHECK(failures >= static_cast<int>(steps) - 1);
      CHECK(test::first_wrong(a.size(), [&](std::size_t i) {
              return a[i].value == static_cast<int>(i);
            }) == a.size());
    }
    CHECK(Tracked::live() == 0);
  }

  TEST_CASE("filled to its real capacity, one more append is refused and nothing is lost") {
    DynArray<int> a(reservoir::max_elements(100'000));
    CHECK(a.max_size() == 100'000);
    for (int i = 0; i < 100'000; ++i)
      a.push_back(i);
    CHECK_FALSE(a.try_push_back(1));
    CHECK(a.try_emplace_back(1) == nullptr);
    CHECK_THROWS_AS(a.push_back(1), std::length_error);
    CHECK_THROWS_AS(a.reserve(100'001), std::length_error);
    CHECK_THROWS_AS(a.resize(100'001), std::length_error);
    CHECK_THROWS_AS(a.append_range(std::vector<int>{1}), std::length_error);
    CHECK(a.size() == 100'000);
    for (int i = 0; i < 100'000; ++i)
      REQUIRE(a[static_cast<std::size_t>(i)] == i);
    a.pop_back();
    CHECK(a.try_push_back(7));
    CHECK(a.back() == 7);
  }

  TEST_CASE("a refused commit is bad_alloc with the OS reason; the array is unchanged") {
    DynArray<std::string> a(reservoir::max_elements(1'000'000));
    fill_to_capacity(a);
    const std::size_t size = a.size(), capacity = a.capacity();
    {
      test::FaultGuard fault(pal::Op::commit, 0, 3);
      try {
        a.push_back("x");
        FAIL("should have thrown");
      } catch (const reservoir::OsAllocationError& e) {
        CHECK(std::string(e.what()).find("cannot commit") == 0);
      }
      CHECK_FALSE(a.try_push_back(std::string("y")));
      CHECK_THROWS_AS(a.resize(size + 10), std::bad_alloc);
    }
    CHECK(a.size() == size);
    CHECK(a.capacity() == capacity);
    CHECK(test::first_wrong(size, [&](std::size_t i) { return a[i] == make<std::string>(i); }) ==
          size);
    a.push_back("z");  // usable afterwards
    CHECK(a.back() == "z");
  }

  TEST_CASE("bad sizes are rejected with a clear exception") {
    CHECK_THROWS_AS((void)DynArray<int>(reservoir::max_elements(0)), std::invalid_argument);
    CHECK_THROWS_AS(
        (void)DynArray<int>(reservoir::max_elements(std::numeric_limits<std::size_t>::max())),
        std::length_error);
    if constexpr (sizeof(void*) >= 8) {
      CHECK_THROWS_AS((void)DynArray<int>(reservoir::max_elements(std::size_t{1} << 60)),
                      std::length_error);
    }
    {
      // Past a sub-page slot (whose run, refused, would fall back to a page-granular slot).
      test::FaultGuard fault(pal::Op::reserve);
      CHECK_THROWS_AS((void)DynArray<int>(reservoir::max_elements(4096)), std::bad_alloc);
    }
    {
      test::FaultGuard fault(pal::Op::reserve, 0, 1000);  // every fallback refused too
      DynArray<int> lazy;  // default construction never reserves, so never fails
      CHECK_FALSE(lazy.try_push_back(1));
      CHECK(lazy.empty());
    }
  }

  TEST_CASE("a refused default reservation falls back to a smaller one") {
    // The pool's chunk of 64 GiB slots, where one is tried (FaultGuard trims the pools: none is
    // free or uncarved), then 64 GiB of its own and the chunk of 1 GiB slots are refused: the
    // array takes the next default tier (1 GiB) in a mapping of its own, not a size of no tier.
    const std::uint64_t chunks = chunk_reserves();
    test::FaultGuard fault(pal::Op::reserve, 0, chunks + 2);
    DynArray<int> a;
    CHECK(a.max_size() == DynArray<int>::default_max_size());
    a.push_back(1);
    CHECK(a.max_size() == reservoir::kDefaultTierReduced / sizeof(int));
    CHECK(a.arena().reserved() >= reservoir::kDefaultTierReduced);
    CHECK(a.max_size() < reservoir::kDefaultReserveBytes / 4 / sizeof(int));
    CHECK(a[0] == 1);
  }

  TEST_CASE("a default reservation refused at every tier but the least takes the least") {
    // Refused: the 64 GiB chunk (where tried), 64 GiB, the 1 GiB chunk (where tried: as the
    // 64 GiB one) and 1 GiB. Next is kMinDefaultReserveBytes, the least tier, never a half.
    const std::uint64_t chunks = chunk_reserves();
    test::FaultGuard fault(pal::Op::reserve, 0, 2 * chunks + 2);
    DynArray<int> a;
    a.push_back(1);
    CHECK(a.max_size() == reservoir::kMinDefaultReserveBytes / sizeof(int));
    CHECK(a[0] == 1);
  }

  TEST_CASE("a new small array commits one page; a parked one comes back with 64 KiB") {
    reservoir::clear_reservation_cache();
    const std::size_t page = std::max(reservoir::kDefaultCommitGranule, pal::page_size());
    bool default_refused = false;
    {
      DynArray<int> a;
      a.push_back(1);
      CHECK(a.arena().committed() == page);  // not 64 KiB: thousands of small arrays stay small
      CHECK(a.capacity() == page / sizeof(int));
      for (int i = 0; i < 100'000; ++i)
        a.push_back(i);
      default_refused = a.max_size() < DynArray<int>::default_max_size();
    }  // parked, with its first 64 KiB (whole pages) still committed
    const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
    const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
    const std::size_t a_reserved = reservoir::reserved_address_space();  // a's, parked
    DynArray<int> b;
    b.push_back(2);
    CHECK(reservoir::reserved_address_space() == a_reserved);
    CHECK(b[0] == 2);
    if (default_refused) {
      // The OS refused the default size to a (valgrind, a small RLIMIT_AS) and so refuses it to b:
      // a refused reservation first releases what is parked, and b starts on a fresh, smaller one.
      MESSAGE("default reservation refused here: b starts fresh, as a did");
      CHECK(pal::testing::calls(pal::Op::reserve) > reserves);
      CHECK(b.arena().committed() == page);
      return;
    }
    CHECK(pal::testing::calls(pal::Op::reserve) == reserves);  // a's reservation, reused
    CHECK(b.arena().committed() == std::max(page, reservoir::kDoublingStepLimit / page * page));
    b.resize(b.capacity(), 3);  // fills the kept pages with no commit call
    CHECK(pal::testing::calls(pal::Op::commit) == commits);
    CHECK(b.back() == 3);
  }

  TEST_CASE("push_back to 1e7 ints with huge pages: O(log n) OS calls, nothing moves") {
    // Geometric steps (huge pages forced on, no memory limit checked): about log2(40 MB / 4 KiB)
    // = 14 commits, populate calls for the steps from 64 KiB to 2 MiB, one huge-page advice.
    pal::testing::set_transparent_huge_pages(1);
    reservoir::clear_reservation_cache();
    reservoir::ArenaOptions o;
    o.respect_memory_limit = false;
    constexpr int kN = 10'000'000;
    const auto calls = [] {
      return pal::testing::calls(pal::Op::reserve) + pal::testing::calls(pal::Op::commit) +
             pal::testing::calls(pal::Op::prefault) + pal::testing::calls(pal::Op::advise);
    };
    const std::uint64_t before = calls();
    {
      DynArray<int> a(reservoir::max_elements(std::size_t{1} << 28), o);
      a.push_back(0);
      const int* const first = a.data();
      for (int i = 1; i < kN; ++i)
        a.push_back(i);
      CHECK(a.data() == first);
      CHECK(a[kN / 2] == kN / 2);
      CHECK(a.back() == kN - 1);
      CHECK(a.arena().committed() < 2 * a.size() * sizeof(int));
      if (a.arena().commit_granule() == 4096) CHECK(calls() - before <= 1 + 15 + 6 + 1);
    }
    pal::testing::set_transparent_huge_pages(-1);
  }

  TEST_CASE("push_back to 1e8 ints, population left to faults: at most 32 mmap/mprotect/madvise") {
    // An array of the default reservation with prefault off (the default off Linux): every step
    // is a permission change only, and steps double the committed prefix (up to
    // max_commit_step), so the calls grow with log n. Under a
    // memory limit steps are bounded (each is charged as it is written): where the process has
    // one, the count is taken with the check off.
    const bool limited = reservoir::memory_limit_headroom() != reservoir::kMemoryLimitOff;
    if (limited) {
      MESSAGE("a memory limit is in force here: counted with set_memory_limit(kMemoryLimitOff)");
      reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
    }
    reservoir::clear_reservation_cache();
    const auto calls = [] {
      std::uint64_t n = 0;  // every pal call that is an mmap, mprotect or madvise
      for (const pal::Op op : {pal::Op::reserve, pal::Op::commit, pal::Op::decommit,
                               pal::Op::prefault, pal::Op::advise, pal::Op::guard})
        n += pal::testing::calls(op);
      return n;
    };
    // Under valgrind 1e7 (the bound holds a fortiori; 1e8 appends there take minutes).
    const std::size_t kN = test::under_valgrind() ? 10'000'000 : 100'000'000;
    reservoir::ArenaOptions faults;
    faults.prefault = false;
    CHECK_FALSE(faults.prefault);  // the policy counted: population left to faults
    const std::uint64_t before = calls();
    std::optional<DynArray<int>> made;
    try {
      made.emplace(reservoir::max_elements(DynArray<int>::default_max_size()), faults);
    } catch (const reservoir::OsAllocationError& e) {
      MESSAGE("the default reservation is refused here (" << e.what() << "): skipped");
    }
    if (made) {
      DynArray<int>& a = *made;
      a.push_back(0);
      const int* const first = a.data();  // a default array reserves at its first element
      for (std::size_t i = 1; i < kN; ++i)
        a.push_back(static_cast<int>(i));
      const std::uint64_t n = calls() - before;
      MESSAGE(n << " mmap/mprotect/madvise calls for " << kN << " ints");
      CHECK(n <= 32);
      CHECK(a.data() == first);
      CHECK(a[kN / 3] == static_cast<int>(kN / 3));
      CHECK(a.back() == static_cast<int>(kN - 1));
      made.reset();
    }
    if (limited) reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  }

  TEST_CASE("push_back to 1e8 ints, the default population: two calls a bounded step at most") {
    // A default array. On Linux (prefault on) the contract is: populating steps costs two calls a
    // step (the commit and the populate), each step at most kBoundedStepLimit; elsewhere (prefault
    // off) the geometric steps' log n bound of the test above. Under a memory limit steps are
    // bounded whatever the option says: where the process has one, the count is taken with the
    // check off, so that it is the default policy's.
    const bool limited = reservoir::memory_limit_headroom() != reservoir::kMemoryLimitOff;
    if (limited) {
      MESSAGE("a memory limit is in force here: counted with set_memory_limit(kMemoryLimitOff)");
      reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
    }
    reservoir::clear_reservation_cache();
    const auto calls = [] {
      std::uint64_t n = 0;  // every pal call that is an mmap, mprotect or madvise
      for (const pal::Op op : {pal::Op::reserve, pal::Op::commit, pal::Op::decommit,
                               pal::Op::prefault, pal::Op::advise, pal::Op::guard})
        n += pal::testing::calls(op);
      return n;
    };
    // Under valgrind 1e7 (the bound holds a fortiori; 1e8 appends there take minutes).
    const std::size_t kN = test::under_valgrind() ? 10'000'000 : 100'000'000;
    const std::uint64_t before = calls();
    std::optional<DynArray<int>> made;
    try {
      made.emplace();
    } catch (const reservoir::OsAllocationError& e) {
      MESSAGE("the default reservation is refused here (" << e.what() << "): skipped");
    }
    if (made) {
      DynArray<int>& a = *made;
      a.push_back(0);
      const int* const first = a.data();  // a default array reserves at its first element
      for (std::size_t i = 1; i < kN; ++i)
        a.push_back(static_cast<int>(i));
      const std::uint64_t n = calls() - before;
      MESSAGE(n << " mmap/mprotect/madvise calls for " << kN << " ints");
      const std::size_t steps = kN * sizeof(int) / reservoir::kBoundedStepLimit;
      if (reservoir::ArenaOptions{}.prefault) {
        CHECK(n >= steps);             // every bounded step is a call at least ...
        CHECK(n <= 2 * (steps + 40));  // ... and two at most (+ the ramp and the reservation)
      } else {
        CHECK(n <= 32);
      }
      CHECK(a.data() == first);
      CHECK(a[kN / 3] == static_cast<int>(kN / 3));
      CHECK(a.back() == static_cast<int>(kN - 1));
      made.reset();
    }
    if (limited) reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  }

  TEST_CASE("capacity follows committed memory; shrink_to_fit returns it to the OS") {
    DynArray<int> a(reservoir::max_elements(10'000'000));
    const std::size_t granule = a.arena().commit_granule();
    for (int i = 0; i < 1'000'000; ++i)
      a.push_back(i);
    CHECK(a.arena().committed() >= a.size() * sizeof(int));
    CHECK(a.arena().committed() - a.size() * sizeof(int) < a.arena().commit_step());
    CHECK(a.capacity() == a.arena().committed() / sizeof(int));
    const int* data = a.data();
    a.resize(1000);
    CHECK(a.arena().committed() > granule);  // resize down keeps memory, like std::vector
    a.shrink_to_fit();
    CHECK(a.arena().committed() == granule);
    CHECK(a.data() == data);
    CHECK(a[999] == 999);
    a.reserve(5'000'000);
    CHECK(a.capacity() >= 5'000'000);
    CHECK(a.data() == data);
    a.clear();
    a.shrink_to_fit();
    CHECK(a.arena().committed() == 0);
    CHECK(a.capacity() == 0);
  }

  TEST_CASE("reserve backs at most one commit step with RAM; the rest is backed on first touch") {
    if (test::under_valgrind()) {
      MESSAGE("skipped under valgrind, whose own memory grows with what the program maps");
      return;
    }
    // An upper bound that is never reached costs no resident memory, as std::vector::reserve does
    // under Linux overcommit; appends into it work as before.
    constexpr std::size_t kInts = std::size_t{1} << 28;  // 1 GiB
    DynArray<int> a{reservoir::max_elements(kInts)};  // whatever the default reservation would be
    a.push_back(1);
    const std::size_t before = test::proc_status_kib("VmRSS");
    a.reserve(kInts);
    const std::size_t after = test::proc_status_kib("VmRSS");
    CHECK(a.capacity() >= kInts);
    if (before == 0) {
      MESSAGE("no /proc/self/status here: VmRSS not checked");
    } else {
      INFO("VmRSS before " << before << " KiB, after " << after << " KiB");
      // Under AddressSanitizer the annotations poison [size(), capacity()): shadow memory of an
      // eighth of the commit, backed with RAM as it is written.
      const std::size_t shadow_kib =
          reservoir::detail::kAnnotateContainers ? a.capacity() * sizeof(int) / 8 / 1024 : 0;
      CHECK(after < before + 128 * 1024 + shadow_kib);
    }
    const int* data = a.data();
    for (int i = 1; i < 3'000'000; ++i)  // 12 MB: past the populated step
      a.push_back(i);
    CHECK(a.data() == data);
    CHECK(a[2'999'999] == 2'999'999);
    if constexpr (!reservoir::detail::kAnnotateContainers) {
      // The far end of the commit is writable too (past size(): what the sanitizer annotations
      // report, so only without them).
      volatile int* far = a.data() + (kInts - 1);
      *far = 7;
      CHECK(*far == 7);
    }
  }

  TEST_CASE("insert, erase and resize behave like std::vector (random differential run)") {
    std::mt19937 rng(7);
    DynArray<std::string> a;
    std::vector<std::string> v;
    for (int step = 0; step < 5000; ++step) {
      const std::string s = std::to_string(rng());
      const auto pos = v.empty() ? 0 : rng() % (v.size() + 1);
      switch (rng() % 9) {
        case 0:
          a.push_back(s);
          v.push_back(s);
          break;
        case 1:
          a.insert(a.begin() + pos, s);
          v.insert(v.begin() + pos, s);
          break;
        case 2:
          if (!v.empty() && pos < v.size()) {
            a.erase(a.begin() + pos);
            v.erase(v.begin() + pos);
          }
          break;
        case 3: {
          const auto n = rng() % 5;
          a.insert(a.begin() + pos, n, s);
          v.insert(v.begin() + pos, n, s);
          break;
        }
        case 4: {
          const auto last = pos + (v.size() - pos) / 3;
          CHECK(a.erase(a.begin() + pos, a.begin() + last) == a.begin() + pos);
          v.erase(v.begin() + pos, v.begin() + last);
          break;
        }
        case 5: {
          const std::vector<std::string> r{s, s + "!", s + "?"};
          a.insert(a.begin() + pos, r.begin(), r.end());
          v.insert(v.begin() + pos, r.begin(), r.end());
          break;
        }
        case 6: {
          const auto n = rng() % (v.size() + 20);
          a.resize(n, s);
          v.resize(n, s);
          break;
        }
        case 7:
          a.emplace(a.begin() + pos, 3, 'q');
          v.emplace(v.begin() + pos, 3, 'q');
          break;
        case 8:
          if (!v.empty()) {
            a.pop_back();
            v.pop_back();
          }
          break;
      }
      check_equal(a, v);
    }
    CHECK_THROWS_AS(a.erase(a.end()), std::out_of_range);
    CHECK_THROWS_AS(a.insert(a.end() + 1, "x"), std::out_of_range);
  }

  TEST_CASE("resize value-initialises, even over memory that held old elements") {
    DynArray<int> a;
    for (int i = 0; i < 1000; ++i)
      a.push_back(i + 1);
    a.resize(10);
    a.resize(1000);
    for (std::size_t i = 10; i < 1000; ++i)
      REQUIRE(a[i] == 0);
    a.resize(2000, 7);
    CHECK(a[1999] == 7);
  }

  // The fill path: one memset where the value is one byte repeated (and the type has no
  // padding), the element loop otherwise; both must give what std::vector gives, byte for byte.
  template <class Container, class T>
  std::vector<unsigned char> filled_bytes(const T& value, const T& other) {
    Container c(300, other);
    c.resize(100);  // the memory of 200 old elements, to be filled again
    c.resize(700, value);
    c.insert(c.end(), 50, value);
    std::vector<unsigned char> bytes(c.size() * sizeof(T));
    std::memcpy(bytes.data(), c.data(), bytes.size());
    Container d;
    d.assign(0, value);  // nothing reserved yet: a null first element
    d.resize(0, value);
    CHECK(d.empty());
    d.assign(333, value);
    CHECK(d.size() == 333);
    CHECK(std::memcmp(d.data(), bytes.data() + 100 * sizeof(T), 333 * sizeof(T)) == 0);
    return bytes;
  }
  template <class T>
  void check_fill(const T& value, const T& other) {
    CAPTURE(sizeof(T));
    CHECK(filled_bytes<DynArray<T>>(value, other) == filled_bytes<std::vector<T>>(value, other));
  }
  struct TwoInts {
    int a, b;
  };
  struct CharThenInt {  // three bytes of padding: never memset
    char c;
    int i;
  };

  TEST_CASE("resize, assign and insert of one value give std::vector's bytes, memset or not") {
    for (int v : {0, -1, 0x01010101, 0x7f7f7f7f, 7, 0x01010100, -2})
      check_fill<int>(v, 5);
    check_fill<unsigned char>(0xab, 1);
    check_fill<std::uint16_t>(0x1234, 1);
    check_fill<std::uint16_t>(0x4545, 1);
    check_fill<char>('\0', 'x');
    check_fill<std::uint64_t>(~std::uint64_t{0}, 3);
    check_fill<double>(0.0, 2.5);
    check_fill<double>(-0.0, 2.5);  // bytes 80 00 ... 00: the loop, and the sign survives
    check_fill<double>(1.5, 0.0);
    check_fill<float>(0.0f, -1.0f);
    check_fill<TwoInts>({0x02020202, 0x02020202}, {1, 1});
    check_fill<TwoInts>({0x02020202, 0x02020203}, {0, 0});
    check_fill<TwoInts>({0, 0}, {-1, -1});
    DynArray<CharThenInt> p(10, CharThenInt{3, 0x03030303});
    CHECK((p[9].c == 3 && p[9].i == 0x03030303));
    static_assert(reservoir::detail::fillable_by_bytes<int>);
    static_assert(reservoir::detail::fillable_by_bytes<double>);
    static_assert(reservoir::detail::fillable_by_bytes<TwoInts>);
    static_assert(!reservoir::detail::fillable_by_bytes<CharThenInt>);
    static_assert(!reservoir::detail::fillable_by_bytes<std::string>);
    DynArray<double> z(5, -0.0);
    CHECK(std::signbit(z[4]));
  }

  template <class T>
  void check_fill_bounds(const T& value, const T& other) {
    // Counts on both sides of the memset/rep stos thresholds (1 KiB, 16 MiB) and with a tail
    // shorter than 8 bytes: every element is value, and nothing past the last one is written.
    // Under valgrind not at 16 MiB (a minute of the suite's two; every other build checks it).
    for (const std::size_t bytes :
         {std::size_t{8}, std::size_t{1016}, std::size_t{1024}, std::size_t{1032},
          std::size_t{4096 + 8}, std::size_t{16} << 20}) {
      if (bytes == (std::size_t{16} << 20) && test::under_valgrind()) continue;
      for (const std::size_t extra : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
        const std::size_t n = bytes / sizeof(T) + extra - (bytes == (std::size_t{16} << 20));
        CAPTURE(sizeof(T));
        CAPTURE(n);
        std::vector<T> buffer(n + 4, other);
        CHECK(reservoir::detail::uninitialized_fill_n(buffer.data(), n, value) ==
              buffer.data() + n);
        CHECK(
            std::all_of(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n),
                        [&value](const T& x) { return std::memcmp(&x, &value, sizeof(T)) == 0; }));
        CHECK(std::all_of(buffer.end() - 4, buffer.end(), [&other](const T& x) {
          return std::memcmp(&x, &other, sizeof(T)) == 0;
        }));
      }
    }
  }

  TEST_CASE("the fill helper writes exactly count elements at every size and element width") {
    check_fill_bounds<std::uint16_t>(0x1234, 0xffff);
    check_fill_bounds<int>(0x12345678, -1);
    check_fill_bounds<int>(0, 9);
    check_fill_bounds<std::uint64_t>(0x0123456789abcdefULL, 0);
    check_fill_bounds<double>(1.5, 0.0);
    check_fill_bounds<TwoInts>({1, 2}, {0, 0});  // 8 bytes, a struct
    check_fill_bounds<char>('a', 'b');
  }

  TEST_CASE("unique_ptr and string elements are constructed and destroyed exactly once") {
    DynArray<std::unique_ptr<int>> p;
    for (int i = 0; i < 100'000; ++i)
      p.push_back(std::make_unique<int>(i));
    CHECK(*p[99'999] == 99'999);
    p.erase(p.begin(), p.begin() + 10);
    CHECK(*p.front() == 10);
    DynArray<std::string> s;
    for (int i = 0; i < 100'000; ++i)
      s.emplace_back(100, 'x');  // heap-allocated strings
    CHECK(s[5].size() == 100);
    // ASan/LeakSanitizer and valgrind check that nothing leaks here.
  }

  TEST_CASE("move transfers the reservation; the moved-from array is empty and reusable") {
    DynArray<int> a;
    for (int i = 0; i < 1000; ++i)
      a.push_back(i);
    const int* data = a.data();
    DynArray<int> b(std::move(a));
    CHECK(b.data() == data);
    CHECK(b.size() == 1000);
    CHECK(a.empty());
    CHECK(a.data() == nullptr);
    CHECK(a.capacity() == 0);
    a.push_back(5);  // reserves afresh
    CHECK(a[0] == 5);
    a = std::move(b);
    CHECK(a.data() == data);
    CHECK(a.size() == 1000);
    DynArray<int> c = a.clone();
    CHECK(c == a);
    CHECK(c.data() != a.data());
    // A default-reserved array clones into a default reservation (which may fall back to less
    // where address space is short, as under valgrind); an explicit one keeps its max_size.
    CHECK(c.max_size() <= DynArray<int>::default_max_size());
    CHECK(c.max_size() >= c.size());
    // The clone of an empty default-reserved array has no reservation yet: empty, as a fresh one.
    DynArray<int> emptied{1};
    emptied.pop_back();
    DynArray<int> empty_clone = emptied.clone();
    CHECK(empty_clone.data() == nullptr);
    CHECK(empty_clone.begin() == empty_clone.end());
    CHECK(empty_clone.max_size() == DynArray<int>::default_max_size());
    DynArray<int> sized(reservoir::max_elements(5000));
    sized.push_back(3);
    CHECK(sized.clone().max_size() == 5000);
    CHECK(sized.clone()[0] == 3);
    c.push_back(1);
    CHECK(c != a);
    CHECK((a < c));
    swap(a, c);
    CHECK(a.size() == 1001);
    CHECK(c.data() == data);
  }

  TEST_CASE("every member is defined on default-constructed, moved-from and swapped-out arrays") {
    // Each state is empty with no reservation (data() == nullptr); every member must behave as on
    // an empty std::vector (or throw where DynArray documents a throw), and the array must be
    // usable afterwards.
    enum class State { fresh, moved_from, move_assigned_from, moved_from_sized, swapped_out };
    for (State state : {State::fresh, State::moved_from, State::move_assigned_from,
                        State::moved_from_sized, State::swapped_out}) {
      CAPTURE(static_cast<int>(state));
      DynArray<std::string> keep;
      DynArray<std::string> a;
      switch (state) {
        case State::fresh:
          break;
        case State::moved_from: {
          DynArray<std::string> donor{"x", "y"};
          a = std::move(donor);
          keep = DynArray<std::string>(std::move(a));  // a: moved-from by construction
          break;
        }
        case State::move_assigned_from: {
          a = {"x"};
          keep = std::move(a);
          break;
        }
        case State::moved_from_sized: {
          DynArray<std::string> sized(reservoir::max_elements(100));
          sized.push_back("s");
          a = std::move(sized);
          keep = std::move(a);
          break;
        }
        case State::swapped_out: {
          DynArray<std::string> empty;
          a.push_back("z");
          swap(a, empty);
          keep = std::move(empty);
          break;
        }
      }
      const DynArray<std::string>& ca = a;
      CHECK(a.empty());
      CHECK(a.size() == 0);
      CHECK(a.capacity() == 0);
      CHECK(a.max_size() == DynArray<std::string>::default_max_size());
      CHECK(a.data() == nullptr);
      CHECK(ca.data() == nullptr);
      CHECK(a.arena().reserved() == 0);
      CHECK(a.begin() == a.end());
      CHECK(ca.cbegin() == ca.cend());
      CHECK(a.rbegin() == a.rend());
      CHECK(ca.crbegin() == ca.crend());
      CHECK_THROWS_AS((void)a.at(0), std::out_of_range);
      CHECK_THROWS_AS((void)ca.at(0), std::out_of_range);
      CHECK_THROWS_AS(a.pop_back(), std::out_of_range);
      CHECK_THROWS_AS(a.erase(a.begin()), std::out_of_range);
      CHECK(a.erase(a.begin(), a.end()) == a.end());
      CHECK(erase(a, "x") == 0);
      CHECK(erase_if(a, [](const std::string&) { return true; }) == 0);
      a.clear();
      a.shrink_to_fit();
      a.reserve(0);
      a.resize(0);
      a.assign({});
      a.assign(0, "v");
      a.assign_range(std::vector<std::string>{});
      a.append_range(std::vector<std::string>{});
      a.insert(a.begin(), std::initializer_list<std::string>{});
      a.insert(a.end(), std::size_t{0}, "v");
      CHECK(a.data() == nullptr);  // nothing above needed memory, so nothing was reserved
      CHECK(a == DynArray<std::string>());
      CHECK_FALSE(a < DynArray<std::string>());
      CHECK((a <=> DynArray<std::string>{"a"}) == std::strong_ordering::less);
      DynArray<std::string> copy(a);
      CHECK(copy.empty());
      DynArray<std::string> cloned = a.clone();
      CHECK(cloned.empty());
      copy = a;
      CHECK(copy.empty());
      DynArray<std::string>& self = a;
      a = self;             // self copy-assignment
      a = std::move(self);  // self move-assignment
      CHECK(a.empty());
      DynArray<std::string> other;
      a.swap(other);
      swap(a, other);
      CHECK_THROWS_AS(a.reserve(a.max_size() + 1), std::length_error);
      CHECK(a.data() == nullptr);

      // And usable: each way of adding an element reserves afresh.
      CHECK(a.try_push_back("t"));
      a.push_back("p");
      a.emplace_back(2, 'e');
      a.emplace(a.begin(), "first");
      a.insert(a.end(), "last");
      CHECK(a == DynArray<std::string>{"first", "t", "p", "ee", "last"});
      CHECK(a.data() != nullptr);
    }
  }

  TEST_CASE("DynArray(n) and DynArray(n, v) create elements, as std::vector's do") {
    DynArray<int> a(10);
    std::vector<int> v(10);
    REQUIRE(a.size() == 10);
    CHECK(std::equal(a.begin(), a.end(), v.begin(), v.end()));
    a[3] = 1;
    CHECK(a[3] == 1);
    // The default reservation (smaller where the OS or the address-space budget say so).
    CHECK(a.max_size() <= DynArray<int>::default_max_size());
    CHECK(a.max_size() >= 10);
    DynArray<std::string> b(4, "ab");
    REQUIRE(b.size() == 4);
    CHECK(b[3] == "ab");
    DynArray<int> none(0);
    CHECK(none.empty());
    static_assert(!std::is_convertible_v<std::size_t, DynArray<int>>);  // explicit, as vector's
  }

  TEST_CASE("max_elements and max_bytes reserve exactly; they are not counts") {
    DynArray<int> a(reservoir::max_elements(1000));
    CHECK(a.empty());
    CHECK(a.max_size() == 1000);
    DynArray<std::uint64_t> b(reservoir::max_bytes(1001));
    CHECK(b.empty());
    CHECK(b.max_size() == 125);  // whole elements only
    reservoir::ArenaOptions o;
    o.commit_granule = 128 << 10;
    DynArray<int> c(reservoir::max_bytes(1 << 20), o);
    c.push_back(1);
    CHECK(c.arena().commit_granule() == 128 << 10);
    CHECK(c.max_size() == (1 << 20) / sizeof(int));
    CHECK_THROWS_AS(DynArray<int>(reservoir::max_bytes(3)), std::invalid_argument);  // 0 elements
    static_assert(!std::is_constructible_v<DynArray<int>, std::size_t, reservoir::ArenaOptions>);
  }

  TEST_CASE("comparisons use synth-three-way: a T with only < and == compares, as in vector") {
    struct Legacy {
      int v;
      bool operator<(const Legacy& o) const { return v < o.v; }
      bool operator==(const Legacy& o) const { return v == o.v; }
    };
    DynArray<Legacy> a{{1}, {2}};
    DynArray<Legacy> b{{1}, {3}};
    DynArray<Legacy> prefix{{1}};
    std::vector<Legacy> va{{1}, {2}}, vb{{1}, {3}}, vp{{1}};
    CHECK((a < b) == (va < vb));
    CHECK((b > a) == (vb > va));
    CHECK((prefix < a) == (vp < va));
    CHECK((a <= a) == (va <= va));
    CHECK(a != b);
    CHECK(std::is_eq(a <=> a));
    static_assert(std::is_same_v<decltype(a <=> b), std::weak_ordering>);
    DynArray<double> d{1.0, 2.0};
    static_assert(std::is_same_v<decltype(d <=> d), std::partial_ordering>);
    DynArray<int> x{1, 2, 3}, y{1, 2};
    CHECK(y < x);
    CHECK((x <=> y) == std::strong_ordering::greater);
  }

  TEST_CASE("reserve(n) after a smaller-than-default first reservation: bad_alloc, not less") {
    // The OS refuses 64 GiB and 32 GiB: the first reservation falls back to 16 GiB. Running out of
    // a default reservation made small for lack of address space is out of memory, as for
    // std::vector (OsAllocationError, a bad_alloc), not a length the caller chose. (The first
    // refusal is the pool's chunk of 64 GiB slots, where one is tried.)
    const std::uint64_t chunks = chunk_reserves();
    test::FaultGuard fault(pal::Op::reserve, 0, chunks + 2);
    DynArray<int> a;
    const std::size_t n = reservoir::kDefaultReserveBytes / 2 / sizeof(int);  // 32 GiB of ints
    REQUIRE(n <= a.max_size());  // allowed by the max_size() reported before reserving
    try {
      a.reserve(n);
      FAIL("reserve past the fallback reservation did not throw");
    } catch (const reservoir::OsAllocationError& e) {
      CHECK((e.code() == reservoir::Refusal::default_reservation_full));
    }
    CHECK(a.max_size() < n);
    CHECK(a.capacity() <= a.max_size());
    a.push_back(1);  // still usable, on the reservation it got
    CHECK(a.size() == 1);
  }

  TEST_CASE("a range longer than max_size() on a never-reserved array is length_error") {
    // The reserve step throws before any reservation exists; the cleanup must not touch the
    // (empty) arena's granule.
    static_assert(std::forward_iterator<Strings> && std::sized_sentinel_for<Strings, Strings>);
    const std::size_t too_many = DynArray<std::string>().max_size() + 1;
    const StringsRange strings{Strings{0}, Strings{too_many}};
    DynArray<std::string> a;
    CHECK_THROWS_AS(a.append_range(strings), std::length_error);
    CHECK(a.empty());
    CHECK_THROWS_AS(a.insert(a.end(), strings.begin(), strings.end()), std::length_error);
    CHECK(a.empty());
    CHECK_THROWS_AS(DynArray<std::string>(strings.begin(), strings.end()), std::length_error);
    DynArray<std::string> b;
    DynArray<std::string> c = std::move(b);
    CHECK_THROWS_AS(b.append_range(strings), std::length_error);  // moved-from: the same
    CHECK(b.empty());
    b.push_back("still usable");
    CHECK(b.size() == 1);
  }

  TEST_CASE("move-assigning a child's array to its parent's (a tree) is well-defined") {
    struct Node {
      int value = 0;
      DynArray<std::unique_ptr<Node>> kids;
    };
    Node root;
    root.kids.push_back(std::make_unique<Node>());
    root.kids[0]->value = 1;
    for (int i = 0; i < 3; ++i) {
      root.kids[0]->kids.push_back(std::make_unique<Node>());
      root.kids[0]->kids.back()->value = 10 + i;
    }
    // root.kids[0] owns the source; assignment must steal it before destroying root.kids[0].
    root.kids = std::move(root.kids[0]->kids);
    REQUIRE(root.kids.size() == 3);
    for (int i = 0; i < 3; ++i)
      CHECK(root.kids[static_cast<std::size_t>(i)]->value == 10 + i);
  }

  TEST_CASE("with fixed steps, committed memory is exactly round_up(bytes, granule)") {
    reservoir::ArenaOptions opt;
    opt.commit_granule = pal::page_size();
    opt.max_commit_step = pal::page_size();  // fixed steps
    DynArray<double> a(reservoir::max_elements(1'000'000), opt);
    for (int i = 0; i < 100'000; ++i) {
      a.push_back(i);
      const std::size_t bytes = a.size() * sizeof(double);
      REQUIRE(a.arena().committed() ==
              (bytes + pal::page_size() - 1) / pal::page_size() * pal::page_size());
    }
  }

  TEST_CASE("a node may hold a DynArray of its own, incomplete, type") {
    Node root;
    root.kids.push_back(Node{1, {}});
    root.kids[0].kids.push_back(Node{2, {}});
    root.kids[0].kids.emplace_back().value = 3;
    Node moved = std::move(root);
    REQUIRE(moved.kids.size() == 1);
    CHECK(moved.kids[0].kids.size() == 2);
    CHECK(moved.kids[0].kids[1].value == 3);
    moved.kids = std::move(moved.kids[0].kids);  // the child's children replace the parent's
    CHECK(moved.kids.size() == 2);
    CHECK(moved.kids[0].value == 2);
  }

  TEST_CASE("DynArray<int> a(10) holds ten zeros that can be written") {
    DynArray<int> a(10);
    REQUIRE(a.size() == 10);
    a[3] = 1;
    CHECK(a[3] == 1);
    CHECK(std::count(a.begin(), a.end(), 0) == 9);
  }

  TEST_CASE("erase and erase_if are found by ADL and return how many went") {
    DynArray<int> a{1, 2, 3, 2, 5, 2};
    CHECK(erase(a, 2) == 3);
    CHECK(a == DynArray<int>{1, 3, 5});
    CHECK(erase_if(a, [](int x) { return x > 1; }) == 2);
    CHECK(a == DynArray<int>{1});
    DynArray<int> empty;
    CHECK(erase(empty, 0) == 0);
    CHECK(erase_if(empty, [](int) { return true; }) == 0);
  }

  TEST_CASE("iterator-pair members accept a LegacyInputIterator that is not std::input_iterator") {
    const int src[] = {4, 5, 6};
    DynArray<int> d(LegacyIn(src), LegacyIn(src + 3));
    CHECK(d == DynArray<int>{4, 5, 6});
    d.insert(d.begin() + 1, LegacyIn(src), LegacyIn(src + 2));
    CHECK(d == DynArray<int>{4, 4, 5, 5, 6});
    d.assign(LegacyIn(src + 1), LegacyIn(src + 3));
    CHECK(d == DynArray<int>{5, 6});
    DynArray deduced(LegacyIn(src), LegacyIn(src + 3));  // deduction guide
    static_assert(std::is_same_v<decltype(deduced), DynArray<int>>);
    CHECK(deduced.size() == 3);
  }

  TEST_CASE("copying makes a new reservation of the same max_size; copy assignment keeps its own") {
    DynArray<std::string> a(reservoir::max_elements(100));
    a.push_back("x");
    a.push_back("y");
    DynArray<std::string> b = a;
    CHECK(b == a);
    CHECK(b.max_size() == 100);
    CHECK(b.data() != a.data());
    DynArray<std::string> c(reservoir::max_elements(50));
    c.push_back("z");
    const std::string* base = c.data();
    c = a;
    CHECK(c == a);
    CHECK(c.data() == base);
    CHECK(c.max_size() == 50);
    DynArray<std::string>& self = c;
    c = self;  // self-assignment keeps the elements
    CHECK(c == a);
  }

  TEST_CASE("emplace in the middle shifts once, as std::vector (no rotate)") {
    DynArray<MoveCounter> a(reservoir::max_elements(1000));
    for (int i = 0; i < 100; ++i)
      a.emplace_back(i);
    MoveCounter::moves = 0;
    a.emplace(a.begin() + 10, -1);
    // One move into the new slot, 89 shifted, one into the gap.
    CHECK(MoveCounter::moves <= 92);
    CHECK(a[10].v == -1);
    CHECK(a[11].v == 10);
    CHECK(a[100].v == 99);
    a.insert(a.begin(), a.back());  // an argument referring to an element
    CHECK(a[0].v == 99);
    CHECK(a[101].v == 99);
  }

  TEST_CASE("insert of many in the middle shifts once, as std::vector (no rotate)") {
    // The same inserts on std::vector (with room, so it does not reallocate) and on DynArray:
    // the same elements, and no more moves than std::vector's.
    for (std::size_t count : {std::size_t{3}, std::size_t{50}, std::size_t{200}}) {
      CAPTURE(count);
      std::vector<MoveCounter> v;
      v.reserve(1000);
      DynArray<MoveCounter> a(reservoir::max_elements(1000));
      for (int i = 0; i < 100; ++i) {
        v.emplace_back(i);
        a.emplace_back(i);
      }
      std::vector<MoveCounter> src;
      for (std::size_t i = 0; i < count; ++i)
        src.emplace_back(-static_cast<int>(i));
      MoveCounter::moves = 0;
      v.insert(v.begin() + 10, src.begin(), src.end());
      const long long vector_moves = MoveCounter::moves;
      MoveCounter::moves = 0;
      a.insert(a.begin() + 10, src.begin(), src.end());
      CHECK(MoveCounter::moves <= vector_moves);
      MoveCounter::moves = 0;
      v.insert(v.begin() + 5, count, MoveCounter(7));
      const long long vector_fill_moves = MoveCounter::moves;
      MoveCounter::moves = 0;
      a.insert(a.begin() + 5, count, MoveCounter(7));
      CHECK(MoveCounter::moves <= vector_fill_moves);
      MoveCounter::moves = 0;
      a.insert_range(a.begin() + 1, src);  // no vector counterpart in C++20: at most one shift
      CHECK(MoveCounter::moves <= static_cast<long long>(a.size() - 1 - count));
      v.insert(v.begin() + 1, src.begin(), src.end());
      REQUIRE(a.size() == v.size());
      CHECK(std::equal(a.begin(), a.end(), v.begin(), v.end(),
                       [](const MoveCounter& x, const MoveCounter& y) { return x.v == y.v; }));
    }
    // insert(pos, n, value) where value is an element of the array.
    DynArray<std::string> s{"a", "b", "c", "d"};
    s.insert(s.begin() + 1, 3, s[2]);
    CHECK(s == DynArray<std::string>{"a", "c", "c", "c", "b", "c", "d"});
    s.insert(s.begin() + 1, 1, s.back());
    CHECK(s == DynArray<std::string>{"a", "d", "c", "c", "c", "b", "c", "d"});
  }

  TEST_CASE("assign past capacity() whose element copy throws keeps the old contents") {
    DynArray<CopyThrows> a(reservoir::max_elements(100'000));
    a.emplace_back(1);
    a.emplace_back(2);
    while (a.size() < a.capacity())
      a.emplace_back(3);
    const std::size_t size = a.size();
    const std::size_t capacity = a.capacity();
    std::vector<CopyThrows> source(capacity + 5, CopyThrows(9));
    CopyThrows::countdown = 3;
    CHECK_THROWS_AS(a.assign(source.begin(), source.end()), std::runtime_error);
    CopyThrows::countdown = -1;
    REQUIRE(a.size() == size);
    CHECK(a.capacity() == capacity);
    CHECK(a[0].value == 1);
    CHECK(a[1].value == 2);
    a.assign(source.begin(), source.end());
    CHECK(a.size() == source.size());
    CHECK(a[0].value == 9);
  }

  TEST_CASE("element types overloading operator& or operator, and constructible-only sources") {
    struct Amp {
      int v = 0;
      int operator&() const { return 0; }
    };
    DynArray<Amp> q(3);
    q.insert(q.begin() + 1, 2, Amp{5});
    CHECK(q.size() == 5);
    CHECK(q[2].v == 5);
    DynArray<Amp> other;
    other = q;  // copy and move assignment compare addresses
    other = std::move(q);
    CHECK(other.size() == 5);

    const Comma src[] = {{1}, {2}, {3}, {4}};
    DynArray<Comma> c(3);
    c.insert(c.begin() + 1, src, src + 4);  // shifts: fewer later elements than new ones
    c.insert(c.begin() + 6, src, src + 1);  // shifts: more later elements than new ones
    c.insert(c.begin() + 1, 2, src[3]);
    CHECK(c.size() == 10);
    CHECK(c[1].v == 4);
    CHECK(c[3].v == 1);

    struct W {
      W(int x) : n(x) {}  // NOLINT: implicit, built from the ints below
      int n;

     private:
      void operator=(int);
    };
    int a[] = {1, 2, 3};
    DynArray<W> w;
    w.insert(w.end(), a, a + 3);
    w.insert(w.begin() + 1, a, a + 3);  // a middle insert builds a W and move-assigns it
    w.insert_range(w.end(), std::span<int>(a));
    CHECK(w.size() == 9);
    CHECK(w[1].n == 1);
    CHECK(w[4].n == 2);
    CHECK(w[8].n == 3);
  }

  TEST_CASE("every assignment whose copy throws keeps size, elements and capacity") {
    auto values = [](const DynArray<CopyThrows>& x) {
      std::vector<int> out;
      for (const CopyThrows& e : x)
        out.push_back(e.value);
      return out;
    };
    // assign(count, value) past capacity(): the old contents stay.
    {
      DynArray<CopyThrows> v(3, CopyThrows(1));
      const std::size_t capacity = v.capacity();
      CopyThrows::countdown = 2;
      CHECK_THROWS_AS(v.assign(capacity + 10, CopyThrows(2)), std::runtime_error);
      CopyThrows::countdown = -1;
      CHECK(values(v) == std::vector<int>{1, 1, 1});
      CHECK(v.capacity() == capacity);
    }
    // Into an empty array, past capacity(): it stays empty, capacity() as before.
    {
      const std::vector<CopyThrows> big(5000, CopyThrows(3));
      DynArray<CopyThrows> v;
      v.reserve(10);
      const std::size_t capacity = v.capacity();
      CopyThrows::countdown = 1000;
      CHECK_THROWS_AS(v.assign(big.begin(), big.end()), std::runtime_error);
      CHECK(v.empty());
      CHECK(v.capacity() == capacity);
      DynArray<CopyThrows> source(big.begin(), big.end());
      CopyThrows::countdown = 1000;
      CHECK_THROWS_AS(v = source, std::runtime_error);
      CopyThrows::countdown = -1;
      CHECK(v.empty());
      CHECK(v.capacity() == capacity);
    }
    // New contents that fit in capacity(): v stays whole (they were written over the old ones).
    {
      DynArray<CopyThrows> v(3, CopyThrows(4));
      const DynArray<CopyThrows> six(6, CopyThrows(5));
      REQUIRE(six.size() <= v.capacity());
      const std::size_t capacity = v.capacity();
      for (int k = 0; k < 6; ++k) {
        CAPTURE(k);
        CopyThrows::countdown = k;
        CHECK_THROWS_AS(v = six, std::runtime_error);
        CopyThrows::countdown = k;
        CHECK_THROWS_AS(v.assign(six.begin(), six.end()), std::runtime_error);
        CopyThrows::countdown = k;
        CHECK_THROWS_AS(v.assign({CopyThrows(6), CopyThrows(6), CopyThrows(6), CopyThrows(6),
                                  CopyThrows(6), CopyThrows(6)}),
                        std::runtime_error);
        CopyThrows::countdown = k;
        CHECK_THROWS_AS(v.assign(6, six[0]), std::runtime_error);
        CopyThrows::countdown = -1;
        CHECK(values(v) == std::vector<int>{4, 4, 4});
        CHECK(v.capacity() == capacity);
      }
      v = six;
      CHECK(values(v) == std::vector<int>{5, 5, 5, 5, 5, 5});
    }
  }

  TEST_CASE("assign from the array's own elements reads only live ones") {
    // Long strings: a read of a destroyed one is a use-after-free under AddressSanitizer.
    auto s = [](int i) { return std::string(40, static_cast<char>('a' + i)); };
    DynArray<std::string> v{s(0), s(1), s(2), s(3)};
    v.assign(v.begin() + 1, v.end());
    CHECK(v == DynArray<std::string>{s(1), s(2), s(3)});
    v.assign(v.begin(), v.begin() + 2);
    CHECK(v == DynArray<std::string>{s(1), s(2)});
    v.assign(v.begin() + 1, v.begin() + 2);
    CHECK(v == DynArray<std::string>{s(2)});
    v = {s(0), s(1), s(2), s(3)};
    v.assign(v.rbegin(), v.rend() - 1);  // not contiguous: built past the old ones
    CHECK(v == DynArray<std::string>{s(3), s(2), s(1)});
    v.assign(5, v[1]);
    CHECK(v == DynArray<std::string>(5, s(2)));
    v = {s(0), s(1), s(2), s(3)};
    v.assign_range(std::span<const std::string>(v.data() + 2, 2));
    CHECK(v == DynArray<std::string>{s(2), s(3)});
    // A full reservation (no room for old and new together): still correct.
    DynArray<std::string> full(reservoir::max_elements(4));
    full.assign({s(0), s(1), s(2), s(3)});
    full.assign(full.begin() + 1, full.end() - 1);
    CHECK(full == DynArray<std::string>{s(1), s(2)});
    full.assign({s(0), s(1), s(2), s(3)});
    full.assign(3, full[3]);
    CHECK(full == DynArray<std::string>(3, s(3)));
  }

  TEST_CASE("elements aligned past a page, and to a cache line") {
    struct alignas(8192) Page2 {
      int v = 0;
    };
    struct alignas(64) Line {
      int v = 0;
    };
    auto aligned = [](const auto& a) {
      using E = typename std::remove_cvref_t<decltype(a)>::value_type;
      return reinterpret_cast<std::uintptr_t>(a.data()) % alignof(E) == 0;
    };
    DynArray<Page2> p(reservoir::max_elements(100));
    for (int i = 0; i < 20; ++i)
      p.push_back(Page2{i});
    CHECK(aligned(p));
    CHECK(p[19].v == 19);
    CHECK(reinterpret_cast<std::uintptr_t>(&p[19]) % 8192 == 0);
    DynArray<Page2> copy(p);
    CHECK(aligned(copy));
    CHECK(copy[19].v == 19);
    DynArray<Page2> moved(std::move(copy));
    CHECK(aligned(moved));
    DynArray<Page2> defaulted;  // the default reservation, made at the first growth
    defaulted.resize(40);
    CHECK(aligned(defaulted));
    defaulted = p;
    CHECK(aligned(defaulted));
    defaulted.shrink_to_fit();
    CHECK(defaulted.capacity() >= defaulted.size());
    CHECK(defaulted[19].v == 19);

    DynArray<Line> l;
    for (int i = 0; i < 1000; ++i)
      l.push_back(Line{i});
    CHECK(aligned(l));
    DynArray<Line> lcopy = l.clone();
    CHECK(aligned(lcopy));
    CHECK(lcopy[999].v == 999);
  }

#if defined(__cpp_lib_containers_ranges)
  TEST_CASE("the from_range constructor") {
    const std::vector<int> src{1, 2, 3};
    DynArray<int> a(std::from_range, src);
    CHECK(a == DynArray<int>{1, 2, 3});
    DynArray<long> b(std::from_range, src | std::views::reverse, reservoir::max_elements(10));
    CHECK(b == DynArray<long>{3, 2, 1});
    CHECK(b.max_size() == 10);
  }
#endif

  // A counting iterator and a sized sentinel: a range of any length, known without walking it.
  struct CountFrom {
    using value_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    std::size_t i = 0;
    std::size_t operator*() const { return i; }
    CountFrom& operator++() {
      ++i;
      return *this;
    }
    CountFrom operator++(int) {
      CountFrom old = *this;
      ++i;
      return old;
    }
    bool operator==(const CountFrom&) const = default;
  };
  struct CountTo {
    std::size_t n = 0;
    friend bool operator==(const CountFrom& a, const CountTo& b) { return a.i == b.n; }
    friend std::ptrdiff_t operator-(const CountTo& b, const CountFrom& a) {
      return static_cast<std::ptrdiff_t>(b.n - a.i);
    }
    friend std::ptrdiff_t operator-(const CountFrom& a, const CountTo& b) {
      return -static_cast<std::ptrdiff_t>(b.n - a.i);
    }
  };
  static_assert(std::sized_sentinel_for<CountTo, CountFrom>);
  static_assert(std::forward_iterator<CountFrom>);

  // Every length or argument error names the call the user made, and leaves the array as it was.
  TEST_CASE("errors name the user's call") {
    // The message of the exception of type E that f throws (the test fails if f throws nothing).
    auto message = [](auto&& f) {
      try {
        f();
      } catch (const std::length_error& e) {
        return std::string("length_error ") + e.what();
      } catch (const std::invalid_argument& e) {
        return std::string("invalid_argument ") + e.what();
      }
      return std::string("nothing thrown");
    };
    static constexpr std::size_t kHuge = SIZE_MAX / 8;
    CHECK(
        message([] { DynArray<int> a(reservoir::max_elements(0)); }) ==
        "invalid_argument reservoir::DynArray(max_elements): max_elements must be greater than 0");
    CHECK(message([] { DynArray<int> a(reservoir::max_bytes(3)); }) ==
          "invalid_argument reservoir::DynArray(max_bytes): 3 bytes hold no element of 4 bytes");
    CHECK(message([] {
            DynArray<int> a(reservoir::max_elements(SIZE_MAX / 2));
          }).starts_with("length_error reservoir::DynArray(max_elements): "));
    CHECK(message([] {
            DynArray<int> a(reservoir::max_elements(SIZE_MAX / 16));
          }).starts_with("length_error reservoir::DynArray(max_elements): cannot reserve "));
    CHECK(message([] {
            DynArray<int> a(reservoir::max_bytes(SIZE_MAX));
          }).starts_with("length_error reservoir::DynArray(max_bytes): "));
    CHECK(message([] {
            reservoir::ConcurrentDynArray<int> c{reservoir::max_bytes(SIZE_MAX)};
          }).starts_with("length_error reservoir::ConcurrentDynArray(max_bytes): "));
    CHECK(message([] { reservoir::ConcurrentDynArray<int> c{reservoir::max_bytes(3)}; }) ==
          "invalid_argument reservoir::ConcurrentDynArray(max_bytes): 3 bytes hold no element of 4 "
          "bytes");
    CHECK(message([] { reservoir::ConcurrentDynArray<int> c{reservoir::max_elements(0)}; }) ==
          "invalid_argument reservoir::ConcurrentDynArray(max_elements): max_elements must be "
          "greater than 0");
    CHECK(message([] {
            reservoir::ConcurrentDynArray<int> c{reservoir::max_elements(SIZE_MAX / 2)};
          }).starts_with("length_error reservoir::ConcurrentDynArray(max_elements): "));
    CHECK(message([] { DynArray<int> a(kHuge); }) ==
          "length_error reservoir::DynArray(count): " + std::to_string(kHuge) +
              " elements exceed max_size() " + std::to_string(DynArray<int>::default_max_size()));
    CHECK(message([] {
            DynArray<int> a(kHuge, 7);
          }).starts_with("length_error reservoir::DynArray(count, value): "));
    CHECK(message([] {
            DynArray<std::size_t> a(CountFrom{0}, CountTo{kHuge});
          }).starts_with("length_error reservoir::DynArray(first, last): "));

    DynArray<int> a(reservoir::max_elements(4));
    a.append_range(std::vector<int>{0, 1, 2, 3});
    const DynArray<int> before = a.clone();
    const std::vector<int> one{9};
    const std::deque<int> one_deque{9};
    const std::string full = ": 5 elements exceed max_size() 4";
    CHECK(message([&] { a.push_back(9); }) ==
          "length_error reservoir::DynArray::push_back/emplace_back" + full);
    CHECK(message([&] { a.emplace_back(9); }) ==
          "length_error reservoir::DynArray::push_back/emplace_back" + full);
    CHECK(message([&] { a.emplace(a.begin(), 9); }) ==
          "length_error reservoir::DynArray::insert/emplace" + full);
    CHECK(message([&] { a.insert(a.begin() + 1, 9); }) ==
          "length_error reservoir::DynArray::insert/emplace" + full);
    CHECK(message([&] { a.resize(5); }) == "length_error reservoir::DynArray::resize" + full);
    CHECK(message([&] { a.reserve(5); }) == "length_error reservoir::DynArray::reserve" + full);
    CHECK(message([&] { a.append_range(one); }) ==
          "length_error reservoir::DynArray::append_range" + full);
    CHECK(message([&] { a.append_range(one_deque); }) ==
          "length_error reservoir::DynArray::append_range" + full);
    CHECK(message([&] { a.insert(a.begin() + 1, one.begin(), one.end()); }) ==
          "length_error reservoir::DynArray::insert" + full);
    CHECK(message([&] { a.insert(a.end(), one.begin(), one.end()); }) ==
          "length_error reservoir::DynArray::insert" + full);
    CHECK(message([&] { a.insert_range(a.begin() + 1, one); }) ==
          "length_error reservoir::DynArray::insert_range" + full);
    CHECK(message([&] { a.insert_range(a.end(), one); }) ==
          "length_error reservoir::DynArray::insert_range" + full);
    CHECK(message([&] {
            a.insert(a.begin(), 1, 9);
          }).starts_with("length_error reservoir::DynArray::insert: "));
    CHECK(message([&] { a.assign(5, 9); }) ==
          "length_error reservoir::DynArray::assign: 5 elements exceed max_size() 4");
    CHECK(message([&] { a.assign({1, 2, 3, 4, 5}); }) ==
          "length_error reservoir::DynArray::assign: 5 elements exceed max_size() 4");
    CHECK(a == before);  // nothing stored was lost
  }
}
