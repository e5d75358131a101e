// Tests of <reservoir/dynarray.hpp>, exceptions: a throwing element or a refused commit leaves the
// array as it was (the strong guarantee), bad sizes and ranges too long are refused.
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

namespace {

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

// Throws from its assignments while armed; its constructors never throw.
struct AssignBomb {
  static inline bool armed = false;
  int v;
  explicit AssignBomb(int x) : v(x) {}
  AssignBomb(const AssignBomb&) = default;
  AssignBomb(AssignBomb&&) noexcept = default;
  AssignBomb& operator=(const AssignBomb& o) {
    if (armed) throw std::runtime_error("assignment");
    v = o.v;
    return *this;
  }
  AssignBomb& operator=(AssignBomb&& o) {
    if (armed) throw std::runtime_error("assignment");
    v = o.v;
    return *this;
  }
};

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
    // Population left to faults: geometric steps, which grow past one granule (bounded steps
    // of a populated policy may be a single granule of this size).
    reservoir::ArenaOptions o;
    o.prefault = false;
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

  // Every growing call whose commit the OS refuses names that call after the OS's words, and
  // leaves the array (its size, capacity and elements) as it was.
  TEST_CASE("a refused commit names the user's call; the array is unchanged") {
    const std::vector<int> one{1};
    const std::deque<int> one_deque{1};
    // The message of the OsAllocationError that grow throws ("not refused" if none).
    const auto refusal = [](auto&& grow) {
      try {
        grow();
      } catch (const reservoir::OsAllocationError& e) {
        return std::string(e.what());
      }
      return std::string("not refused");
    };
    // The OS's refusal of a commit, then the call: "... (ENOMEM). reservoir::<call> needed it".
    const auto names = [](const std::string& what, const std::string& call) {
      return what.starts_with("cannot commit ") &&
             what.ends_with("). reservoir::" + call + " needed it");
    };
    struct Case {
      const char* call;
      std::function<void(DynArray<int>&)> grow;
    };
    const std::vector<Case> cases = {
        {"DynArray::push_back/emplace_back", [](DynArray<int>& a) { a.push_back(9); }},
        {"DynArray::push_back/emplace_back", [](DynArray<int>& a) { a.emplace_back(9); }},
        {"DynArray::insert/emplace", [](DynArray<int>& a) { a.insert(a.end(), 9); }},
        {"DynArray::insert/emplace", [](DynArray<int>& a) { a.insert(a.begin() + 1, 9); }},
        {"DynArray::insert/emplace", [](DynArray<int>& a) { a.emplace(a.end(), 9); }},
        {"DynArray::insert/emplace", [](DynArray<int>& a) { a.emplace(a.begin(), 9); }},
        {"DynArray::insert", [](DynArray<int>& a) { a.insert(a.end(), 3, 9); }},
        {"DynArray::insert", [](DynArray<int>& a) { a.insert(a.begin(), 3, 9); }},
        {"DynArray::insert", [&](DynArray<int>& a) { a.insert(a.end(), one.begin(), one.end()); }},
        {"DynArray::insert",
         [&](DynArray<int>& a) { a.insert(a.begin() + 2, one.begin(), one.end()); }},
        {"DynArray::insert",
         [](DynArray<int>& a) {
           std::istringstream in("1 2 3");  // single pass
           a.insert(a.begin(), std::istream_iterator<int>(in), std::istream_iterator<int>());
         }},
        {"DynArray::insert_range", [&](DynArray<int>& a) { a.insert_range(a.end(), one_deque); }},
        {"DynArray::insert_range", [&](DynArray<int>& a) { a.insert_range(a.begin(), one); }},
        {"DynArray::resize", [](DynArray<int>& a) { a.resize(a.size() + 10); }},
        {"DynArray::resize", [](DynArray<int>& a) { a.resize(a.size() + 10, 9); }},
        {"DynArray::reserve", [](DynArray<int>& a) { a.reserve(a.size() + 10); }},
        {"DynArray::append_range", [&](DynArray<int>& a) { a.append_range(one); }},
        {"DynArray::append_range", [&](DynArray<int>& a) { a.append_range(one_deque); }},
        {"DynArray::assign", [](DynArray<int>& a) { a.assign(a.capacity() + 1, 9); }},
        {"DynArray::assign",
         [](DynArray<int>& a) {
           const std::vector<int> more(a.capacity() + 1, 9);
           a.assign(more.begin(), more.end());
         }},
        {"DynArray::assign",
         [](DynArray<int>& a) {
           const std::deque<int> more(a.capacity() + 1, 9);
           a.assign_range(more);
         }},
        {"DynArray::assign",
         [](DynArray<int>& a) {
           std::istringstream in("1 2 3");  // single pass, past the old elements
           a.assign(std::istream_iterator<int>(in), std::istream_iterator<int>());
         }},
    };
    reservoir::ArenaOptions fresh;
    fresh.reuse_reservation = false;
    for (const Case& c : cases) {
      const std::string call = c.call;
      CAPTURE(call);
      DynArray<int> a(reservoir::max_elements(1'000'000), fresh);
      fill_to_capacity(a);  // the next growth must commit
      const std::size_t size = a.size(), capacity = a.capacity();
      {
        test::FaultGuard fault(pal::Op::commit, 0, 1'000'000);
        const std::string what = refusal([&] { c.grow(a); });
        CHECK_MESSAGE(names(what, c.call), what);
      }
      CHECK(a.size() == size);
      CHECK(a.capacity() == capacity);
      CHECK(test::first_wrong(size, [&](std::size_t i) { return a[i] == make<int>(i); }) == size);
    }
    // The constructors that grow, on the default reservation, and clone (the copy constructor).
    const DynArray<int> source(1'000'000, 7);
    {
      test::FaultGuard fault(pal::Op::commit, 0, 1'000'000);
      CHECK(names(refusal([] { DynArray<int> a(1'000'000); }), "DynArray(count)"));
      CHECK(names(refusal([] { DynArray<int> a(1'000'000, 7); }), "DynArray(count, value)"));
      CHECK(names(refusal([&] { DynArray<int> a(source.begin(), source.end()); }),
                  "DynArray(first, last)"));
      CHECK(names(refusal([&] { (void)source.clone(); }), "DynArray::clone"));
      CHECK(names(refusal([&] { const DynArray<int> a(source); }), "DynArray::clone"));
    }
    // ConcurrentDynArray's growing calls, and the Writer's.
    using reservoir::ConcurrentDynArray;
    struct ConcurrentCase {
      const char* call;
      std::function<void(ConcurrentDynArray<int>&)> grow;
    };
    const std::vector<ConcurrentCase> concurrent = {
        {"push_back/emplace_back", [](ConcurrentDynArray<int>& c) { c.push_back(9); }},
        {"push_back/emplace_back", [](ConcurrentDynArray<int>& c) { c.emplace_back(9); }},
        {"emplace_back_with",
         [](ConcurrentDynArray<int>& c) {
           c.emplace_back_with([](std::size_t i) noexcept { return static_cast<int>(i); });
         }},
        {"append_range", [&](ConcurrentDynArray<int>& c) { c.append_range(one); }},
        {"append_range", [&](ConcurrentDynArray<int>& c) { c.append_range(one_deque); }},
        {"Writer::flush",
         [](ConcurrentDynArray<int>& c) {
           auto w = c.writer();
           w.push_back(9);
           try {
             w.flush();
           } catch (...) {
             CHECK(w.take_buffered() == std::vector<int>{9});  // kept: nothing lost
             throw;
           }
         }},
        {"Writer::push_back/emplace_back",
         [](ConcurrentDynArray<int>& c) {
           auto w = c.writer();
           try {
             for (int i = 0; i < 100'000; ++i)  // flushes when its buffer is full
               w.push_back(i);
           } catch (...) {
             CHECK(w.buffered() != 0);
             (void)w.take_buffered();
             throw;
           }
         }},
    };
    for (const ConcurrentCase& c : concurrent) {
      const std::string call = c.call;
      CAPTURE(call);
      ConcurrentDynArray<int> a{reservoir::max_elements(1'000'000), fresh};
      test::FaultGuard fault(pal::Op::commit, 0, 1'000'000);
      const std::string what = refusal([&] { c.grow(a); });
      // Where one thread appends alone (solo mode) its refusal is thrown as is; elsewhere (no
      // process-wide barrier) the refusal closes the claims and names the index too.
      const std::string name = std::string("ConcurrentDynArray::") + c.call;
      CHECK_MESSAGE(
          (names(what, name) || (what.starts_with("cannot commit ") &&
                                 what.ends_with("). reservoir::" + name +
                                                " needed it for index 0; nothing was appended"))),
          what);
      CHECK(a.size() == 0);
    }
    // Arena's own.
    struct ArenaCase {
      const char* call;
      std::function<void(reservoir::Arena&)> grow;
    };
    const std::vector<ArenaCase> arena_cases = {
        {"Arena::grow", [](reservoir::Arena& a) { (void)a.grow(100); }},
        {"Arena::allocate", [](reservoir::Arena& a) { (void)a.allocate(100); }},
        {"Arena::commit", [](reservoir::Arena& a) { a.commit(100); }},
    };
    for (const ArenaCase& c : arena_cases) {
      const std::string call = c.call;
      CAPTURE(call);
      reservoir::Arena a(std::size_t{4} << 20, fresh);
      {
        test::FaultGuard fault(pal::Op::commit, 0, 1'000'000);
        const std::string what = refusal([&] { c.grow(a); });
        CHECK_MESSAGE(names(what, c.call), what);
      }
      CHECK(a.size() == 0);
      CHECK(a.committed() == 0);
    }
    // A refused reservation names the constructor that reserved.
    {
      test::FaultGuard fault(pal::Op::reserve, 0, 1'000'000);
      const auto reserve_names = [](const std::string& what, const std::string& call) {
        return what.starts_with("cannot reserve ") &&
               what.find("). reservoir::" + call + " needed it") != std::string::npos;
      };
      std::string what =
          refusal([&] { DynArray<int> a(reservoir::max_elements(1'000'000), fresh); });
      CHECK_MESSAGE(reserve_names(what, "DynArray(max_elements)"), what);
      what = refusal([&] { ConcurrentDynArray<int> c{reservoir::max_elements(1'000'000), fresh}; });
      CHECK_MESSAGE(reserve_names(what, "ConcurrentDynArray(max_elements)"), what);
      what = refusal([&] { reservoir::Arena a(std::size_t{4} << 20, fresh); });
      CHECK_MESSAGE(reserve_names(what, "Arena"), what);
    }
    // Past the reservation: the length error names the call too.
    reservoir::Arena small(std::size_t{4} << 20, fresh);
    const std::size_t past = small.reserved() + 1;
    CHECK_THROWS_WITH_AS((void)small.grow(past),
                         doctest::Contains("reservoir::Arena::grow: cannot grow to "),
                         std::length_error);
    CHECK_THROWS_WITH_AS((void)small.allocate(past),
                         doctest::Contains("reservoir::Arena::allocate: cannot grow to "),
                         std::length_error);
    CHECK_THROWS_WITH_AS(small.commit(past),
                         doctest::Contains("reservoir::Arena::commit: cannot grow to "),
                         std::length_error);
  }

  TEST_CASE("insert at the front with a throwing shift past the capacity: the array stays valid") {
    // An insert into a full array commits one more step, moves the last element into it, then
    // shifts by assignment: a throw there leaves that element past the old capacity, whose commit
    // must then stay.
    DynArray<AssignBomb> a;
    a.emplace_back(0);
    while (a.size() < a.capacity())
      a.emplace_back(static_cast<int>(a.size()));
    const std::size_t full = a.size();
    AssignBomb::armed = true;
    CHECK_THROWS_AS(a.insert(a.begin(), AssignBomb(-1)), std::runtime_error);
    AssignBomb::armed = false;
    // The basic guarantee: every element is readable and destructible, and appends go on.
    CHECK(a.size() <= a.capacity());
    CHECK(a.size() >= full);
    CHECK(a.back().v == static_cast<int>(full) - 1);  // the last element, moved up: readable
    for (int i = 0; i < 10'000; ++i)
      a.emplace_back(i);
    CHECK(a.size() <= a.capacity());
    CHECK(a.back().v == 9'999);
  }

  TEST_CASE("a constructor refused after it reserved gives its reservation back") {
    // The array holds its arena apart from itself: a constructor that throws after reserving must
    // still give the reservation (and that block) back. Each form reserves a default array's
    // reservation afresh (a pool slot of a fresh chunk, or a mapping of its own where no chunk
    // is made), its first commit is refused, and a trim and a cleared cache afterwards then find
    // the chunk unused, or the mapping parked, and release it.
    const std::vector<int> values{1, 2, 3};
    const std::vector<std::function<void()>> forms = {
        [] { DynArray<int> a(1000); },
        [] { DynArray<int> a(1000, 7); },
        [] { DynArray<int> a{1, 2, 3}; },
        [&] { DynArray<int> a(values.begin(), values.end()); },
    };
    for (std::size_t i = 0; i < forms.size(); ++i) {
      CAPTURE(i);
      reservoir::trim_pools();
      reservoir::clear_reservation_cache();
      const std::uint64_t releases = pal::testing::calls(pal::Op::release);
      {
        test::FaultGuard fault(pal::Op::commit, 0, 1'000'000);
        CHECK_THROWS_AS(forms[i](), reservoir::OsAllocationError);
      }
      reservoir::trim_pools();
      reservoir::clear_reservation_cache();
      CHECK(pal::testing::calls(pal::Op::release) > releases);
    }
  }

  TEST_CASE("a refused commit on the by-value append path: the array is unchanged, then usable") {
    // int appends through the static slow path, given a copy of the array's members that the
    // inline path takes back however the call ends: a refused commit must leave every member as
    // it was (the reservation, the end, the capacity, max_size()).
    DynArray<int> a;
    a.push_back(0);
    fill_to_capacity(a);
    const std::size_t size = a.size(), capacity = a.capacity(), max = a.max_size();
    const std::byte* const base = a.arena().base();
    {
      test::FaultGuard fault(pal::Op::commit, 0, 3);
      try {
        a.push_back(-1);
        FAIL("should have thrown");
      } catch (const reservoir::OsAllocationError& e) {
        CHECK(std::string(e.what()).find("cannot commit") == 0);
      }
      CHECK_FALSE(a.try_push_back(-2));
    }
    CHECK(a.size() == size);
    CHECK(a.capacity() == capacity);
    CHECK(a.max_size() == max);
    CHECK(a.arena().base() == base);
    CHECK(test::first_wrong(size, [&](std::size_t i) { return a[i] == make<int>(i); }) == size);
    a.push_back(7);  // usable afterwards, in the same reservation
    CHECK(a.back() == 7);
    CHECK(a.arena().base() == base);
  }

  TEST_CASE("a DynArray is four words; its arena is held apart and moves with it") {
    // The arena lives in a block of its own, so that no out-of-line call is given the array's
    // address (the append loop then keeps end_ in a register): the array is its pointer, end_,
    // cap_ and max_size_, and a move hands the block over.
    static_assert(sizeof(DynArray<int>) == 4 * sizeof(void*));
    static_assert(sizeof(DynArray<std::string>) == 4 * sizeof(void*));
    DynArray<int> empty;
    CHECK(empty.arena().reserved() == 0);
    CHECK(empty.capacity() == 0);
    DynArray<int> a;
    a.push_back(1);
    const reservoir::Arena* const arena = &a.arena();
    CHECK(arena->reserved() > 0);
    DynArray<int> b(std::move(a));
    CHECK(&b.arena() == arena);
    CHECK(a.arena().reserved() == 0);  // NOLINT(bugprone-use-after-move): moved-from is empty
    b.swap(empty);
    CHECK(&empty.arena() == arena);
    CHECK(empty.back() == 1);
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

  // A default-constructed array reserves at its first growth: a refused reservation names that
  // call, as a refused commit does, and leaves the array empty and usable.
  TEST_CASE("a default array's refused first reservation names the user's call") {
    const std::vector<int> three{1, 2, 3};
    struct Case {
      const char* call;
      std::function<void(DynArray<int>&)> grow;
    };
    const std::vector<Case> cases = {
        {"DynArray::push_back/emplace_back", [](DynArray<int>& a) { a.push_back(9); }},
        {"DynArray::reserve", [](DynArray<int>& a) { a.reserve(10); }},
        {"DynArray::resize", [](DynArray<int>& a) { a.resize(10); }},
        {"DynArray::append_range", [&](DynArray<int>& a) { a.append_range(three); }},
        {"DynArray::insert",
         [&](DynArray<int>& a) { a.insert(a.end(), three.begin(), three.end()); }},
        {"DynArray::assign", [](DynArray<int>& a) { a.assign(10, 9); }},
    };
    for (const Case& c : cases) {
      const std::string call = c.call;
      CAPTURE(call);
      DynArray<int> a;
      std::string what = "not refused";
      {
        test::FaultGuard fault(pal::Op::reserve, 0, 1000);  // every fallback refused too
        try {
          c.grow(a);
        } catch (const reservoir::OsAllocationError& e) {
          what = e.what();
        }
      }
      CHECK_MESSAGE(what.starts_with("cannot reserve "), what);
      CHECK_MESSAGE(what.find("reservoir::" + call + " needed it") != std::string::npos, what);
      CHECK(a.empty());
      CHECK(a.capacity() == 0);
      c.grow(a);  // the OS agrees again: the same call succeeds
      CHECK(a.capacity() != 0);
    }
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
}
