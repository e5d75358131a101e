// [vector.erasure]: erase and erase_if, found by argument-dependent lookup.
#include "conformance.hpp"

using conformance::values;

TEST_SUITE("conformance_erasure") {
  TEST_CASE_TEMPLATE("erase(c, value) removes every equal element, returns the count", V,
                     CONFORMANCE_TYPES(int)) {
    V a{1, 2, 3, 2, 2, 4};
    CHECK(erase(a, 2) == 3);
    CHECK(values(a) == std::vector<int>{1, 3, 4});
    CHECK(erase(a, 9) == 0);
  }

  TEST_CASE_TEMPLATE("erase_if(c, pred) removes what pred selects, keeping order", V,
                     CONFORMANCE_TYPES(int)) {
    V a{1, 2, 3, 4, 5, 6};
    CHECK(erase_if(a, [](int x) { return x % 2 == 0; }) == 3);
    CHECK(values(a) == std::vector<int>{1, 3, 5});
    V empty;
    CHECK(erase_if(empty, [](int) { return true; }) == 0);
  }
}
