// The harness's DynArray: default options, push_back from empty.
#include <reservoir/reservoir.hpp>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run_typed<int>(argc, argv, [] { return reservoir::DynArray<int>(); });
}
