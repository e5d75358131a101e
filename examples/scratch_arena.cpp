// The scratch-arena pattern: each request (or frame) takes temporary memory from one Arena and
// gives it all back with rewind(mark). After the first request has committed what it needs, the
// rest make no system call at all: the committed pages are reused.
//   scratch_arena [REQUESTS]    (default 10000)
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <reservoir/reservoir.hpp>

#include "arguments.hpp"

// A request that needs a few temporary buffers of varying sizes.
static std::size_t handle_request(reservoir::Arena& scratch, unsigned seed) {
  std::size_t checksum = 0;
  for (int k = 0; k < 8; ++k) {
    const std::size_t n = 1000 + (seed * 2654435761u + static_cast<unsigned>(k) * 40503u) % 30000;
    auto* buf = static_cast<std::uint32_t*>(
        scratch.allocate(n * sizeof(std::uint32_t), alignof(std::uint32_t)));
    for (std::size_t i = 0; i < n; ++i)
      buf[i] = static_cast<std::uint32_t>(i ^ seed);
    checksum += buf[n / 2];
  }
  return checksum;
}

int main(int argc, char** argv) {
  const char* usage = "scratch_arena [REQUESTS]   (1..1000000000, default 10000)";
  example::check_argument_count(argc, 1, usage);
  const auto requests =
      static_cast<long>(example::number_argument(argc, argv, 1, 10'000, 1, 1'000'000'000, usage));
  reservoir::Arena scratch(256u << 20);  // 256 MiB of address space; nothing committed yet
  const std::size_t base_mark = scratch.mark();

  std::size_t checksum = 0;
  std::size_t committed_after_warmup = 0;
  long growing_requests = 0;  // later requests that had to commit more
  bool kept_committed = true;
  for (long r = 0; r < requests; ++r) {
    const std::size_t committed_before = scratch.committed();
    checksum += handle_request(scratch, static_cast<unsigned>(r));
    if (r > 0 && scratch.committed() > committed_before) ++growing_requests;
    scratch.rewind(base_mark);  // everything from this request is gone; pages stay committed
    if (scratch.committed() < committed_before) kept_committed = false;
    if (r == 0) committed_after_warmup = scratch.committed();
  }
  std::printf("%ld requests, checksum %zu\n", requests, checksum);
  std::printf(
      "committed %s after the first request, %s at the end; %ld later requests "
      "committed more\n",
      reservoir::format_bytes(committed_after_warmup).c_str(),
      reservoir::format_bytes(scratch.committed()).c_str(), growing_requests);
  // Rewinding reused the memory instead of returning and re-acquiring it: committed() never fell.
  return kept_committed ? 0 : 1;
}
