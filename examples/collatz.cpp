// The workload of Rojc & Depolli: the Collatz orbit length of every n in 1..N, memoised in one
// growing array shared by all threads (see collatz.hpp). ConcurrentDynArray needs no lock for the
// memo lookups (readers never wait); the baseline guards a std::vector with a std::shared_mutex.
//   collatz [N] [THREADS]     (default 2000000, 2)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "collatz.hpp"

int main(int argc, char** argv) {
  const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 2;

  reservoir::ConcurrentDynArray<std::uint32_t> memo{reservoir::max_elements(n)};
  const double ours = collatz::with_concurrent_dynarray(n, threads, memo);
  std::vector<std::uint32_t> vec;
  const double theirs = collatz::with_vector_shared_mutex(n, threads, vec);

  // Both tables must agree, and match a plain sequential computation.
  std::uint64_t longest = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t plain = collatz::orbit_length(i + 1, 0, [](std::uint64_t) { return 0u; });
    if (memo.size() != n || vec.size() != n || memo[i] != vec[i] || memo[i] != plain) {
      std::fprintf(stderr, "collatz: mismatch at %llu\n", static_cast<unsigned long long>(i + 1));
      return 1;
    }
    if (memo[i] > memo[longest]) longest = i;
  }
  std::printf(
      "collatz 1..%llu on %u threads: ConcurrentDynArray %.3f s, vector+shared_mutex %.3f s "
      "(%.2fx); longest orbit: %llu (%u steps)\n",
      static_cast<unsigned long long>(n), threads, ours, theirs, theirs / ours,
      static_cast<unsigned long long>(longest + 1), memo[longest]);
  return 0;
}
