// The workload of Rojc & Depolli: the Collatz orbit length of every n in 1..N, memoised in one
// growing ConcurrentDynArray shared by all threads. Element i holds the orbit length of i+1: a
// thread appending it follows the orbit of i+1 until it meets a number whose length is published
// (try_get: in the published prefix or past it, read with no lock; readers never wait), and adds
// the length found there. (reservoir-bench's
// collatz table measures it against a std::vector behind a std::shared_mutex.)
//   collatz [N] [THREADS]     (default 2000000, 2)
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <reservoir/concurrent_dynarray.hpp>

#include "arguments.hpp"

namespace {

// Steps from n down to 1. Once the orbit falls below n onto a number whose length is memoised
// (memo(j): the length of j+1, or nullptr while it is not published), that length finishes the
// count.
template <class Memo>
std::uint32_t orbit_length(std::uint64_t n, Memo memo) {
  std::uint32_t steps = 0;
  std::uint64_t x = n;
  while (x != 1) {
    if (x < n) {
      if (const std::uint32_t* known = memo(x - 1)) return steps + *known;
    }
    x = x % 2 == 1 ? 3 * x + 1 : x / 2;
    ++steps;
  }
  return steps;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "collatz [N] [THREADS]   (N: 1..1000000000, default 2000000; THREADS: 1..256, "
      "default 2)";
  example::check_argument_count(argc, 2, usage);
  const std::uint64_t n =
      example::number_argument(argc, argv, 1, 2'000'000, 1, 1'000'000'000, usage);
  const auto threads =
      static_cast<unsigned>(example::number_argument(argc, argv, 2, 2, 1, 256, usage));

  reservoir::ConcurrentDynArray<std::uint32_t> lengths{reservoir::max_elements(n)};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&lengths, n, threads, t] {
      for (std::uint64_t k = t; k < n; k += threads) {
        // The slot decides the number: slot i holds the length of i+1, whoever appends it.
        lengths.emplace_back_with([&lengths](std::size_t i) noexcept {
          const auto memo = [&lengths](std::uint64_t j) { return lengths.try_get(j); };
          return orbit_length(i + 1, memo);
        });
      }
    });
  }
  for (std::thread& w : workers)
    w.join();
  const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;

  // Every length must match a plain computation without the memo.
  std::uint64_t longest = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t plain =
        orbit_length(i + 1, [](std::uint64_t) -> const std::uint32_t* { return nullptr; });
    if (lengths.size() != n || lengths[i] != plain) {
      std::fprintf(stderr, "collatz: mismatch at %llu\n", static_cast<unsigned long long>(i + 1));
      return 1;
    }
    if (lengths[i] > lengths[longest]) longest = i;
  }
  std::printf("collatz 1..%llu on %u threads: %.3f s; longest orbit: %llu (%u steps)\n",
              static_cast<unsigned long long>(n), threads, seconds.count(),
              static_cast<unsigned long long>(longest + 1), lengths[longest]);
  return 0;
}
