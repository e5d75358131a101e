// [vector.overview], [container.reqmts]: == and synth-three-way <=>.
#include "conformance.hpp"

namespace {
// Only < and ==: the relational operators fall back to < (synth-three-way).
struct LessOnly {
  int v = 0;
  LessOnly(int x) : v(x) {}  // NOLINT: implicit, for brace lists
  friend bool operator<(const LessOnly& a, const LessOnly& b) { return a.v < b.v; }
  friend bool operator==(const LessOnly& a, const LessOnly& b) { return a.v == b.v; }
};
}  // namespace

TEST_SUITE("conformance_comparisons") {
  TEST_CASE_TEMPLATE("== compares sizes and elements; <=> is lexicographic", V,
                     CONFORMANCE_TYPES(int)) {
    V a{1, 2, 3};
    V b{1, 2, 3};
    V c{1, 2};
    V d{1, 3};
    CHECK(a == b);
    CHECK(a != c);
    CHECK(c < a);
    CHECK(a < d);
    CHECK(d > a);
    CHECK(a <= b);
    CHECK(a >= b);
    if constexpr (std::three_way_comparable<V>) {  // libc++ before 17: vector has no <=>
      CHECK((a <=> b) == std::strong_ordering::equal);
      CHECK((V{} <=> V{}) == 0);
    }
    CHECK(V{} < c);
  }

  TEST_CASE_TEMPLATE("a T with only < and == orders through synth-three-way", V,
                     CONFORMANCE_TYPES(LessOnly)) {
    V a{1, 2};
    V b{1, 3};
    CHECK(a < b);
    CHECK_FALSE(b < a);
    CHECK(a == V{1, 2});
    if constexpr (std::three_way_comparable<V>) {
      CHECK((a <=> b) == std::weak_ordering::less);
    }
  }
}
