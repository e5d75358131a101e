// [sequence.reqmts]: arguments that refer to the container's own elements.
#include "conformance.hpp"

using conformance::make;
using conformance::values;

TEST_SUITE("conformance_self_reference") {
  TEST_CASE_TEMPLATE("push_back(a[0]) and emplace_back(a.back()) across growth", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1)};
    for (int i = 0; i < 100; ++i)
      a.push_back(a[0]);
    a.emplace_back(a.back());
    CHECK(a.size() == 102);
    CHECK(a[101] == make<T>(1));
  }

  TEST_CASE_TEMPLATE("insert(a.begin(), a.back()) and insert(pos, n, a[i])", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1), make<T>(2), make<T>(3)};
    a.insert(a.begin(), a.back());
    CHECK(values(a) == std::vector<int>{3, 1, 2, 3});
    a.insert(a.begin() + 1, 2, a[0]);
    CHECK(values(a) == std::vector<int>{3, 3, 3, 1, 2, 3});
    a.emplace(a.begin(), a[3]);
    CHECK(values(a) == std::vector<int>{1, 3, 3, 3, 1, 2, 3});
  }

  TEST_CASE_TEMPLATE("resize(n, a[0]) and assign(n, a[0])", V, CONFORMANCE_TYPES(int),
                     CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(4), make<T>(5)};
    a.resize(50, a[0]);
    CHECK(a[49] == make<T>(4));
    a.assign(3, a[1]);
    CHECK(values(a) == std::vector<int>{5, 5, 5});
  }
}
