// The harness's std::vector of std::unique_ptr<int>: push_back from empty.
#include <memory>
#include <vector>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run_typed<std::unique_ptr<int>>(
      argc, argv, [] { return std::vector<std::unique_ptr<int>>(); });
}
