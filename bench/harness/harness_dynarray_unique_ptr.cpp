// The harness's DynArray of std::unique_ptr<int>: default options, push_back from empty.
#include <memory>

#include <reservoir/reservoir.hpp>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run_typed<std::unique_ptr<int>>(
      argc, argv, [] { return reservoir::DynArray<std::unique_ptr<int>>(); });
}
