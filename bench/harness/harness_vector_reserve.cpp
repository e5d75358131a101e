// The harness's std::vector + exact reserve: reserve(n), then push_back.
#include <vector>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run(argc, argv, [](std::uint64_t n, auto& watch) -> std::uint64_t {
    std::vector<int> v;
    v.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i)
      v.push_back(static_cast<int>(i));
    watch.stop();
    return v.size() + static_cast<std::uint64_t>(v.back());
  });
}
