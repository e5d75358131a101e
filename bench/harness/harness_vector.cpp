// The harness's std::vector: push_back from empty.
#include <vector>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run_typed<int>(argc, argv, [] { return std::vector<int>(); });
}
