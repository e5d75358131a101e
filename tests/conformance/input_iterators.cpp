// [sequence.reqmts], [vector.cons]: single-pass input iterators in every iterator-pair member.
#include <sstream>

#include "conformance.hpp"

using conformance::InputIt;
using conformance::values;

TEST_SUITE("conformance_input_iterators") {
  TEST_CASE_TEMPLATE("construct, assign and insert from single-pass input iterators", V,
                     CONFORMANCE_TYPES(int)) {
    const int src[] = {1, 2, 3, 4};
    V a(InputIt{src}, InputIt{src + 4});
    CHECK(values(a) == std::vector<int>{1, 2, 3, 4});
    a.assign(InputIt{src + 2}, InputIt{src + 4});
    CHECK(values(a) == std::vector<int>{3, 4});
    auto it = a.insert(a.begin() + 1, InputIt{src}, InputIt{src + 2});
    CHECK(it == a.begin() + 1);
    CHECK(values(a) == std::vector<int>{3, 1, 2, 4});
    a.insert(a.end(), InputIt{src}, InputIt{src});
    CHECK(a.size() == 4);
  }

  TEST_CASE_TEMPLATE("istream_iterator, the classic single-pass source", V,
                     CONFORMANCE_TYPES(int)) {
    std::istringstream in("5 6 7");
    V a{std::istream_iterator<int>(in), std::istream_iterator<int>()};
    CHECK(values(a) == std::vector<int>{5, 6, 7});
  }
}
