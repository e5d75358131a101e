// The throughput table's timed builds, in a translation unit of their own (never merged into the
// unity build), so that each contender's push_back loop is compiled as in a smaller program, as the
// fresh-process harness (bench/harness/) and a user's program compile it. Inside the bench's large
// unity unit, GCC did not inline std::vector::reserve into the vector + exact reserve cell: the
// vector's address escaped into that call, and every push_back then stored the end pointer back
// to the stack (11 instructions per element, against 9 for the harness built as C++17 and 8 as
// C++20). Here reserve is inlined and the vector lives in registers (10 per element: GCC's partial
// redundancy elimination keeps the reallocation path's size live across the loop, a choice that
// differs between programs too; docs/bench.md has the counts).
#include "throughput_build.hpp"

#include "workloads.hpp"

namespace reservoir::bench {

double throughput_build(Container c, Type t, std::uint64_t n, const ArenaOptions& options,
                        std::uint64_t reserve_bytes, HugePageProbe& probe) {
  return with_type(t, [&]<class T>() { return build<T>(c, n, options, reserve_bytes, probe); });
}

}  // namespace reservoir::bench
