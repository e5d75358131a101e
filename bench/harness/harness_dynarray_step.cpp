// The harness's DynArray with population ahead in bounded steps of a chosen size: prefault on and
// max_commit_step = $RESERVOIR_HARNESS_STEP_KIB KiB (default 2048: the bounded policy's own cap),
// push_back from empty on the default reservation. For choosing the step of a population policy.
#include <cstdlib>

#include <reservoir/reservoir.hpp>

#include "harness.hpp"

int main(int argc, char** argv) {
  const char* kib = std::getenv("RESERVOIR_HARNESS_STEP_KIB");
  const std::size_t step = (kib ? std::strtoull(kib, nullptr, 10) : 2048) * 1024;
  return harness::run(argc, argv, [step](std::uint64_t n, auto& watch) -> std::uint64_t {
    reservoir::ArenaOptions options;
    options.prefault = true;
    options.max_commit_step = step;
    reservoir::DynArray<int> a(
        reservoir::max_elements(reservoir::DynArray<int>::default_max_size()), options);
    for (std::uint64_t i = 0; i < n; ++i)
      a.push_back(static_cast<int>(i));
    watch.stop();
    return a.size() + static_cast<std::uint64_t>(a.back());
  });
}
