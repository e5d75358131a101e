// The harness's DynArray of 15-character strings: default options, push_back from empty.
#include <string>

#include <reservoir/reservoir.hpp>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run_typed<std::string>(argc, argv,
                                         [] { return reservoir::DynArray<std::string>(); });
}
