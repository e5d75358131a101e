// <windows.h> hygiene: every public header compiles and works after <windows.h> without NOMINMAX,
// with min and max defined as function-like macros the way the Windows SDK's windef.h defines
// them for C++ (MinGW-w64 defines them only for C, so this file recreates them). Built only for
// Windows targets.
#include <doctest/doctest.h>

// 1. The standard headers our headers use, first: the standard library's own headers do not
//    survive the macros either, and a real program includes them before <windows.h> too.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>
#include <version>
#if defined(__cpp_lib_memory_resource)
#include <memory_resource>
#endif

// 2. <windows.h> as users include it: no NOMINMAX, no WIN32_LEAN_AND_MEAN.
#include <windows.h>

// 3. What the Windows SDK defines in C++.
#ifndef min
#define min(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) (((a) > (b)) ? (a) : (b))
#endif

// 4. Every public header, after the macros.
#include <reservoir/arena.hpp>
#include <reservoir/arena_resource.hpp>
#include <reservoir/concurrent_dynarray.hpp>
#include <reservoir/dynarray.hpp>
#include <reservoir/max_size.hpp>
#include <reservoir/pal.hpp>
#include <reservoir/reservoir.hpp>
#include <reservoir/version.hpp>

static_assert(min(1, 2) == 1 && max(1, 2) == 2, "the SDK-style macros are in force");

TEST_SUITE("windows_h") {
  TEST_CASE("the public headers work after <windows.h> and its min/max macros") {
    reservoir::DynArray<int> a(reservoir::max_elements(1 << 20));
    for (int i = 0; i < 100'000; ++i)
      a.push_back(i);
    a.resize(50);
    a.shrink_to_fit();
    CHECK(a.size() == 50);
    CHECK(a.back() == 49);
    reservoir::DynArray<int> b{3, 1, 2};
    CHECK(a < b);  // synth-three-way: 0 < 3 decides
    reservoir::ConcurrentDynArray<int> c{reservoir::max_elements(1000)};
    c.push_back(7);
    CHECK(c.size() == 1);
    CHECK(c.append_with(3, [](std::size_t i) noexcept { return static_cast<int>(i); }) == 1);
    CHECK(c.wait_for_size(4) == 4);
    CHECK((c.try_get(3) != nullptr && *c.try_get(3) == 3));
    reservoir::Arena arena(1 << 20);
    CHECK(arena.allocate(10, 8) != nullptr);
    CHECK(reservoir::default_reservation_size(reservoir::kDefaultReserveBytes) > 0);
    CHECK(reservoir::pal::page_size() > 0);
  }
}
