// [vector.capacity], [vector.data], [sequence.reqmts] element access.
#include "conformance.hpp"

using conformance::make;
using conformance::values;

TEST_SUITE("conformance_capacity") {
  TEST_CASE_TEMPLATE("reserve gives capacity() >= n and keeps elements and their addresses", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1), make<T>(2)};
    a.reserve(100);
    CHECK(a.capacity() >= 100);
    CHECK(values(a) == std::vector<int>{1, 2});
    const T* p = a.data();
    for (int i = 0; i < 98; ++i)
      a.push_back(make<T>(i));
    CHECK(a.data() == p);  // no reallocation below capacity()
    a.reserve(1);          // never shrinks
    CHECK(a.capacity() >= 100);
    if constexpr (requires { V::default_max_size(); }) {
      if (a.max_size() < V::default_max_size()) {
        // The OS refused the default reservation (valgrind, a small RLIMIT_AS) and granted a
        // smaller one: past it, the array is out of memory, reported as std::vector reports that.
        CHECK_THROWS_AS(a.reserve(a.max_size() + 1), std::bad_alloc);
        return;
      }
    }
    CHECK_THROWS_AS(a.reserve(a.max_size() + 1), std::length_error);
  }

  TEST_CASE_TEMPLATE("size, empty, capacity >= size, max_size >= size", V, CONFORMANCE_TYPES(int)) {
    V a;
    for (int i = 0; i < 1000; ++i) {
      a.push_back(i);
      REQUIRE(a.capacity() >= a.size());
    }
    CHECK(a.size() == 1000);
    CHECK_FALSE(a.empty());
    CHECK(a.max_size() >= a.size());
  }

  TEST_CASE_TEMPLATE("resize grows with value-initialised or copied elements and shrinks", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1)};
    a.resize(3);
    REQUIRE(a.size() == 3);
    CHECK(a[1] == T());
    a.resize(5, make<T>(4));
    CHECK(a[4] == make<T>(4));
    a.resize(1);
    CHECK(values(a) == std::vector<int>{1});
    a.resize(0);
    CHECK(a.empty());
  }

  TEST_CASE_TEMPLATE("shrink_to_fit keeps the elements; capacity() >= size()", V,
                     CONFORMANCE_TYPES(int)) {
    V a(1000, 5);
    a.resize(3);
    a.shrink_to_fit();
    CHECK(a.capacity() >= a.size());
    CHECK(values(a) == std::vector<int>{5, 5, 5});
  }

  TEST_CASE_TEMPLATE("element access: [], at, front, back, data", V, CONFORMANCE_TYPES(int)) {
    V a{1, 2, 3};
    const V& c = a;
    CHECK(a[1] == 2);
    CHECK(c.at(2) == 3);
    CHECK_THROWS_AS((void)a.at(3), std::out_of_range);
    CHECK(a.front() == 1);
    CHECK(c.back() == 3);
    CHECK(a.data() == &a[0]);
    CHECK(c.data() + 3 == &*(c.end() - 1) + 1);
  }

  TEST_CASE_TEMPLATE("iterators: contiguous, reverse, const conversion", V,
                     CONFORMANCE_TYPES(int)) {
    static_assert(std::contiguous_iterator<typename V::iterator>);
    static_assert(std::contiguous_iterator<typename V::const_iterator>);
    V a{1, 2, 3};
    typename V::const_iterator ci = a.begin();
    CHECK(ci == a.cbegin());
    CHECK(*a.rbegin() == 3);
    CHECK(std::distance(a.begin(), a.end()) == 3);
    CHECK(std::vector<int>(a.rbegin(), a.rend()) == std::vector<int>{3, 2, 1});
    CHECK(std::to_address(a.begin()) == a.data());
  }
}
