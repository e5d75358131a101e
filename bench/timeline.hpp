// The memory timeline: the resident set sampled while one array of ints grows to n elements.
// std::vector's peak jumps at each reallocation (old and new buffers both live while it copies);
// DynArray's follows the data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <reservoir/pal.hpp>
#include <reservoir/reservoir.hpp>

#include "platform.hpp"
#include "workloads.hpp"

namespace reservoir::bench {

inline constexpr const char* kTimelineContainers[] = {"dynarray", "vector", "vector_reserve"};
inline constexpr std::uint64_t kTimelineSamples = 200;

// Appends n ints to `cont`, sampling (elements, current RSS, peak RSS) about kTimelineSamples
// times; returns them as "e:rss:peak,e:rss:peak,...".
// One sample "rss:peak": the peak is read after the RSS (an argument list would leave the order to
// the compiler), so it is never below it even while the process grows in between.
inline std::string rss_and_peak() {
  const std::size_t rss = pal::current_rss();
  const std::size_t peak = peak_rss();
  return fmt::format("{}:{}", rss, peak < rss ? rss : peak);
}

template <class Cont>
std::string grow_timeline(Cont& cont, std::uint64_t n) {
  const std::uint64_t every = n / kTimelineSamples > 0 ? n / kTimelineSamples : 1;
  std::string out = "0:" + rss_and_peak();
  for (std::uint64_t i = 0; i < n; ++i) {
    cont.push_back(static_cast<int>(i));
    if ((i + 1) % every == 0 || i + 1 == n) {
      out += fmt::format(",{}:{}", i + 1, rss_and_peak());
    }
  }
  consume(cont);
  return out;
}

// The child's work for one timeline cell; throws std::invalid_argument for an unknown container.
inline std::string timeline_child(const std::string& container, std::uint64_t n,
                                  const ArenaOptions& options) {
  if (container == "dynarray") {
    DynArray<int> a(max_elements(n), options);
    return grow_timeline(a, n);
  }
  std::vector<int> v;
  if (container == "vector_reserve") {
    v.reserve(n);
  } else if (container != "vector") {
    throw std::invalid_argument("timeline: unknown container " + container);
  }
  return grow_timeline(v, n);
}

}  // namespace reservoir::bench
