// The library's kernel calls, as the bench counts them for its "calls" column: every mmap,
// munmap, mprotect and madvise the program makes through the C library's symbols, counted by
// wrapping those symbols at link time (bench/CMakeLists.txt). Other containers' calls happen
// inside the C library's allocator, which calls the kernel directly, so they are not seen; the
// bench reports the count for DynArray cells only. Where the linker cannot wrap (Windows, macOS),
// the count is unknown.
#pragma once

#include <cstdint>

namespace reservoir::bench {

// Calls counted since the process started, or -1 where they are not counted.
std::int64_t kernel_calls() noexcept;

}  // namespace reservoir::bench
