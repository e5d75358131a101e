// The many-arrays workload: `arrays` arrays of ints alive at once, each built to `per_array`
// elements by push_back, then all destroyed. Build and destruction are timed apart: the 1e3 rows
// of the throughput table create and destroy one array at a time (the reservation cache's best
// case); here every array needs its own reservation or allocation at once, and giving them back
// is timed too. Then the same again in the same process: the second round ("rebuild") shows what
// each container recycles of the memory the first round gave back (malloc's free lists, the slot
// pools), where the first shows the cost of fresh memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <reservoir/dynarray.hpp>

namespace reservoir::bench {

struct ManyArraysTimes {
  double build_seconds = 0;
  double destroy_seconds = 0;
  double rebuild_seconds = 0;  // the second round, into memory the first gave back
  double redestroy_seconds = 0;
  std::uint64_t checksum = 0;  // the sum of every element, so no build is optimised away
};

template <class Array, class Make>
ManyArraysTimes many_arrays_run(std::uint64_t arrays, std::uint64_t per_array, Make make) {
  using Clock = std::chrono::steady_clock;
  ManyArraysTimes t;
  std::vector<Array> all;
  all.reserve(arrays);  // the outer list never reallocates: only the inner arrays are timed
  for (int round = 0; round < 2; ++round) {
    const auto t0 = Clock::now();
    for (std::uint64_t i = 0; i < arrays; ++i) {
      Array& a = all.emplace_back(make());
      for (std::uint64_t j = 0; j < per_array; ++j)
        a.push_back(static_cast<int>(j));
    }
    const auto t1 = Clock::now();
    std::uint64_t sum = 0;
    for (const Array& a : all)
      sum += static_cast<std::uint64_t>(a.back()) + a.size();
    const auto t2 = Clock::now();
    all.clear();  // every inner array destroyed
    const auto t3 = Clock::now();
    const double build = std::chrono::duration<double>(t1 - t0).count();
    const double destroy = std::chrono::duration<double>(t3 - t2).count();
    if (round == 0) {
      t.checksum = sum;
      t.build_seconds = build;
      t.destroy_seconds = destroy;
    } else {
      if (sum != t.checksum) throw std::logic_error("many: the second round built other elements");
      t.rebuild_seconds = build;
      t.redestroy_seconds = destroy;
    }
  }
  return t;
}

// container: dynarray (default-constructed, as users write it; with reserve_bytes > 0, each
// reserves that much instead), vector, vector_reserve (reserve per_array first), deque.
inline ManyArraysTimes many_arrays(std::string_view container, std::uint64_t arrays,
                                   std::uint64_t per_array, std::uint64_t reserve_bytes = 0) {
  if (container == "dynarray") {
    return many_arrays_run<reservoir::DynArray<int>>(arrays, per_array, [reserve_bytes] {
      return reserve_bytes ? reservoir::DynArray<int>(reservoir::max_bytes(reserve_bytes))
                           : reservoir::DynArray<int>();
    });
  }
  if (container == "vector") {
    return many_arrays_run<std::vector<int>>(arrays, per_array, [] { return std::vector<int>(); });
  }
  if (container == "vector_reserve") {
    return many_arrays_run<std::vector<int>>(arrays, per_array, [per_array] {
      std::vector<int> v;
      v.reserve(per_array);
      return v;
    });
  }
  if (container == "deque") {
    return many_arrays_run<std::deque<int>>(arrays, per_array, [] { return std::deque<int>(); });
  }
  throw std::invalid_argument("many: unknown container " + std::string(container));
}

inline constexpr const char* kManyArraysContainers[] = {"dynarray", "vector", "vector_reserve",
                                                        "deque"};

}  // namespace reservoir::bench
