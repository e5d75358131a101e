// The mixed table of reservoir-bench: the workload of mixed.hpp for every container and element
// type, each cell in a fresh child process so that its peak resident memory is its own.
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
  bool progress = true;
};

struct Cell {
  std::string container, type;
  std::uint64_t iterations = 0;
  std::string status = "ok";
  Stats stats;
  std::uint64_t peak_bytes = 0;
};

// The child side: `--child-mixed CONTAINER TYPE ITERATIONS SEED` prints one line
// "ok key=value ..." and returns 0, or "error <what>" and returns 3.
int child_main(int argc, char** argv);

// Runs every cell. A cell whose final checksum differs from another container's for the same type
// and iteration count gets an error status; *consistent is false then.
std::vector<Cell> run_table(const TableOptions& options, bool* consistent);

void print_table(const std::vector<Cell>& cells);

// The cells as JSON objects ("table": "mixed"), separated by ",\n    ", no brackets.
std::string json_rows(const std::vector<Cell>& cells);

}  // namespace reservoir::bench::mixed
