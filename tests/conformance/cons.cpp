// [vector.cons], [sequence.reqmts]: construction, copy, move, assignment.
#include <list>

#include "conformance.hpp"

using conformance::make;
using conformance::values;

TEST_SUITE("conformance_cons") {
  TEST_CASE_TEMPLATE("default construction is empty", V, CONFORMANCE_TYPES(int),
                     CONFORMANCE_TYPES(std::string)) {
    V a;
    CHECK(a.empty());
    CHECK(a.size() == 0);
    CHECK(a.begin() == a.end());
  }

  TEST_CASE_TEMPLATE("V(n) value-initialises n elements; V(n, v) copies v", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a(5);
    REQUIRE(a.size() == 5);
    for (const T& x : a)
      CHECK(x == T());
    V b(4, make<T>(7));
    CHECK(values(b) == std::vector<int>{7, 7, 7, 7});
    V none(0);
    CHECK(none.empty());
  }

  TEST_CASE_TEMPLATE("iterator-pair and initializer_list constructors", V, CONFORMANCE_TYPES(int),
                     CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    const std::list<T> src{make<T>(1), make<T>(2), make<T>(3)};
    V a(src.begin(), src.end());
    CHECK(values(a) == std::vector<int>{1, 2, 3});
    V b{make<T>(4), make<T>(5)};
    CHECK(values(b) == std::vector<int>{4, 5});
    V c(src.begin(), src.begin());
    CHECK(c.empty());
  }

  TEST_CASE_TEMPLATE("copy construction and copy assignment give equal, independent copies", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1), make<T>(2), make<T>(3)};
    V b = a;
    CHECK(b == a);
    b[0] = make<T>(9);
    CHECK(values(a) == std::vector<int>{1, 2, 3});
    V c{make<T>(8)};
    c = a;
    CHECK(c == a);
    V& self = c;
    c = self;
    CHECK(c == a);
    c = V();
    CHECK(c.empty());
  }

  TEST_CASE_TEMPLATE("move construction and move assignment transfer the elements", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1), make<T>(2)};
    const T* p = a.data();
    V b = std::move(a);
    CHECK(values(b) == std::vector<int>{1, 2});
    CHECK(b.data() == p);  // [container.reqmts]: no element moves
    V c{make<T>(5)};
    c = std::move(b);
    CHECK(values(c) == std::vector<int>{1, 2});
    a = V{make<T>(3)};  // a moved-from object can be assigned and used
    a.push_back(make<T>(4));
    CHECK(values(a) == std::vector<int>{3, 4});
  }

  TEST_CASE_TEMPLATE("assign(n, v), assign(first, last), assign(il), operator=(il)", V,
                     CONFORMANCE_TYPES(int), CONFORMANCE_TYPES(std::string)) {
    using T = typename V::value_type;
    V a{make<T>(1), make<T>(2), make<T>(3)};
    a.assign(2, make<T>(6));
    CHECK(values(a) == std::vector<int>{6, 6});
    const std::list<T> src{make<T>(7), make<T>(8), make<T>(9), make<T>(10)};
    a.assign(src.begin(), src.end());
    CHECK(values(a) == std::vector<int>{7, 8, 9, 10});
    a.assign({make<T>(1)});
    CHECK(values(a) == std::vector<int>{1});
    a = {make<T>(2), make<T>(3)};
    CHECK(values(a) == std::vector<int>{2, 3});
    a.assign(0, make<T>(1));
    CHECK(a.empty());
  }

  TEST_CASE_TEMPLATE("swap exchanges contents; member and free", V, CONFORMANCE_TYPES(int)) {
    V a{1, 2};
    V b{3};
    const int* pa = a.data();
    a.swap(b);
    CHECK(values(a) == std::vector<int>{3});
    CHECK(b.data() == pa);  // [container.reqmts]: swap moves no element
    using std::swap;
    swap(a, b);
    CHECK(values(a) == std::vector<int>{1, 2});
  }
}
