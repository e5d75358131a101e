// The harness's std::vector: push_back from empty.
#include <vector>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run(argc, argv, [](std::uint64_t n, auto& watch) -> std::uint64_t {
    std::vector<int> v;
    for (std::uint64_t i = 0; i < n; ++i)
      v.push_back(static_cast<int>(i));
    watch.stop();
    return v.size() + static_cast<std::uint64_t>(v.back());
  });
}
