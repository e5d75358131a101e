// Tests of <reservoir/dynarray.hpp>, moves and copies: a move transfers the reservation, the
// moved-from array is a defined empty state, a copy reserves anew; arrays of arrays (trees).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <ranges>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

using reservoir::DynArray;
using test::Tracked;
namespace pal = reservoir::pal;

namespace {

// A tree node holding an array of itself: T is incomplete where DynArray<Node> is a member.
struct Node {
  int value = 0;
  DynArray<Node> kids;
};
static_assert(std::is_nothrow_move_constructible_v<Node>);

}  // namespace

TEST_SUITE("dynarray") {
  TEST_CASE("move transfers the reservation; the moved-from array is empty and reusable") {
    DynArray<int> a;
    for (int i = 0; i < 1000; ++i)
      a.push_back(i);
    const int* data = a.data();
    DynArray<int> b(std::move(a));
    CHECK(b.data() == data);
    CHECK(b.size() == 1000);
    CHECK(a.empty());
    CHECK(a.data() == nullptr);
    CHECK(a.capacity() == 0);
    a.push_back(5);  // reserves afresh
    CHECK(a[0] == 5);
    a = std::move(b);
    CHECK(a.data() == data);
    CHECK(a.size() == 1000);
    DynArray<int> c = a.clone();
    CHECK(c == a);
    CHECK(c.data() != a.data());
    // A default-reserved array clones into a default reservation (which may fall back to less
    // where address space is short, as under valgrind); an explicit one keeps its max_size.
    CHECK(c.max_size() <= DynArray<int>::default_max_size());
    CHECK(c.max_size() >= c.size());
    // The clone of an empty default-reserved array has no reservation yet: empty, as a fresh one.
    DynArray<int> emptied{1};
    emptied.pop_back();
    DynArray<int> empty_clone = emptied.clone();
    CHECK(empty_clone.data() == nullptr);
    CHECK(empty_clone.begin() == empty_clone.end());
    CHECK(empty_clone.max_size() == DynArray<int>::default_max_size());
    DynArray<int> sized(reservoir::max_elements(5000));
    sized.push_back(3);
    CHECK(sized.clone().max_size() == 5000);
    CHECK(sized.clone()[0] == 3);
    c.push_back(1);
    CHECK(c != a);
    CHECK((a < c));
    swap(a, c);
    CHECK(a.size() == 1001);
    CHECK(c.data() == data);
  }

  TEST_CASE("every member is defined on default-constructed, moved-from and swapped-out arrays") {
    // Each state is empty with no reservation (data() == nullptr); every member must behave as on
    // an empty std::vector (or throw where DynArray documents a throw), and the array must be
    // usable afterwards.
    enum class State { fresh, moved_from, move_assigned_from, moved_from_sized, swapped_out };
    for (State state : {State::fresh, State::moved_from, State::move_assigned_from,
                        State::moved_from_sized, State::swapped_out}) {
      CAPTURE(static_cast<int>(state));
      DynArray<std::string> keep;
      DynArray<std::string> a;
      switch (state) {
        case State::fresh:
          break;
        case State::moved_from: {
          DynArray<std::string> donor{"x", "y"};
          a = std::move(donor);
          keep = DynArray<std::string>(std::move(a));  // a: moved-from by construction
          break;
        }
        case State::move_assigned_from: {
          a = {"x"};
          keep = std::move(a);
          break;
        }
        case State::moved_from_sized: {
          DynArray<std::string> sized(reservoir::max_elements(100));
          sized.push_back("s");
          a = std::move(sized);
          keep = std::move(a);
          break;
        }
        case State::swapped_out: {
          DynArray<std::string> empty;
          a.push_back("z");
          swap(a, empty);
          keep = std::move(empty);
          break;
        }
      }
      const DynArray<std::string>& ca = a;
      CHECK(a.empty());
      CHECK(a.size() == 0);
      CHECK(a.capacity() == 0);
      CHECK(a.max_size() == DynArray<std::string>::default_max_size());
      CHECK(a.data() == nullptr);
      CHECK(ca.data() == nullptr);
      CHECK(a.arena().reserved() == 0);
      CHECK(a.begin() == a.end());
      CHECK(ca.cbegin() == ca.cend());
      CHECK(a.rbegin() == a.rend());
      CHECK(ca.crbegin() == ca.crend());
      CHECK_THROWS_AS((void)a.at(0), std::out_of_range);
      CHECK_THROWS_AS((void)ca.at(0), std::out_of_range);
      CHECK_THROWS_AS(a.pop_back(), std::out_of_range);
      CHECK_THROWS_AS(a.erase(a.begin()), std::out_of_range);
      CHECK(a.erase(a.begin(), a.end()) == a.end());
      CHECK(erase(a, "x") == 0);
      CHECK(erase_if(a, [](const std::string&) { return true; }) == 0);
      a.clear();
      a.shrink_to_fit();
      a.reserve(0);
      a.resize(0);
      a.assign({});
      a.assign(0, "v");
      a.assign_range(std::vector<std::string>{});
      a.append_range(std::vector<std::string>{});
      a.insert(a.begin(), std::initializer_list<std::string>{});
      a.insert(a.end(), std::size_t{0}, "v");
      CHECK(a.data() == nullptr);  // nothing above needed memory, so nothing was reserved
      CHECK(a == DynArray<std::string>());
      CHECK_FALSE(a < DynArray<std::string>());
      CHECK((a <=> DynArray<std::string>{"a"}) == std::strong_ordering::less);
      DynArray<std::string> copy(a);
      CHECK(copy.empty());
      DynArray<std::string> cloned = a.clone();
      CHECK(cloned.empty());
      copy = a;
      CHECK(copy.empty());
      DynArray<std::string>& self = a;
      a = self;             // self copy-assignment
      a = std::move(self);  // self move-assignment
      CHECK(a.empty());
      DynArray<std::string> other;
      a.swap(other);
      swap(a, other);
      CHECK_THROWS_AS(a.reserve(a.max_size() + 1), std::length_error);
      CHECK(a.data() == nullptr);

      // And usable: each way of adding an element reserves afresh.
      CHECK(a.try_push_back("t"));
      a.push_back("p");
      a.emplace_back(2, 'e');
      a.emplace(a.begin(), "first");
      a.insert(a.end(), "last");
      CHECK(a == DynArray<std::string>{"first", "t", "p", "ee", "last"});
      CHECK(a.data() != nullptr);
    }
  }

  TEST_CASE("move-assigning a child's array to its parent's (a tree) is well-defined") {
    struct Node {
      int value = 0;
      DynArray<std::unique_ptr<Node>> kids;
    };
    Node root;
    root.kids.push_back(std::make_unique<Node>());
    root.kids[0]->value = 1;
    for (int i = 0; i < 3; ++i) {
      root.kids[0]->kids.push_back(std::make_unique<Node>());
      root.kids[0]->kids.back()->value = 10 + i;
    }
    // root.kids[0] owns the source; assignment must steal it before destroying root.kids[0].
    root.kids = std::move(root.kids[0]->kids);
    REQUIRE(root.kids.size() == 3);
    for (int i = 0; i < 3; ++i)
      CHECK(root.kids[static_cast<std::size_t>(i)]->value == 10 + i);
  }

  TEST_CASE("a node may hold a DynArray of its own, incomplete, type") {
    Node root;
    root.kids.push_back(Node{1, {}});
    root.kids[0].kids.push_back(Node{2, {}});
    root.kids[0].kids.emplace_back().value = 3;
    Node moved = std::move(root);
    REQUIRE(moved.kids.size() == 1);
    CHECK(moved.kids[0].kids.size() == 2);
    CHECK(moved.kids[0].kids[1].value == 3);
    moved.kids = std::move(moved.kids[0].kids);  // the child's children replace the parent's
    CHECK(moved.kids.size() == 2);
    CHECK(moved.kids[0].value == 2);
  }

  TEST_CASE("copying makes a new reservation of the same max_size; copy assignment keeps its own") {
    DynArray<std::string> a(reservoir::max_elements(100));
    a.push_back("x");
    a.push_back("y");
    DynArray<std::string> b = a;
    CHECK(b == a);
    CHECK(b.max_size() == 100);
    CHECK(b.data() != a.data());
    DynArray<std::string> c(reservoir::max_elements(50));
    c.push_back("z");
    const std::string* base = c.data();
    c = a;
    CHECK(c == a);
    CHECK(c.data() == base);
    CHECK(c.max_size() == 50);
    DynArray<std::string>& self = c;
    c = self;  // self-assignment keeps the elements
    CHECK(c == a);
  }
}
