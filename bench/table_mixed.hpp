// The mixed table of reservoir-bench: the workload of mixed.hpp (arrays of arrays created,
// copied, grown and destroyed) for every container and element type. Its cells run through the
// tour's cell runner like every other table (tour.hpp): a fresh child per cell and repetition, the
// cell and run budgets, interleaved repetitions, unstable marks, JSON, CSV and Markdown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixed.hpp"

namespace reservoir::bench::mixed {

struct TableOptions {
  std::vector<std::uint64_t> iterations = {100};
  std::vector<std::string> containers = {"dynarray", "vector", "deque"};
  std::vector<std::string> types = {"int", "string", "array10", "heap", "all"};
  std::uint64_t seed = 42;
};

// The child side of one cell: runs the workload and returns the result line
// "ok total=... <action>=... n_<action>=... checksum=... elements=... arrays=... peak=...".
// Throws std::invalid_argument for an unknown container or type.
std::string run_child(const std::string& container, const std::string& type,
                      std::uint64_t iterations, std::uint64_t seed);

}  // namespace reservoir::bench::mixed
