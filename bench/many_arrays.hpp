// The many-arrays workload: `arrays` arrays of ints alive at once, each built to `per_array`
// elements by push_back, then all destroyed. Build and destruction are timed apart: the 1e3 rows
// of the throughput table create and destroy one array at a time (the reservation cache's best
// case); here every array needs its own reservation or allocation at once, and giving them back
// is timed too.
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
  std::uint64_t checksum = 0;  // the sum of every element, so no build is optimised away
};

template <class Array, class Make>
ManyArraysTimes many_arrays_run(std::uint64_t arrays, std::uint64_t per_array, Make make) {
  using Clock = std::chrono::steady_clock;
  ManyArraysTimes t;
  std::vector<Array> all;
  all.reserve(arrays);  // the outer list never reallocates: only the inner arrays are timed
  const auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < arrays; ++i) {
    Array& a = all.emplace_back(make());
    for (std::uint64_t j = 0; j < per_array; ++j)
      a.push_back(static_cast<int>(j));
  }
  const auto t1 = Clock::now();
  for (const Array& a : all)
    t.checksum += static_cast<std::uint64_t>(a.back()) + a.size();
  const auto t2 = Clock::now();
  all.clear();  // every inner array destroyed
  const auto t3 = Clock::now();
  t.build_seconds = std::chrono::duration<double>(t1 - t0).count();
  t.destroy_seconds = std::chrono::duration<double>(t3 - t2).count();
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
