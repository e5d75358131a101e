// The fair baselines: std::vector whose every buffer is populated when it is allocated (so page
// faults are paid in one system call, as DynArray's commits with prefault on pay them), and the
// floor, one populated buffer of the final size filled by a loop (the least any container can
// cost for fresh memory). Together they split a win into what the container does and what
// populate does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include <reservoir/pal.hpp>

#if defined(_WIN32)
#include <windows.h>  // NOMINMAX and WIN32_LEAN_AND_MEAN: reservoir_bench_platform's definitions
#else
#include <sys/mman.h>
#endif

namespace reservoir::bench {

// Below this, buffers come from the heap (populating a few pages costs nothing worth measuring).
inline constexpr std::size_t kPopulateThreshold = std::size_t{64} << 10;

// Returns `bytes` of zeroed, already faulted-in memory: MAP_POPULATE on Linux, a commit and a
// touch of every page on Windows, a fresh mapping touched page by page elsewhere.
inline void* populated_map(std::size_t bytes) {
  const std::size_t page = pal::page_size();
#if defined(_WIN32)
  void* p = VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  if (!p) throw std::bad_alloc();
  for (std::size_t off = 0; off < bytes; off += page)
    static_cast<volatile char*>(p)[off] = 0;
  return p;
#else
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_POPULATE)
  flags |= MAP_POPULATE;
#endif
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#if !defined(MAP_POPULATE)
  for (std::size_t off = 0; off < bytes; off += page)
    static_cast<volatile char*>(p)[off] = 0;
#else
  (void)page;
#endif
  return p;
#endif
}

// A 2 MiB-aligned mapping of `bytes` (rounded up to 2 MiB) advised for transparent huge pages and
// populated: the huge-page floor. *mapping and *mapping_bytes receive what to unmap. Linux only
// (THP honouring MADV_HUGEPAGE); nullptr elsewhere or when the OS refuses.
inline void* huge_populated_map(std::size_t bytes, void** mapping, std::size_t* mapping_bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  const std::size_t total = rounded + kHuge;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(m);
  auto* p = reinterpret_cast<char*>((start + kHuge - 1) / kHuge * kHuge);
  if (madvise(p, rounded, MADV_HUGEPAGE) != 0) {
    munmap(m, total);
    return nullptr;
  }
#if defined(MADV_POPULATE_WRITE)
  const bool populated = madvise(p, rounded, MADV_POPULATE_WRITE) == 0;
#else
  const bool populated = false;
#endif
  if (!populated) {
    for (std::size_t off = 0; off < rounded; off += 4096)
      static_cast<volatile char*>(static_cast<void*>(p))[off] = 0;
  }
  *mapping = m;
  *mapping_bytes = total;
  return p;
#else
  (void)bytes;
  (void)mapping;
  (void)mapping_bytes;
  return nullptr;
#endif
}

inline void populated_unmap(void* p, std::size_t bytes) noexcept {
#if defined(_WIN32)
  (void)bytes;
  VirtualFree(p, 0, MEM_RELEASE);
#else
  munmap(p, bytes);
#endif
}

// A std::allocator whose large buffers are populated mappings.
template <class T>
struct PopulatingAllocator {
  using value_type = T;
  PopulatingAllocator() = default;
  template <class U>
  PopulatingAllocator(const PopulatingAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kPopulateThreshold) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(populated_map(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kPopulateThreshold) {
      ::operator delete(p);
    } else {
      populated_unmap(p, bytes);
    }
  }
  template <class U>
  bool operator==(const PopulatingAllocator<U>&) const noexcept {
    return true;
  }
};

// The floor: capacity fixed at construction, one populated mapping, push_back is a placement new
// and an increment. Only what timed_build and consume use. Huge: the mapping is 2 MiB huge pages
// (huge_populated_map), std::bad_alloc where there are none.
template <class T, bool Huge = false>
class FloorBuffer {
 public:
  explicit FloorBuffer(std::size_t capacity)
      : bytes_(capacity * sizeof(T) > 0 ? capacity * sizeof(T) : sizeof(T)), data_(map()) {}
  FloorBuffer(FloorBuffer&& o) noexcept
      : bytes_(o.bytes_),
        mapping_(std::exchange(o.mapping_, nullptr)),
        mapping_bytes_(o.mapping_bytes_),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  FloorBuffer(const FloorBuffer&) = delete;
  FloorBuffer& operator=(const FloorBuffer&) = delete;
  FloorBuffer& operator=(FloorBuffer&&) = delete;
  ~FloorBuffer() {
    if (!data_) return;
    for (std::size_t i = 0; i < size_; ++i)
      data_[i].~T();
    if constexpr (Huge) {
      populated_unmap(mapping_, mapping_bytes_);
    } else {
      populated_unmap(data_, bytes_);
    }
  }
  void push_back(T&& v) { ::new (static_cast<void*>(data_ + size_++)) T(std::move(v)); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const T& back() const noexcept { return data_[size_ - 1]; }

 private:
  T* map() {
    if constexpr (Huge) {
      void* p = huge_populated_map(bytes_, &mapping_, &mapping_bytes_);
      if (!p) throw std::bad_alloc();
      return static_cast<T*>(p);
    } else {
      return static_cast<T*>(populated_map(bytes_));
    }
  }
  std::size_t bytes_;
  void* mapping_ = nullptr;  // Huge: the whole mapping, alignment slack included
  std::size_t mapping_bytes_ = 0;
  T* data_;
  std::size_t size_ = 0;
};

}  // namespace reservoir::bench
