// The harness's floor: one mmap of the final size, populated by the kernel (MAP_POPULATE where
// it exists, else a touch of every page), filled by a store loop: the least any container of n
// ints can cost on fresh pages.
#include <sys/mman.h>
#include <unistd.h>

#include "harness.hpp"

int main(int argc, char** argv) {
  return harness::run(argc, argv, [](std::uint64_t n, auto& watch) -> std::uint64_t {
    const std::size_t bytes = n * sizeof(int);
#if defined(MAP_POPULATE)
    constexpr int kPopulate = MAP_POPULATE;
#else
    constexpr int kPopulate = 0;
#endif
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | kPopulate, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("mmap");
      std::exit(3);
    }
    auto* p = static_cast<int*>(m);
    if (kPopulate == 0) {
      const long page = ::sysconf(_SC_PAGESIZE);
      for (std::size_t off = 0; off < bytes; off += static_cast<std::size_t>(page))
        static_cast<volatile char*>(m)[off] = 0;
    }
    for (std::uint64_t i = 0; i < n; ++i)
      p[i] = static_cast<int>(i);
    watch.stop();
    return n + static_cast<std::uint64_t>(p[n - 1]);  // the mapping ends with the process
  });
}
