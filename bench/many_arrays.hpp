// The many-arrays workload: `arrays` arrays of ints alive at once, each built to `per_array`
// elements by push_back, then all destroyed. Build and destruction are timed apart: the 1e3 rows
// of the throughput table create and destroy one array at a time (the reservation cache's best
// case); here every array needs its own reservation or allocation at once, and giving them back
// is timed too. Then the same again in the same process: the second round ("rebuild") shows what
// each container recycles of the memory the first round gave back (malloc's free lists, the slot
// pools), where the first shows the cost of fresh memory. Last, churn: one array at a time
// created, filled and destroyed, on one thread (timed after a warm-up, the resident set read
// before and after: flat once warm) and then on two at once.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <reservoir/dynarray.hpp>
#include <reservoir/pal.hpp>

#if !defined(_WIN32)
#include <sys/mman.h>
#endif

namespace reservoir::bench {

struct ManyArraysTimes {
  double build_seconds = 0;
  double destroy_seconds = 0;
  double rebuild_seconds = 0;  // the second round, into memory the first gave back
  double redestroy_seconds = 0;
  std::uint64_t checksum = 0;  // the sum of every element, so no build is optimised away
  double churn_ns = 0;         // create, fill and destroy one array: ns per array, one thread
  double churn2_ns = 0;        // the same on two threads at once: ns per array of each thread
  std::int64_t churn_rss_growth = 0;  // bytes the resident set grew over the timed churn
};

// One array at a time, `iterations` times: made, filled with per_array ints, destroyed. The sum
// of each array's last element is checked against what it must be (logic_error if not), so no
// array is optimised away.
template <class Array, class Make>
void churn(std::uint64_t iterations, std::uint64_t per_array, const Make& make) {
  std::uint64_t sum = 0;
  for (std::uint64_t k = 0; k < iterations; ++k) {
    Array a = make();
    for (std::uint64_t j = 0; j < per_array; ++j)
      a.push_back(static_cast<int>(j));
    sum += static_cast<std::uint64_t>(a.back());
  }
  if (sum != iterations * (per_array - 1)) throw std::logic_error("many: churn lost elements");
}

// two_threads: also churn on two threads at once (churn2_ns; 0 if not).
template <class Array, class Make>
ManyArraysTimes many_arrays_run(std::uint64_t arrays, std::uint64_t per_array, Make make,
                                bool two_threads = true) {
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
  // Churn: twice as many arrays as the rounds held (at least 1,000), one at a time. One thread
  // warms up on half of them, then is timed on all of them (the resident set read around it);
  // then two threads at once, each as many.
  const std::uint64_t iterations = std::max<std::uint64_t>(2 * arrays, 1'000);
  churn<Array>(iterations / 2, per_array, make);
  const auto rss0 = static_cast<std::int64_t>(reservoir::pal::current_rss());
  auto c0 = Clock::now();
  churn<Array>(iterations, per_array, make);
  auto c1 = Clock::now();
  t.churn_rss_growth = static_cast<std::int64_t>(reservoir::pal::current_rss()) - rss0;
  t.churn_ns =
      std::chrono::duration<double, std::nano>(c1 - c0).count() / static_cast<double>(iterations);
  if (!two_threads) return t;
  std::exception_ptr failed[2];
  c0 = Clock::now();
  {
    std::thread other([&] {
      try {
        churn<Array>(iterations, per_array, make);
      } catch (...) {
        failed[1] = std::current_exception();
      }
    });
    try {
      churn<Array>(iterations, per_array, make);
    } catch (...) {
      failed[0] = std::current_exception();
    }
    other.join();
  }
  c1 = Clock::now();
  for (const std::exception_ptr& e : failed) {
    if (e) std::rethrow_exception(e);
  }
  t.churn2_ns =
      std::chrono::duration<double, std::nano>(c1 - c0).count() / static_cast<double>(iterations);
  return t;
}

// page_floor: the least a default array can cost with any design that gives each array a range
// of its own as large as a default array's and fresh memory. Every "array" starts a region of
// its own (a 1 GiB slot and its 2 MiB gap, as the pools' 1 GiB tier lays them out) in one
// read-write mapping made before the build (MAP_NORESERVE: no call, commit or charge per array),
// so building one costs its first page's fault and the page tables of a new region, nothing
// else; destroying one does nothing. The second round reuses the same regions (their pages are
// present: the floor of a recycled array). POSIX only.
class PageFloorRegions {
 public:
  static constexpr std::size_t kStride = (std::size_t{1} << 30) + (std::size_t{2} << 20);
  explicit PageFloorRegions(std::uint64_t regions)
      : regions_(regions), bytes_(static_cast<std::size_t>(regions) * kStride) {
#if defined(_WIN32)
    throw std::runtime_error("page_floor: POSIX only");
#else
#if defined(MAP_NORESERVE)
    constexpr int kNoReserve = MAP_NORESERVE;
#else
    constexpr int kNoReserve = 0;  // FreeBSD: never reserved
#endif
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | kNoReserve, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<std::byte*>(p);
#endif
  }
  PageFloorRegions(const PageFloorRegions&) = delete;
  PageFloorRegions& operator=(const PageFloorRegions&) = delete;
  ~PageFloorRegions() {
#if !defined(_WIN32)
    if (base_ != nullptr) ::munmap(base_, bytes_);
#endif
  }
  // The next region's first element, round robin (one thread only: the churn on two threads
  // is not run for the floor).
  int* take() noexcept { return reinterpret_cast<int*>(base_ + (next_++ % regions_) * kStride); }

 private:
  std::uint64_t regions_;
  std::size_t bytes_;
  std::byte* base_ = nullptr;
  std::uint64_t next_ = 0;
};

// One array of the page floor: appends are stores at its region's start.
class PageFloorArray {
 public:
  explicit PageFloorArray(int* data) noexcept : data_(data) {}
  void push_back(int v) noexcept { data_[size_++] = v; }
  int back() const noexcept { return data_[size_ - 1]; }
  std::size_t size() const noexcept { return size_; }

 private:
  int* data_;
  std::size_t size_ = 0;
};

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
  if (container == "page_floor") {
    if (per_array * sizeof(int) > PageFloorRegions::kStride)
      throw std::invalid_argument("page_floor: arrays larger than a region");
    PageFloorRegions regions(arrays);
    return many_arrays_run<PageFloorArray>(
        arrays, per_array, [&regions] { return PageFloorArray(regions.take()); }, false);
  }
  throw std::invalid_argument("many: unknown container " + std::string(container));
}

inline constexpr const char* kManyArraysContainers[] = {"dynarray", "vector", "vector_reserve",
                                                        "deque", "page_floor"};

}  // namespace reservoir::bench
