// The scratch-arena pattern: each request (or frame) takes temporary memory from one Arena and
// gives it all back with rewind(mark). After the first request has committed what it needs, the
// rest make no system call at all: the committed pages are reused.
//   scratch_arena [REQUESTS]    (default 10000)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <reservoir/reservoir.hpp>

namespace pal = reservoir::pal;

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
  const long requests = argc > 1 ? std::atol(argv[1]) : 10'000;
  reservoir::Arena scratch(256u << 20);  // 256 MiB of address space; nothing committed yet
  const std::size_t base_mark = scratch.mark();

  std::size_t checksum = 0;
  const std::uint64_t commits_before = pal::testing::calls(pal::Op::commit);
  std::uint64_t commits_after_warmup = 0;
  std::size_t peak_committed = 0;
  for (long r = 0; r < requests; ++r) {
    if (r == 1) commits_after_warmup = pal::testing::calls(pal::Op::commit);
    checksum += handle_request(scratch, static_cast<unsigned>(r));
    peak_committed = std::max(peak_committed, scratch.committed());
    scratch.rewind(base_mark);  // everything from this request is gone; pages stay committed
  }
  // Later requests may need a little more than the first; count how many commits they made.
  const std::uint64_t later_commits = pal::testing::calls(pal::Op::commit) - commits_after_warmup;
  std::printf("%ld requests, checksum %zu\n", requests, checksum);
  std::printf("committed at most %s; %llu commit calls after the first request\n",
              reservoir::format_bytes(peak_committed).c_str(),
              static_cast<unsigned long long>(later_commits));
  // Each commit call adds at least one granule and no granule is ever committed twice: rewinding
  // reused the memory instead of returning and re-acquiring it.
  const std::uint64_t commits = pal::testing::calls(pal::Op::commit) - commits_before;
  return commits <= peak_committed / scratch.commit_granule() ? 0 : 1;
}
