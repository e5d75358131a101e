// A plugin that links the static library: the host test (test_plugin_unload.cpp) loads it, calls
// reservoir_plugin_use() from several threads and unloads it, many times over. Each call takes
// every kind of reservation the library hands out: a default array (a large pool slot), a small
// one (a page pool slot), a tiny one (a sub-page slot), one of its own mapping that is parked when
// destroyed, and a concurrent array; each thread's cache and the shared lists keep what they give
// back, as in any program.
#include <reservoir/reservoir.hpp>

#include <cstddef>

#if defined(_WIN32)
#define RESERVOIR_PLUGIN_EXPORT extern "C" __declspec(dllexport)
#else
#define RESERVOIR_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#endif

namespace {
// A static array of the plugin's own: its translation unit is initialized before the library's, so
// it is destroyed after the library's teardown, at the unload, and its slot (a default array's, in
// a large chunk) must still go back to the OS with its chunk.
reservoir::DynArray<int> g_static_array = [] {
  reservoir::DynArray<int> a;
  for (int i = 0; i < 1000; ++i)
    a.push_back(i);
  return a;
}();
}  // namespace

// The sum of what the arrays held: the host checks it, so nothing is optimized away.
RESERVOIR_PLUGIN_EXPORT long long reservoir_plugin_use(int rounds) {
  long long sum = 0;
  for (int round = 0; round < rounds; ++round) {
    reservoir::DynArray<int> by_default;
    reservoir::DynArray<int> small(reservoir::max_elements(4096));
    reservoir::DynArray<char> tiny(reservoir::max_elements(200));
    reservoir::DynArray<long long> own_mapping(reservoir::max_elements(std::size_t{1} << 22));
    reservoir::ConcurrentDynArray<int> concurrent(reservoir::max_elements(1 << 16));
    for (int i = 0; i < 1000; ++i) {
      by_default.push_back(i);
      small.push_back(i);
      own_mapping.push_back(i);
      concurrent.push_back(i);
    }
    for (int i = 0; i < 100; ++i)
      tiny.push_back(static_cast<char>(i));
    for (int v : by_default)
      sum += v;
    sum += g_static_array[999] - 999;
    sum +=
        static_cast<long long>(small.size() + tiny.size() + own_mapping.size() + concurrent.size());
  }
  return sum;
}
