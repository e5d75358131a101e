// Every public header after <windows.h> without NOMINMAX, with the function-like min and max
// macros that the Windows SDK defines for C++ as well. A call written std::min(a, b) or
// std::numeric_limits<T>::max() in a header stops compiling under them; (std::min)(a, b) and
// (std::numeric_limits<T>::max)() keep working. Built (and run) in Windows builds only.
//
// The standard headers come first, as in a real program: libstdc++ itself does not survive the
// macros, and MinGW's windef.h defines them for C only, so they are defined here the way the SDK
// does. The test is that this file compiles; main() makes sure the templates are instantiated.

// The standard headers the public headers use.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstdio>
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

#include <windows.h>  // clang-format keeps it after the standard headers: this order is the test

#ifndef min
#define min(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) (((a) > (b)) ? (a) : (b))
#endif

#include <reservoir/arena.hpp>
#include <reservoir/arena_resource.hpp>
#include <reservoir/concurrent_dynarray.hpp>
#include <reservoir/dynarray.hpp>
#include <reservoir/max_size.hpp>
#include <reservoir/pal.hpp>
#include <reservoir/reservoir.hpp>
#include <reservoir/version.hpp>

namespace {

struct Point {
  int x;
  int y;
  auto operator<=>(const Point&) const = default;
};

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  // The macros are really there: this is what the headers had to survive.
  check(min(2, 3) == 2 && max(2, 3) == 3, "min/max macros defined");

  reservoir::Arena arena(1u << 20);
  void* p = arena.allocate(100, 64);
  check(p != nullptr && arena.contains(p, 100), "Arena::allocate");
  check(!arena.trim(), "Arena::trim");

  reservoir::DynArray<int> a(reservoir::max_elements(1u << 16));
  for (int i = 0; i < 1000; ++i)
    a.push_back(i);
  a.resize(2000, 7);
  a.insert(a.begin() + 1, 42);
  a.erase(a.begin() + 1);
  check(a.size() == 2000 && a[999] == 999 && a.back() == 7, "DynArray<int> grows");
  reservoir::DynArray<int> b = a.clone();
  check(a == b && !(a < b), "DynArray comparison");
  a.shrink_to_fit();

  reservoir::DynArray<Point> points{{1, 2}, {3, 4}};
  reservoir::DynArray<Point> others{{1, 2}, {3, 5}};
  check((points <=> others) < 0, "DynArray<Point> three-way comparison");

  reservoir::DynArray<std::string> strings(reservoir::max_bytes(1u << 20));
  strings.emplace_back("a string long enough to leave the small buffer behind");
  check(strings.size() == 1, "DynArray<std::string>");

  reservoir::ConcurrentDynArray<long long> c(reservoir::max_elements(1u << 16));
  for (long long i = 0; i < 5000; ++i)
    c.push_back(i);
  check(c.size() == 5000 && c[4999] == 4999, "ConcurrentDynArray");

#if RESERVOIR_HAS_ARENA_RESOURCE
  reservoir::ArenaResource res(1u << 20);
  std::pmr::vector<int> v(&res);
  v.assign(100, 1);
  check(res.arena().contains(v.data(), v.size() * sizeof(int)), "ArenaResource");
#endif

  check(reservoir::pal::page_size() >= 4096, "pal::page_size");
  check(!reservoir::format_bytes(12345).empty(), "format_bytes");
  if (failures == 0) std::printf("windows.h: all public headers compile and work\n");
  return failures == 0 ? 0 : 1;
}
