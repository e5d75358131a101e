// The harness's DynArray: default options, push_back from empty.
#include <reservoir/reservoir.hpp>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run(argc, argv, [](std::uint64_t n, auto& watch) -> std::uint64_t {
    reservoir::DynArray<int> a;
    for (std::uint64_t i = 0; i < n; ++i)
      a.push_back(static_cast<int>(i));
    watch.stop();
    return a.size() + static_cast<std::uint64_t>(a.back());
  });
}
