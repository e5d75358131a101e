// The harness's std::vector of 15-character strings: push_back from empty.
#include <string>
#include <vector>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run_typed<std::string>(argc, argv, [] { return std::vector<std::string>(); });
}
