// [vector.modifiers], [vector.capacity], [res.on.exception.handling]: what a throwing element or
// a throwing iterator leaves behind. Where the standard gives only the basic guarantee the cases
// check that the container is valid and that nothing leaks.
#include <type_traits>
#include <vector>

#include "conformance.hpp"

using conformance::InputIt;
using conformance::Thrower;
using conformance::ThrowingIt;
using conformance::values;

namespace {
// Each test counts its own elements: live starts at 0 (what an earlier test's container may have
// kept, e.g. libc++'s, is not this test's business).
struct ResetThrower {
  ResetThrower() {
    Thrower::countdown = -1;
    Thrower::live = 0;
  }
  ~ResetThrower() { Thrower::countdown = -1; }
};
}  // namespace

TEST_SUITE("conformance_exception_safety") {
  TEST_CASE_TEMPLATE("push_back/emplace_back whose copy throws: no effects", V,
                     CONFORMANCE_TYPES(Thrower)) {
    ResetThrower reset;
    {
      V a{1, 2, 3};
      const Thrower t(4);
      for (int round = 0; round < 40; ++round) {  // across growth points too
        Thrower::countdown = 0;
        const auto size = a.size();
        CHECK_THROWS_AS(a.push_back(t), std::runtime_error);
        CHECK(a.size() == size);
        Thrower::countdown = -1;
        a.push_back(t);
      }
      CHECK(a.size() == 43);
      CHECK(a[2].v == 3);
    }
    CHECK(Thrower::live == 0);
  }

  TEST_CASE_TEMPLATE("resize(n, v) whose copy throws: no effects", V, CONFORMANCE_TYPES(Thrower)) {
    ResetThrower reset;
    {
      V a{1, 2};
      Thrower::countdown = 5;
      CHECK_THROWS_AS(a.resize(100, Thrower(7)), std::runtime_error);
      Thrower::countdown = -1;
      CHECK(values(a) == std::vector<int>{1, 2});
    }
    CHECK(Thrower::live == 0);
  }

  TEST_CASE_TEMPLATE("assign/insert from an iterator that throws: valid, nothing leaks", V,
                     CONFORMANCE_TYPES(Thrower)) {
    ResetThrower reset;
    {
      const int src[] = {1, 2, 3, 4, 5};
      V a{9, 9};
      CHECK_THROWS_AS(a.assign(ThrowingIt{src, src + 3}, ThrowingIt{src + 5, src + 3}),
                      std::runtime_error);
      CHECK(a.size() <= 5);
      CHECK_THROWS_AS(a.insert(a.begin(), ThrowingIt{src, src + 2}, ThrowingIt{src + 5, src + 2}),
                      std::runtime_error);
      a.push_back(1);  // still usable
      CHECK(a.back().v == 1);
    }
    CHECK(Thrower::live == 0);
  }

  TEST_CASE_TEMPLATE("construction from an iterator that throws: nothing leaks", V,
                     CONFORMANCE_TYPES(Thrower)) {
    ResetThrower reset;
    const int src[] = {1, 2, 3, 4, 5};
    CHECK_THROWS_AS(V(ThrowingIt{src, src + 4}, ThrowingIt{src + 5, src + 4}), std::runtime_error);
#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 15000
    if constexpr (std::is_same_v<V, std::vector<Thrower>>) {
      // libc++ 14's vector(first, last) does not destroy what it built when the iterator throws
      // (fixed in later libc++): the standard's requirement is checked on DynArray only here.
      MESSAGE("libc++ " << _LIBCPP_VERSION << ": std::vector leaks " << Thrower::live
                        << " elements here; not asserted");
      return;
    }
#endif
    CHECK(Thrower::live == 0);
  }

  TEST_CASE_TEMPLATE("insert in the middle whose copy throws: valid, nothing leaks", V,
                     CONFORMANCE_TYPES(Thrower)) {
    ResetThrower reset;
    {
      V a{1, 2, 3, 4};
      const Thrower t(0);
      Thrower::countdown = 0;
      CHECK_THROWS_AS(a.insert(a.begin() + 1, t), std::runtime_error);
      Thrower::countdown = -1;
      CHECK(a.size() >= 4);
      a.insert(a.begin() + 1, 3, t);
      CHECK(a[1].v == 0);
    }
    CHECK(Thrower::live == 0);
  }
}
