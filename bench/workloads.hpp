// The contenders and element types the bench compares, and the one loop that builds them.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <version>
#if defined(__cpp_lib_memory_resource)
#include <memory_resource>
#endif
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <reservoir/concurrent_dynarray.hpp>
#include <reservoir/detail/spin.hpp>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif
#if defined(RESERVOIR_BENCH_HAVE_TBB)
#include <tbb/concurrent_vector.h>
#endif
#include <reservoir/reservoir.hpp>

#include "baselines.hpp"
#include "clock.hpp"
#include "histogram.hpp"
#include "platform.hpp"

namespace reservoir::bench {

// pmr_arena / pmr_monotonic: std::pmr::vector<T> on reservoir::ArenaResource or on
// std::pmr::monotonic_buffer_resource (opt-in, not in the default tour). vector_populate:
// std::vector whose buffers are populated mappings; floor: one populated buffer of the final size
// filled by a loop; floor_huge: the same in 2 MiB transparent huge pages (all in baselines.hpp).
enum class Container {
  dynarray,
  vector,
  vector_reserve,
  deque,
  pmr_arena,
  pmr_monotonic,
  vector_populate,
  floor,
  floor_huge
};
enum class Type { int_, unique_ptr, string };

inline constexpr Container kAllContainers[] = {
    Container::dynarray,        Container::vector,    Container::vector_reserve,
    Container::deque,           Container::pmr_arena, Container::pmr_monotonic,
    Container::vector_populate, Container::floor,     Container::floor_huge};
inline constexpr Type kAllTypes[] = {Type::int_, Type::unique_ptr, Type::string};

// The names the options and the result files use, in the enums' order.
inline const char* name(Container c) {
  constexpr const char* kNames[] = {"dynarray",        "vector",    "vector_reserve",
                                    "deque",           "pmr_arena", "pmr_monotonic",
                                    "vector_populate", "floor",     "floor_huge"};
  const auto i = static_cast<std::size_t>(c);
  return i < std::size(kNames) ? kNames[i] : "?";
}
inline const char* name(Type t) {
  constexpr const char* kNames[] = {"int", "unique_ptr", "string"};
  const auto i = static_cast<std::size_t>(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}
template <class E, std::size_t N>
std::optional<E> parse_enum(std::string_view text, const E (&all)[N]) {
  for (E e : all) {
    if (text == name(e)) return e;
  }
  return std::nullopt;
}

inline std::size_t element_size(Type t) {
  switch (t) {
    case Type::int_:
      return sizeof(int);
    case Type::unique_ptr:
      return sizeof(std::unique_ptr<int>);
    case Type::string:
      return sizeof(std::string);
  }
  return 0;
}
// Heap bytes each element owns outside the container (a malloc chunk per unique_ptr<int>).
inline std::size_t owned_heap_per_element(Type t) {
  return t == Type::unique_ptr ? 32 : 0;
}

// Element values: int i; a fresh unique_ptr<int>; a 15-character string that fits the
// small-string buffer (so moving it copies bytes: not trivially relocatable).
template <class T>
inline T make_element(std::uint64_t i) {
  if constexpr (std::is_same_v<T, int>) {
    return static_cast<int>(i);
  } else if constexpr (std::is_same_v<T, std::unique_ptr<int>>) {
    return std::make_unique<int>(static_cast<int>(i));
  } else {
    return std::string(15, static_cast<char>('a' + i % 26));
  }
}

// Keeps the optimizer from deleting the work.
inline volatile std::uint64_t g_sink = 0;
template <class Cont>
void consume(const Cont& c) {
  // Reads the last element's first byte too, so the stores that built it cannot be elided.
  const auto last = c.empty() ? 0u : *reinterpret_cast<const unsigned char*>(&c.back());
  g_sink = g_sink + c.size() + last;
}

// No per-append timing (throughput, memory).
struct NoLatency {
  static constexpr bool kTimesEachAppend = false;
  void record(std::uint64_t) noexcept {}
};
// No per-append timing; the process's transparent huge pages once the container is built, read
// only while `enabled` (the reading costs tens of microseconds: a batch of builds of a tiny
// container reads it once, not once a build).
struct HugePageProbe : NoLatency {
  std::size_t anon_huge_bytes = 0;
  bool enabled = true;
  void built() noexcept {
    if (enabled) anon_huge_bytes = std::max(anon_huge_bytes, anon_huge_pages());
  }
};
// Times every append with the tick clock into a histogram of nanoseconds.
struct AppendLatency {
  static constexpr bool kTimesEachAppend = true;
  double ns_per_tick = 1.0;
  LogLinearHistogram histogram;
  void record(std::uint64_t ticks) noexcept {
    histogram.record(static_cast<std::uint64_t>(static_cast<double>(ticks) * ns_per_tick + 0.5));
  }
};

// Builds one container of n elements (construction included), records per-append latency if
// asked, and returns the build's wall time in seconds. Destruction happens after the clock stops.
template <class T, class Cont, class Make, class Rec>
double timed_build(std::uint64_t n, Make make_container, Rec& rec) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Cont cont = make_container();
  for (std::uint64_t i = 0; i < n; ++i) {
    if constexpr (Rec::kTimesEachAppend) {
      T value = make_element<T>(i);  // made outside the timed region: we time the append
      const std::uint64_t a = TickClock::now();
      cont.push_back(std::move(value));
      const std::uint64_t b = TickClock::now();
      rec.record(b - a);
    } else {
      cont.push_back(make_element<T>(i));
    }
  }
  const auto t1 = clock::now();
  consume(cont);
  if constexpr (requires { rec.built(); }) rec.built();  // while the container still lives
  return std::chrono::duration<double>(t1 - t0).count();
}

// reserve_bytes: the DynArray's reservation (0: the library's default, kDefaultReserveBytes).
template <class T, class Rec>
double build(Container c, std::uint64_t n, const ArenaOptions& options, std::uint64_t reserve_bytes,
             Rec& rec) {
  switch (c) {
    case Container::dynarray: {
      const std::size_t max_size = reserve_bytes
                                       ? static_cast<std::size_t>(reserve_bytes / sizeof(T))
                                       : DynArray<T>::default_max_size();
      return timed_build<T, DynArray<T>>(
          n, [&] { return DynArray<T>(reservoir::max_elements(max_size), options); }, rec);
    }
    case Container::vector:
      return timed_build<T, std::vector<T>>(n, [] { return std::vector<T>(); }, rec);
    case Container::vector_reserve:
      return timed_build<T, std::vector<T>>(
          n,
          [n] {
            std::vector<T> v;
            v.reserve(n);
            return v;
          },
          rec);
    case Container::deque:
      return timed_build<T, std::deque<T>>(n, [] { return std::deque<T>(); }, rec);
    case Container::vector_populate:
      return timed_build<T, std::vector<T, PopulatingAllocator<T>>>(
          n, [] { return std::vector<T, PopulatingAllocator<T>>(); }, rec);
    case Container::floor:
      return timed_build<T, FloorBuffer<T>>(
          n, [n] { return FloorBuffer<T>(static_cast<std::size_t>(n)); }, rec);
    case Container::floor_huge:
      return timed_build<T, FloorBuffer<T, true>>(
          n, [n] { return FloorBuffer<T, true>(static_cast<std::size_t>(n)); }, rec);
#if RESERVOIR_HAS_ARENA_RESOURCE
    case Container::pmr_arena: {
      ArenaResource resource(reserve_bytes ? reserve_bytes : kDefaultReserveBytes, options);
      return timed_build<T, std::pmr::vector<T>>(
          n, [&] { return std::pmr::vector<T>(&resource); }, rec);
    }
    case Container::pmr_monotonic: {
      std::pmr::monotonic_buffer_resource resource;
      return timed_build<T, std::pmr::vector<T>>(
          n, [&] { return std::pmr::vector<T>(&resource); }, rec);
    }
#else
    case Container::pmr_arena:
    case Container::pmr_monotonic:
      throw std::runtime_error("this standard library has no <memory_resource>");
#endif
  }
  throw std::logic_error("unknown container");
}

// ---- concurrent appends: `threads` threads append n ints in total -------------------------------

inline constexpr const char* kConcurrentContainers[] = {"concurrent_dynarray",
                                                        "concurrent_dynarray_writer",
                                                        "concurrent_dynarray_bulk",
                                                        "concurrent_dynarray_readers",
                                                        "vector_mutex",
                                                        "deque_mutex",
#if defined(RESERVOIR_BENCH_HAVE_TBB)
                                                        "tbb_concurrent_vector",
#endif
                                                        "claim_floor"};

// --pin: the concurrent tables pin thread t to CPU t (mod the CPU count), so thread placement
// does not vary between repetitions. Passed to the cells' child processes in the environment.
// Linux only; elsewhere a no-op.
inline constexpr const char* kPinVariable = "RESERVOIR_BENCH_PIN";
inline void request_pinning() {
#if defined(__linux__)
  ::setenv(kPinVariable, "1", 1);
#endif
}
inline void pin_this_thread([[maybe_unused]] unsigned t) {
#if defined(__linux__)
  static const bool pin = std::getenv(kPinVariable) != nullptr;
  if (!pin) return;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(t % cpus, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#endif
}

// Starts the threads together and times from the start to the last join; thread t runs
// work(begin, end) over its share [begin, end) of 0..n. The start gate is two atomics rather than
// std::latch: MinGW's libstdc++ 12 latch wait hung under Wine.
template <class Work>
double timed_concurrent_shares(std::uint64_t n, unsigned threads, Work work) {
  std::atomic<unsigned> arrived{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    const std::uint64_t begin = n * t / threads, end = n * (t + 1) / threads;
    pool.emplace_back([&arrived, &go, &work, begin, end, t] {
      pin_this_thread(t);
      arrived.fetch_add(1, std::memory_order_acq_rel);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      work(begin, end);
    });
  }
  while (arrived.load(std::memory_order_acquire) < threads)
    std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool)
    th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// As timed_concurrent_shares, each thread appending its share one element at a time.
template <class Append>
double timed_concurrent(std::uint64_t n, unsigned threads, Append append) {
  return timed_concurrent_shares(n, threads, [&append](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i)
      append(static_cast<int>(i));
  });
}

// The batch a bulk appender hands to append_range at once.
inline constexpr std::uint64_t kBulkBatch = 256;

// A standard container behind one std::mutex: the usual way to share it between appenders.
template <class Cont>
double locked_build(std::uint64_t n, unsigned threads) {
  Cont c;
  std::mutex m;
  return timed_concurrent(n, threads, [&](int x) {
    std::lock_guard lock(m);
    c.push_back(x);
  });
}

// The claim floor: the least an append that claims each element with one atomic
// read-modify-write can cost. A compare-and-swap on a shared counter with ConcurrentDynArray's
// backoff, then a store into one populated buffer: no publication, no commit, nothing for readers,
// all of which push_back does on top. (One fetch_add per element, without backoff, is slower on
// two threads or more: the counter's line moves at every append.)
inline double claim_floor_build(std::uint64_t n, unsigned threads) {
  const std::size_t bytes = std::max<std::size_t>(n * sizeof(int), sizeof(int));
  int* const data = static_cast<int*>(populated_map(bytes));
  struct alignas(64) Counter {
    std::atomic<std::uint64_t> next{0};
  } counter;
  const double s = timed_concurrent(n, threads, [&counter, data](int v) {
    std::uint64_t i = counter.next.load(std::memory_order_relaxed);
    unsigned spins = reservoir::detail::kFirstBackoff;
    while (!counter.next.compare_exchange_strong(i, i + 1, std::memory_order_relaxed)) {
      if (spins > reservoir::detail::kMaxSpin) {
        std::this_thread::yield();
      } else {
        for (unsigned k = 0; k < spins; ++k)
          reservoir::detail::cpu_pause();
        spins *= 2;
      }
      i = counter.next.load(std::memory_order_relaxed);
    }
    data[i] = v;
  });
  const bool all = counter.next.load() == n;
  populated_unmap(data, bytes);
  if (!all) throw std::logic_error("claim_floor lost elements");
  return s;
}

inline double concurrent_build(std::string_view container, std::uint64_t n, unsigned threads,
                               const ArenaOptions& options) {
  if (container == "claim_floor") return claim_floor_build(n, threads);
  if (container == "concurrent_dynarray") {
    ConcurrentDynArray<int> a(reservoir::max_elements(n), options);
    const double s = timed_concurrent(n, threads, [&a](int v) { a.push_back(v); });
    if (a.size() != n) throw std::logic_error("concurrent_dynarray lost elements");
    return s;
  }
  if (container == "concurrent_dynarray_writer") {  // a Writer per thread, flushed at its end
    ConcurrentDynArray<int> a(reservoir::max_elements(n), options);
    const double s =
        timed_concurrent_shares(n, threads, [&a](std::uint64_t begin, std::uint64_t end) {
          auto w = a.writer();
          for (std::uint64_t i = begin; i < end; ++i)
            w.push_back(static_cast<int>(i));
          w.flush();
        });
    if (a.size() != n) throw std::logic_error("concurrent_dynarray_writer lost elements");
    return s;
  }
  if (container == "concurrent_dynarray_bulk") {  // batches of kBulkBatch via append_range
    ConcurrentDynArray<int> a(reservoir::max_elements(n), options);
    const double s =
        timed_concurrent_shares(n, threads, [&a](std::uint64_t begin, std::uint64_t end) {
          int batch[kBulkBatch];
          while (begin < end) {
            const std::uint64_t k = std::min(kBulkBatch, end - begin);
            for (std::uint64_t j = 0; j < k; ++j)
              batch[j] = static_cast<int>(begin + j);
            a.append_range(std::span<const int>(batch, k));
            begin += k;
          }
        });
    if (a.size() != n) throw std::logic_error("concurrent_dynarray_bulk lost elements");
    return s;
  }
  if (container == "concurrent_dynarray_readers") {  // the writers' time, one reader scanning
    ConcurrentDynArray<int> a(reservoir::max_elements(n), options);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> scanned{0};
    std::thread reader([&] {
      std::uint64_t sum = 0, seen = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int v : a.published())
          sum += static_cast<unsigned>(v);
        seen += a.size();
      }
      scanned.store(seen + (sum & 1), std::memory_order_relaxed);  // keeps the scan alive
    });
    const double s = timed_concurrent(n, threads, [&a](int v) { a.push_back(v); });
    stop.store(true, std::memory_order_relaxed);
    reader.join();
    if (a.size() != n) throw std::logic_error("concurrent_dynarray_readers lost elements");
    return s;
  }
  if (container == "vector_mutex") return locked_build<std::vector<int>>(n, threads);
  if (container == "deque_mutex") return locked_build<std::deque<int>>(n, threads);
#if defined(RESERVOIR_BENCH_HAVE_TBB)
  if (container == "tbb_concurrent_vector") {
    tbb::concurrent_vector<int> v;
    const double s = timed_concurrent(n, threads, [&v](int x) { v.push_back(x); });
    if (v.size() != n) throw std::logic_error("tbb_concurrent_vector lost elements");
    return s;
  }
#endif
  throw std::invalid_argument("unknown concurrent container");
}

// Calls f.template operator()<T>() with the C++ type for t.
template <class F>
decltype(auto) with_type(Type t, F&& f) {
  switch (t) {
    case Type::int_:
      return f.template operator()<int>();
    case Type::unique_ptr:
      return f.template operator()<std::unique_ptr<int>>();
    case Type::string:
      return f.template operator()<std::string>();
  }
  throw std::logic_error("unknown type");
}

}  // namespace reservoir::bench
