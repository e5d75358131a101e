// One timed build of the throughput table (throughput_build.cpp says why it is a unit of its own).
#pragma once

#include <cstdint>

#include <reservoir/arena.hpp>

namespace reservoir::bench {

enum class Container;
enum class Type;
struct HugePageProbe;

// Builds one container c of n elements of t and returns the build's wall time in seconds, as
// build<T>() in workloads.hpp does; probe records the huge pages in use once built.
double throughput_build(Container c, Type t, std::uint64_t n, const ArenaOptions& options,
                        std::uint64_t reserve_bytes, HugePageProbe& probe);

}  // namespace reservoir::bench
