// [container.reqmts], [vector.overview]: iterator types, --end(), conversions, reverse iterators.
#include <algorithm>
#include <iterator>
#include <numeric>
#include <span>

#include "conformance.hpp"

TEST_SUITE("conformance_iterators") {
  TEST_CASE_TEMPLATE("iterators are contiguous; iterator converts to const_iterator", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    static_assert(std::contiguous_iterator<typename V::iterator>);
    static_assert(std::contiguous_iterator<typename V::const_iterator>);
    static_assert(std::is_convertible_v<typename V::iterator, typename V::const_iterator>);
    static_assert(!std::is_convertible_v<typename V::const_iterator, typename V::iterator>);
    static_assert(std::is_same_v<std::iter_value_t<typename V::iterator>, T>);
    static_assert(std::is_same_v<std::iter_reference_t<typename V::const_iterator>, const T&>);
    static_assert(
        std::is_same_v<typename V::reverse_iterator, std::reverse_iterator<typename V::iterator>>);
    static_assert(
        std::is_same_v<typename V::difference_type, std::iter_difference_t<typename V::iterator>>);
    V v{conformance::make<T>(1), conformance::make<T>(2), conformance::make<T>(3)};
    typename V::const_iterator c = v.begin();
    CHECK(c == v.cbegin());
    CHECK(v.begin() == c);
    CHECK(v.cend() - v.begin() == 3);
    CHECK(v.begin() < v.cend());
    CHECK(std::to_address(v.begin()) == v.data());
    CHECK(std::to_address(v.end()) == v.data() + 3);
    CHECK(std::span<const T>(v.cbegin(), v.cend()).size() == 3);
  }

  TEST_CASE_TEMPLATE("--end() and end()[-1] name the last element", V, CONFORMANCE_TYPES(int)) {
    V v{1, 2, 3};
    CHECK(*--v.end() == 3);
    CHECK(v.end()[-1] == 3);
    *--v.end() = 30;
    CHECK(v.back() == 30);
    auto it = v.end();
    CHECK(it-- == v.end());
    CHECK(*it == 30);
    CHECK(*(it - 2) == 1);
    CHECK(*(it -= 1) == 2);
    CHECK(*(1 + it) == 30);
    CHECK(conformance::values(v) == std::vector<int>{1, 2, 30});
  }

  TEST_CASE_TEMPLATE("reverse iterators and algorithms", V, CONFORMANCE_TYPES(int)) {
    V v{3, 1, 2};
    std::sort(v.begin(), v.end());
    CHECK(conformance::values(v) == std::vector<int>{1, 2, 3});
    CHECK(std::accumulate(v.crbegin(), v.crend(), 0) == 6);
    CHECK(*v.rbegin() == 3);
    CHECK(*std::prev(v.rend()) == 1);
    std::reverse(v.begin(), v.end());
    CHECK(conformance::values(v) == std::vector<int>{3, 2, 1});
    CHECK(std::lower_bound(v.rbegin(), v.rend(), 2) - v.rbegin() == 1);
    V empty;
    CHECK(empty.begin() == empty.end());
    CHECK(empty.rbegin() == empty.rend());
    CHECK(typename V::iterator{} == typename V::iterator{});  // value-initialised: equal
  }
}
