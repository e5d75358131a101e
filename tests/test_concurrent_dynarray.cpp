// Tests of <reservoir/concurrent_dynarray.hpp>: many appending threads, readers that never wait,
// nothing moves; failures under contention leave every published element intact.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include <reservoir/concurrent_dynarray.hpp>

#include "support.hpp"

using reservoir::ConcurrentDynArray;
namespace pal = reservoir::pal;

namespace {
constexpr int kWriters = 4;
constexpr std::uint64_t kPerWriter = 250'000;
// Never 0, so an unconstructed (zero) slot can be told from a real one.
std::uint64_t encode(std::uint64_t thread, std::uint64_t seq) {
  return ((thread + 1) << 32) | seq;
}
}  // namespace

TEST_SUITE("concurrent") {
  TEST_CASE("single-threaded basics and limits") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    CHECK(a.empty());
    CHECK(a.push_back(5) == 0);
    CHECK(a.emplace_back(6u) == 1);
    CHECK(a.size() == 2);
    CHECK(a.at(1) == 6);
    CHECK_THROWS_AS((void)a.at(2), std::out_of_range);
    while (a.size() < a.max_size())
      a.push_back(a.size());
    CHECK_THROWS_AS(a.push_back(1), std::length_error);
    CHECK_FALSE(a.try_emplace_back(1u).has_value());
    CHECK(a.size() == 100'000);
    CHECK(a.published().back() == 99'999);
    CHECK_THROWS_AS(ConcurrentDynArray<int>(reservoir::max_elements(0)), std::invalid_argument);
  }

  TEST_CASE(
      "4 writers x 250k appends while 2 readers scan: every value exactly once, no torn read") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * kPerWriter)};
    const std::uint64_t* const base = a.data();
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, scans{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&] {
        std::size_t last = 0;
        while (!done.load()) {
          const std::size_t n = a.size();
          if (n < last) bad_reads++;  // size() never decreases
          last = n;
          for (std::uint64_t v : a.published()) {
            if (v == 0 || (v >> 32) > kWriters || (v & 0xffffffff) >= kPerWriter) bad_reads++;
          }
          scans++;
        }
      });
    }
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&a, t] {
        for (std::uint64_t s = 0; s < kPerWriter; ++s)
          a.push_back(encode(t, s));
      });
    }
    for (auto& w : writers)
      w.join();
    done = true;
    for (auto& r : readers)
      r.join();
    CHECK(bad_reads == 0);
    CHECK(scans > 0);
    REQUIRE(a.size() == kWriters * kPerWriter);
    CHECK(a.data() == base);  // nothing moved
    // Every value exactly once, and each writer's values in its own order.
    std::vector<std::uint64_t> next(kWriters, 0);
    for (std::uint64_t v : a.published()) {
      const std::uint64_t t = (v >> 32) - 1, s = v & 0xffffffff;
      REQUIRE(t < kWriters);
      REQUIRE(s == next[t]);
      ++next[t];
    }
    for (auto n : next)
      CHECK(n == kPerWriter);
  }

  TEST_CASE(
      "refused commits under contention: errors to their threads, published elements intact") {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // many commits
    ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(kWriters * 20'000), o);
    std::atomic<std::uint64_t> added{0}, refused{0};
    {
      test::FaultGuard fault(pal::Op::commit, 10, 25);  // the 11th..35th commits fail
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          for (std::uint64_t s = 0; s < 20'000; ++s) {
            if (s % 2) {
              if (a.try_emplace_back(encode(t, s)))
                added++;
              else
                refused++;
            } else {
              try {
                a.push_back(encode(t, s));
                added++;
              } catch (const reservoir::OsAllocationError&) {
                refused++;
              }
            }
          }
        });
      }
      for (auto& w : writers)
        w.join();
    }
    CHECK(refused > 0);
    CHECK(a.size() == added);
    std::set<std::uint64_t> seen;
    for (std::uint64_t v : a.published()) {
      REQUIRE(v != 0);
      REQUIRE(seen.insert(v).second);  // no duplicates, no holes (a hole would read 0)
    }
    a.push_back(encode(0, 99'999));  // usable afterwards
    CHECK(a.size() == added + 1);
  }
}
