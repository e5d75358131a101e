// The harness's DynArray with population left to the appends' first touches: ArenaOptions::prefault
// off (geometric steps, each a permission change), push_back from empty on the default
// reservation. Held beside harness_dynarray (the default: on Linux, every bounded step populated
// ahead) to compare the two population policies.
#include <reservoir/reservoir.hpp>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run(argc, argv, [](std::uint64_t n, auto& watch) -> std::uint64_t {
    reservoir::ArenaOptions options;
    options.prefault = false;
    reservoir::DynArray<int> a(
        reservoir::max_elements(reservoir::DynArray<int>::default_max_size()), options);
    for (std::uint64_t i = 0; i < n; ++i)
      a.push_back(static_cast<int>(i));
    watch.stop();
    return a.size() + static_cast<std::uint64_t>(a.back());
  });
}
