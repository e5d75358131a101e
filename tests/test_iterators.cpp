// Tests of DynArray's iterators (detail/array_iterator.hpp) and of its sanitizer annotations
// (detail/annotations.hpp). This translation unit forces checked iterators on, whatever the build
// type: it holds the checks' death tests. Its DynArray lives in reservoir::checked_iterators, so
// it does not clash with the unchecked DynArray of the other files of this binary.
#define RESERVOIR_CHECKED_ITERATORS 1

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iterator>
#include <memory>
#include <numeric>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <reservoir/dynarray.hpp>

#include "support.hpp"

#if RESERVOIR_SANITIZER_ANNOTATIONS
#include <sanitizer/asan_interface.h>
#endif
#if RESERVOIR_HAS_VALGRIND_ANNOTATIONS
#include <valgrind/memcheck.h>
#endif

using reservoir::DynArray;
namespace pal = reservoir::pal;

namespace {

using It = DynArray<int>::iterator;
using CIt = DynArray<int>::const_iterator;

static_assert(std::contiguous_iterator<It>);
static_assert(std::contiguous_iterator<CIt>);
static_assert(std::contiguous_iterator<DynArray<std::string>::iterator>);
static_assert(std::is_same_v<std::iter_reference_t<It>, int&>);
static_assert(std::is_same_v<std::iter_reference_t<CIt>, const int&>);
static_assert(std::is_same_v<std::iter_value_t<CIt>, int>);
static_assert(std::is_convertible_v<It, CIt>);
static_assert(!std::is_convertible_v<CIt, It>);
static_assert(std::sized_sentinel_for<It, It>);
static_assert(std::is_nothrow_default_constructible_v<It>);
static_assert(std::is_trivially_copyable_v<It>);
// This file's iterators are the checked kind: the pointer plus the reservation's bounds.
static_assert(sizeof(It) == 3 * sizeof(int*));
static_assert(std::is_same_v<DynArray<int>, reservoir::checked_iterators::DynArray<int>>);

// The iterators of a release build are one pointer (the other test files are built with the
// project's NDEBUG setting; this checks the class itself).
static_assert(sizeof(reservoir::detail::iterator_bounds<false>) == 1);
static_assert(std::is_empty_v<reservoir::detail::iterator_bounds<false>>);

// Children: each misuses an iterator and must be stopped by the check (abort), not read memory.
RESERVOIR_CHILD("iterators.deref_value_initialised") {
  It it{};
  std::printf("%d\n", *it);
  return 0;
}
RESERVOIR_CHILD("iterators.deref_past_reservation") {
  DynArray<int> a(reservoir::max_elements(4));
  a.assign({1, 2, 3, 4});
  std::printf("%d\n", *(a.begin() + 3));  // fine: the last element
  std::fflush(stdout);
  It it = a.end();  // one past the reservation's last element
  std::printf("%d\n", *it);
  return 0;
}
RESERVOIR_CHILD("iterators.arithmetic_out_of_reservation") {
  DynArray<int> a(reservoir::max_elements(4));
  a.push_back(1);
  It it = a.begin();
  --it;
  std::printf("%p\n", static_cast<void*>(std::to_address(it)));
  return 0;
}
RESERVOIR_CHILD("iterators.different_arrays") {
  DynArray<int> a{1, 2};
  DynArray<int> b{1, 2};
  std::printf("%td\n", a.end() - b.begin());
  return 0;
}

#if RESERVOIR_SANITIZER_ANNOTATIONS
void print_report_kind() {
  std::printf("asan: %s\n", __asan_get_report_description());
  std::fflush(stdout);
}
RESERVOIR_CHILD("annotations.read_past_size") {
  __asan_set_death_callback(print_report_kind);
  DynArray<int> a;
  a.push_back(1);
  a.push_back(2);
  if (a.capacity() <= a.size()) return 2;
  std::printf("committed\n");
  std::fflush(stdout);
  const volatile int* p = a.data() + a.size();  // committed memory, no element
  return *p;
}

// An array whose capacity ends inside an 8-byte shadow granule, destroyed (its reservation
// parked), then a plain Arena and arrays of the same size take the parked reservation and write
// and read all of it: nothing the first array annotated may be reported.
RESERVOIR_CHILD("annotations.odd_size_reuse") {
  __asan_set_death_callback(print_report_kind);
  for (std::size_t n : {std::size_t{1001}, std::size_t{4093}, std::size_t{13}}) {
    {
      DynArray<char> a{reservoir::max_elements(n)};
      for (std::size_t i = 0; i < n; ++i)
        a.push_back(static_cast<char>(i));
      a.resize(n / 2);  // the poisoned tail crosses the granule again
    }
    {
      reservoir::Arena arena(n);  // the same layout and options: the parked reservation
      auto* bytes = static_cast<volatile char*>(arena.grow(arena.reserved()));
      for (std::size_t i = 0; i < arena.reserved(); ++i)
        bytes[i] = static_cast<char>(i);
    }
    {
      DynArray<char> b{reservoir::max_elements(n)};
      b.resize(n, 'x');
      long sum = 0;
      for (char c : b)
        sum += c;
      if (sum != static_cast<long>(n) * 'x') return 2;
    }
  }
  std::printf("reused\n");
  return 0;
}
#endif

}  // namespace

// A checked DynArray is reservoir::DynArray, declared in the inline namespace that gives it its
// own symbols (docs/debugging.md: the name sanitizer reports show).
static_assert(
    std::is_same_v<reservoir::DynArray<int>, reservoir::checked_iterators::DynArray<int>>);
static_assert(!std::is_same_v<reservoir::DynArray<int>::iterator, int*>);

TEST_SUITE("dynarray") {
  TEST_CASE("iterators: --end(), arithmetic, comparisons, conversions, as std::vector's") {
    DynArray<int> a{1, 2, 3, 4};
    std::vector<int> v{1, 2, 3, 4};
    CHECK(*--a.end() == *--v.end());
    CHECK(*(a.end() - 1) == 4);
    CHECK(*std::prev(a.end()) == 4);
    auto last = --a.end();
    *last = 40;
    CHECK(a.back() == 40);
    CHECK(a.end()[-1] == 40);
    CHECK(2 + a.begin() == a.begin() + 2);
    CHECK(a.end() - a.begin() == 4);
    CHECK(std::distance(a.begin(), a.end()) == 4);

    It it = a.begin();
    CIt cit = it;  // iterator -> const_iterator
    CHECK(cit == it);
    CHECK(it == cit);
    CHECK(it <= cit);
    CHECK(a.cend() > it);
    CHECK(a.cend() - it == 4);
    CHECK(it++ == a.begin());
    CHECK(it-- == a.begin() + 1);
    CHECK(it == a.begin());
    CHECK((it += 3) == a.end() - 1);
    CHECK((it -= 3) == a.begin());
    CHECK(++it == a.begin() + 1);
    CHECK(std::to_address(a.end()) == a.data() + 4);
    CHECK(std::to_address(a.cbegin()) == a.data());

    // Algorithms and views see a contiguous range of int.
    std::sort(a.begin(), a.end(), std::greater<>());
    CHECK(a.front() == 40);
    std::span<int> s(a.begin(), a.end());
    CHECK(s.data() == a.data());
    CHECK(s.size() == 4);
    std::span<const int> cs(a.cbegin(), a.cend());
    CHECK(cs.back() == a.back());
    CHECK(std::find(a.begin(), a.end(), 3) - a.begin() == 1);
    CHECK(std::accumulate(a.rbegin(), a.rend(), 0) == 40 + 3 + 2 + 1);
    CHECK(*a.rbegin() == a.back());

    // ->, [] and value-initialised iterators compare equal, as the standard requires.
    DynArray<std::string> strs{"ab", "cde"};
    CHECK(strs.begin()->size() == 2);
    CHECK(strs.cbegin()[1] == "cde");
    CHECK(It{} == It{});
    CHECK(It{} - It{} == 0);
  }

  TEST_CASE("iterators stay valid while the array grows, is moved and is swapped") {
    DynArray<int> a;
    a.push_back(7);
    const It first = a.begin();
    for (int i = 0; i < 100000; ++i)
      a.push_back(i);
    CHECK(*first == 7);
    CHECK(first[100000] == 99999);  // the element appended last, through the old iterator
    CHECK(a.end() - first == 100001);

    DynArray<int> b = std::move(a);
    CHECK(*first == 7);  // the elements did not move, nor did their reservation
    CHECK(b.begin() == first);
    CHECK(b.end() - first == 100001);

    DynArray<int> c{1};
    swap(b, c);
    CHECK(c.begin() == first);
    CHECK(*b.begin() == 1);
  }

  TEST_CASE("iterators on empty, default-constructed and moved-from arrays") {
    DynArray<int> empty;
    CHECK(empty.begin() == empty.end());
    CHECK(empty.end() - empty.begin() == 0);
    CHECK(empty.rbegin() == empty.rend());
    CHECK(empty.empty());
    CHECK(std::to_address(empty.begin()) == empty.data());

    DynArray<int> a{1};
    DynArray<int> b = std::move(a);
    CHECK(a.begin() == a.end());  // NOLINT(bugprone-use-after-move): moved-from is defined
    CHECK(a.cbegin() == a.cend());
    CHECK(b.size() == 1);
  }

  TEST_CASE("checked iterators abort on misuse instead of reading memory") {
    for (const char* name :
         {"iterators.deref_value_initialised", "iterators.deref_past_reservation",
          "iterators.arithmetic_out_of_reservation", "iterators.different_arrays"}) {
      CAPTURE(name);
      const test::ProcessResult r = test::run_child(name);
#if defined(_WIN32)
      CHECK_MESSAGE(r.exited, test::describe(r));
      CHECK_MESSAGE(r.exit_code == 3, test::describe(r));  // abort() on Windows
#else
      CHECK_MESSAGE((!r.exited && r.signal == SIGABRT), test::describe(r));
#endif
      std::string out = r.output;  // without the \r of Windows' text mode
      out.erase(std::remove(out.begin(), out.end(), '\r'), out.end());
      if (std::string_view(name) == "iterators.deref_past_reservation") {
        CHECK(out == "4\n");  // the valid dereference ran, the bad one did not
      } else {
        CHECK(out.empty());
      }
    }
  }

#if RESERVOIR_SANITIZER_ANNOTATIONS
  TEST_CASE("AddressSanitizer reports a read past size() inside committed memory") {
    const test::ProcessResult r = test::run_child("annotations.read_past_size");
    CHECK_MESSAGE(!(r.exited && r.exit_code == 0), test::describe(r));
    CHECK(r.output == "committed\nasan: container-overflow\n");
  }

  TEST_CASE("AddressSanitizer: a parked reservation whose capacity ended mid-granule is clean") {
    const test::ProcessResult r = test::run_child("annotations.odd_size_reuse");
    CHECK_MESSAGE((r.exited && r.exit_code == 0), test::describe(r) << ": " << r.output);
    CHECK(r.output == "reused\n");
  }

  TEST_CASE("AddressSanitizer annotations follow every change of size and capacity") {
    // Every element is readable, every slot in [size(), capacity()) is poisoned, whatever path
    // changed them.
    auto check = [](const DynArray<std::string>& a) {
      std::size_t wrong = 0;
      for (const std::string& s : a)
        wrong += __asan_address_is_poisoned(&s) ? 1 : 0;
      for (const std::string* p = a.data() + a.size(); p != a.data() + a.capacity(); ++p)
        wrong += __asan_address_is_poisoned(p) ? 0 : 1;
      CHECK(wrong == 0);
    };
    DynArray<std::string> a;
    check(a);
    a.push_back("x");
    check(a);
    a.resize(5000, "y");
    check(a);
    a.erase(a.begin() + 10, a.end());
    check(a);
    a.shrink_to_fit();
    check(a);
    a.reserve(100000);
    check(a);
    a.pop_back();
    check(a);
    a.insert(a.begin() + 2, 300, "z");
    check(a);
    a.assign(70000, "w");
    check(a);
    std::vector<std::string> src(90000, "v");
    a.assign(src.begin(), src.end());
    check(a);
    a.clear();
    check(a);
    DynArray<std::string> b = std::move(a);
    check(b);
    check(a);  // NOLINT(bugprone-use-after-move): moved-from is defined
    b.append_range(src);
    check(b);
    DynArray<int> ints;
    const std::vector<int> more(1000, 5);
    ints.append_range(more);
    std::size_t wrong = 0;
    for (const int* p = ints.data() + ints.size(); p != ints.data() + ints.capacity(); ++p)
      wrong += __asan_address_is_poisoned(p) ? 0 : 1;
    CHECK(wrong == 0);
  }
#endif

#if RESERVOIR_HAS_VALGRIND_ANNOTATIONS
  TEST_CASE("valgrind: [size(), capacity()) is no-access, the elements addressable") {
    if (!RUNNING_ON_VALGRIND) {
      MESSAGE("not under valgrind: the client requests do nothing here");
      return;
    }
    // VALGRIND_GET_VBITS answers 3 for memory that is not addressable, without reporting it.
    auto addressable = [](const void* p, std::size_t n) {
      std::vector<unsigned char> bits(n);
      return VALGRIND_GET_VBITS(p, bits.data(), n) == 1;
    };
    DynArray<std::string> a{"a", "b"};
    CHECK(addressable(a.data(), 2 * sizeof(std::string)));
    CHECK(!addressable(a.data() + 2, sizeof(std::string)));
    CHECK(!addressable(a.data() + a.capacity() - 1, sizeof(std::string)));
    a.resize(3000);
    CHECK(addressable(a.data() + 2999, sizeof(std::string)));
    CHECK(!addressable(a.data() + 3000, sizeof(std::string)));
    a.pop_back();
    CHECK(!addressable(a.data() + 2999, sizeof(std::string)));
    a.clear();
    CHECK(!addressable(a.data(), sizeof(std::string)));
  }
#endif
}
