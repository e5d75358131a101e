// [vector.modifiers]: push/emplace/insert/erase/pop_back/clear.
#include <list>

#include "conformance.hpp"

using conformance::make;
using conformance::values;

TEST_SUITE("conformance_modifiers") {
  TEST_CASE_TEMPLATE("push_back, emplace_back (returns a reference), pop_back, clear", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a;
    a.push_back(make<T>(1));
    T two = make<T>(2);
    a.push_back(two);
    T& r = a.emplace_back(make<T>(3));
    CHECK(&r == &a.back());
    CHECK(values(a) == std::vector<int>{1, 2, 3});
    a.pop_back();
    CHECK(values(a) == std::vector<int>{1, 2});
    a.clear();
    CHECK(a.empty());
  }

  TEST_CASE_TEMPLATE("insert: one, n copies, a range, an initializer_list; returns the first", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1), make<T>(5)};
    auto it = a.insert(a.begin() + 1, make<T>(2));
    CHECK(it == a.begin() + 1);
    it = a.insert(a.begin() + 2, 2, make<T>(3));
    CHECK(it == a.begin() + 2);
    const std::list<T> src{make<T>(4), make<T>(4)};
    it = a.insert(a.begin() + 4, src.begin(), src.end());
    CHECK(it == a.begin() + 4);
    it = a.insert(a.end(), {make<T>(6), make<T>(7)});
    CHECK(it == a.end() - 2);
    CHECK(values(a) == std::vector<int>{1, 2, 3, 3, 4, 4, 5, 6, 7});
    it = a.insert(a.begin(), src.begin(), src.begin());  // empty range: returns pos
    CHECK(it == a.begin());
    it = a.insert(a.begin(), 0, make<T>(1));
    CHECK(it == a.begin());
    CHECK(a.size() == 9);
  }

  TEST_CASE_TEMPLATE("emplace constructs in place and shifts the rest", V, CONFORMANCE_TYPES(int),
                     CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1), make<T>(3)};
    auto it = a.emplace(a.begin() + 1, make<T>(2));
    CHECK(*it == make<T>(2));
    a.emplace(a.end(), make<T>(4));
    a.emplace(a.begin(), make<T>(0));
    CHECK(values(a) == std::vector<int>{0, 1, 2, 3, 4});
  }

  TEST_CASE_TEMPLATE("erase one and a range; returns the element after", V, CONFORMANCE_TYPES(int),
                     CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a;
    for (int i = 0; i < 8; ++i)
      a.push_back(make<T>(i));
    auto it = a.erase(a.begin() + 2);
    CHECK(*it == make<T>(3));
    it = a.erase(a.begin() + 1, a.begin() + 4);
    CHECK(*it == make<T>(5));
    CHECK(values(a) == std::vector<int>{0, 5, 6, 7});
    it = a.erase(a.begin() + 1, a.begin() + 1);
    CHECK(it == a.begin() + 1);
    it = a.erase(a.end() - 1);
    CHECK(it == a.end());
    it = a.erase(a.begin(), a.end());
    CHECK(it == a.end());
    CHECK(a.empty());
  }

  TEST_CASE_TEMPLATE("a reference stays valid across push_back below capacity", V,
                     CONFORMANCE_TYPES(std::string)) {
    V a;
    a.reserve(10);
    a.push_back("first");
    const std::string& r = a[0];
    for (int i = 0; i < 9; ++i)
      a.push_back("x");
    CHECK(r == "first");
  }
}
