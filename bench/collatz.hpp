// The Collatz orbit-length workload of Rojc & Depolli, reservoir-bench's collatz table: the orbit
// length of every n in 1..N, memoised in one growing array shared by all threads. Element i holds
// the orbit length of i+1; a thread computing n follows the orbit until it drops into the known
// prefix and adds the memoised length.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <reservoir/concurrent_dynarray.hpp>

#include "baselines.hpp"  // <windows.h> on Windows, for the SRWLOCK below

namespace collatz {

#if defined(__MINGW32__)
// MinGW's std::shared_mutex is winpthreads' pthread_rwlock, which can deadlock under contention
// (docs/platforms.md). MSVC's std::shared_mutex is a Windows SRWLOCK; this is the same, so the
// Windows baseline is what MSVC users get.
class SharedMutex {
 public:
  void lock() noexcept { ::AcquireSRWLockExclusive(&lock_); }
  bool try_lock() noexcept { return ::TryAcquireSRWLockExclusive(&lock_) != 0; }
  void unlock() noexcept { ::ReleaseSRWLockExclusive(&lock_); }
  void lock_shared() noexcept { ::AcquireSRWLockShared(&lock_); }
  bool try_lock_shared() noexcept { return ::TryAcquireSRWLockShared(&lock_) != 0; }
  void unlock_shared() noexcept { ::ReleaseSRWLockShared(&lock_); }

 private:
  SRWLOCK lock_ = SRWLOCK_INIT;
};
#else
using SharedMutex = std::shared_mutex;
#endif

inline std::uint64_t step(std::uint64_t x) {
  return x % 2 ? 3 * x + 1 : x / 2;
}

// Orbit length of n (steps to reach 1), using lookup(j) = length of j+1 for numbers 1..known.
template <class Lookup>
std::uint32_t orbit_length(std::uint64_t n, std::uint64_t known, Lookup lookup) noexcept {
  std::uint32_t steps = 0;
  for (std::uint64_t x = n; x != 1; x = step(x), ++steps) {
    if (x < n && x <= known) return steps + lookup(x - 1);
  }
  return steps;
}

// Orbit length of n (steps to reach 1), using find(j): the length of j+1 if it is known (a pointer
// to it), else nullptr, for j < n-1 (the orbit goes on past a number that is not known yet).
template <class Find>
std::uint32_t orbit_length_found(std::uint64_t n, Find find) noexcept {
  std::uint32_t steps = 0;
  for (std::uint64_t x = n; x != 1; x = step(x), ++steps) {
    if (x < n) {
      if (const std::uint32_t* known = find(x - 1)) return steps + *known;
    }
  }
  return steps;
}

// The memo's lookup for a number whose prefix read was `known` (memo.size()): below it, the
// element itself; past it, whatever other threads have published already (try_get), so that a
// thread preempted in its append shortens nobody's memo.
inline auto memo_find(const reservoir::ConcurrentDynArray<std::uint32_t>& memo,
                      std::uint64_t known) noexcept {
  return [&memo, known](std::uint64_t j) noexcept {
    return j < known ? memo.data() + j : memo.try_get(j);
  };
}

// Orbit length of n followed to 1, with no memo: what every memo's element n-1 must hold.
inline std::uint32_t direct_length(std::uint64_t n) noexcept {
  return orbit_length(n, 0, [](std::uint64_t) { return 0u; });
}

// Throws std::logic_error unless the memo holds n lengths and every 97th of them (and the last) is
// direct_length's: a contender that appended out of order, or lost or repeated a block, fails its
// cell instead of reporting a time.
template <class Memo>
void check(const Memo& memo, std::uint64_t n) {
  if (memo.size() != n) throw std::logic_error("collatz: memo incomplete");
  const auto wrong = [&memo](std::uint64_t i) { return memo[i] != direct_length(i + 1); };
  for (std::uint64_t i = 0; i < n; i += 97) {
    if (wrong(i)) throw std::logic_error("collatz: a wrong length in the memo");
  }
  if (n > 0 && wrong(n - 1)) throw std::logic_error("collatz: a wrong length in the memo");
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs body(t) on `threads` threads at once (t = 0 .. threads - 1); returns the seconds from before
// the first starts to after the last ends.
template <class Body>
inline double timed_on_threads(unsigned threads, const Body& body) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&body, t] { body(t); });
  for (auto& th : pool)
    th.join();
  return seconds_since(t0);
}

// ConcurrentDynArray: each append computes the length of the number its index stands for; memo
// lookups read the published prefix, and past it any element already published (try_get), with no
// lock. Returns seconds.
inline double with_concurrent_dynarray(std::uint64_t n, unsigned threads,
                                       reservoir::ConcurrentDynArray<std::uint32_t>& memo) {
  return timed_on_threads(threads, [&memo, n, threads](unsigned t) {
    for (std::uint64_t k = t; k < n; k += threads) {
      memo.emplace_back_with([&memo](std::size_t i) noexcept {
        return orbit_length_found(i + 1, memo_find(memo, memo.size()));
      });
    }
  });
}

// The numbers of one block, for both contenders that take blocks. A block passes from thread to
// thread in index order (the Writer's) or holds the prefix back while its thread is preempted
// (append_with's), so where threads outnumber the cores each block costs about a context switch
// besides its work: a block must hold far more work than a switch costs for the threads to keep
// their throughput (docs/bench-concurrent.md, "Blocks long enough for more threads than cores").
inline constexpr std::uint64_t kBlock = 1024;

// A Writer per thread, as a user would write the memo with one: threads take blocks of kBlock
// consecutive numbers from a shared counter, compute their orbit lengths into their own writer
// (memo lookups read the published prefix with no lock) and flush the block once the array holds
// every number before it (element i is the length of i+1), waiting for that in wait_for_size
// (yielding, then asleep until a flush wakes it). The writer's buffer is reserved for a whole
// block, so it never flushes early. Returns seconds.
inline double with_concurrent_dynarray_writer(std::uint64_t n, unsigned threads,
                                              reservoir::ConcurrentDynArray<std::uint32_t>& memo) {
  std::atomic<std::uint64_t> next{1};
  return timed_on_threads(threads, [&memo, &next, n](unsigned /*t*/) {
    auto w = memo.writer();
    w.reserve(std::min<std::uint64_t>(kBlock, memo.max_size()));  // a smaller memo: its size
    for (;;) {
      const std::uint64_t first = next.fetch_add(kBlock, std::memory_order_relaxed);
      if (first > n) return;
      const std::uint64_t end = std::min(n + 1, first + kBlock);
      for (std::uint64_t x = first; x < end; ++x) {
        const std::uint64_t known = memo.size();
        w.push_back(orbit_length(x, known, [&memo](std::uint64_t j) { return memo[j]; }));
      }
      (void)memo.wait_for_size(first - 1);  // no later block flushes before this one
      w.flush();
    }
  });
}

// Blocks claimed first (append_with): threads take the count of a block of kBlock numbers
// from a shared counter, and append_with claims the block's indices and computes each length at
// its own index (element i is the length of i+1), then publishes the block without waiting for
// the blocks before it; memo lookups as with_concurrent_dynarray's. Returns seconds.
inline double with_concurrent_dynarray_blocks(std::uint64_t n, unsigned threads,
                                              reservoir::ConcurrentDynArray<std::uint32_t>& memo) {
  std::atomic<std::uint64_t> taken{0};
  return timed_on_threads(threads, [&memo, &taken, n](unsigned /*t*/) {
    for (;;) {
      const std::uint64_t first = taken.fetch_add(kBlock, std::memory_order_relaxed);
      if (first >= n) return;
      const std::uint64_t count = std::min(kBlock, n - first);
      (void)memo.append_with(count, [&memo](std::size_t i) noexcept {
        return orbit_length_found(i + 1, memo_find(memo, memo.size()));
      });
    }
  });
}

// std::vector + std::shared_mutex: lookups under a shared lock, appends in order under an
// exclusive one (a thread whose number is not next waits its turn). Returns seconds.
inline double with_vector_shared_mutex(std::uint64_t n, unsigned threads,
                                       std::vector<std::uint32_t>& vec) {
  SharedMutex mutex;
  std::uint64_t next = 1;
  return timed_on_threads(threads, [&](unsigned /*t*/) {
    for (;;) {
      std::uint64_t mine;
      {
        std::unique_lock lock(mutex);
        if (next > n) return;
        mine = next++;
      }
      std::uint32_t len;
      {
        std::shared_lock lock(mutex);
        len = orbit_length(mine, vec.size(), [&vec](std::uint64_t j) { return vec[j]; });
      }
      for (;;) {
        std::unique_lock lock(mutex);
        if (vec.size() == mine - 1) {
          vec.push_back(len);
          break;
        }
        lock.unlock();
        std::this_thread::yield();
      }
    }
  });
}

}  // namespace collatz
