// Threads: arrays created, filled and destroyed on many threads at once go through the shared
// reservation cache and the per-thread slots. Run under ThreadSanitizer by the tsan preset.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

using reservoir::DynArray;

TEST_SUITE("threads") {
  TEST_CASE("concurrent create-fill-destroy through the reservation cache") {
    constexpr int kThreads = 4, kRounds = 300;
    std::atomic<long long> total{0};
    std::vector<DynArray<int>> handed_over(kThreads);  // destroyed on another thread than made
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, &total, &handed_over] {
        long long sum = 0;
        for (int r = 0; r < kRounds; ++r) {
          DynArray<int> a(reservoir::max_elements(1 << 16));
          for (int i = 0; i < 5000; ++i)
            a.push_back(i + t);
          for (int v : a)
            sum += v;
          if (r == kRounds / 2) handed_over[t] = std::move(a);
        }
        total += sum;
      });
    }
    for (auto& th : threads)
      th.join();
    long long expect = 0;
    for (int t = 0; t < kThreads; ++t)
      expect += kRounds * (5000LL * 4999 / 2 + 5000LL * t);
    CHECK(total == expect);
    for (int t = 0; t < kThreads; ++t)
      CHECK(handed_over[t][4999] == 4999 + t);
    handed_over.clear();  // parked from this thread
    CHECK(reservoir::reservation_cache_size() <= 17);
  }
}
