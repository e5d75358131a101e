// Threads: arrays created, filled and destroyed on many threads at once go through the shared
// reservation cache and the per-thread slots. Run under ThreadSanitizer by the tsan preset.
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

using reservoir::DynArray;

using test::under_wine;

TEST_SUITE("threads") {
  TEST_CASE("concurrent create-fill-destroy through the reservation cache") {
    constexpr int kThreads = 4;
    // Under valgrind, which runs one thread at a time, fewer rounds through the same paths.
    const int rounds = test::under_valgrind() ? 80 : 300;
    std::atomic<long long> total{0};
    std::vector<DynArray<int>> handed_over(kThreads);  // destroyed on another thread than made
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, rounds, &total, &handed_over] {
        long long sum = 0;
        for (int r = 0; r < rounds; ++r) {
          DynArray<int> a(reservoir::max_elements(1 << 16));
          for (int i = 0; i < 5000; ++i)
            a.push_back(i + t);
          for (int v : a)
            sum += v;
          if (r == rounds / 2) handed_over[t] = std::move(a);
        }
        total += sum;
      });
    }
    for (auto& th : threads)
      th.join();
    long long expect = 0;
    for (int t = 0; t < kThreads; ++t)
      expect += rounds * (5000LL * 4999 / 2 + 5000LL * t);
    CHECK(total == expect);
    for (int t = 0; t < kThreads; ++t)
      CHECK(handed_over[t][4999] == 4999 + t);
    handed_over.clear();  // parked from this thread
    CHECK(reservoir::reservation_cache_size() <= 17);
  }
}

// ---- thread exit
// ---------------------------------------------------------------------------------

// MinGW-w64 GCC runs the destructor of a thread_local object after winpthreads has freed the
// object's emutls storage (GCC bug 80816), whatever the object's type: a thread_local DynArray
// would be destroyed from freed memory there, which no library can make safe. There the thread-exit
// test uses a local array instead, destroyed (parked in the thread's slot) just before the thread
// ends, which still leaves the slot's retirement at thread exit to be tested.
#if defined(__MINGW32__) && !defined(__clang__)
#define RESERVOIR_TEST_THREAD_LOCAL_DESTRUCTORS 0
#else
#define RESERVOIR_TEST_THREAD_LOCAL_DESTRUCTORS 1
#endif

namespace {

// Arrays of this many ints (4 MiB) reserve a mapping of their own and park it in the reservation
// cache: past the slot pools' classes, and no default array's tier (those take pool slots).
constexpr std::size_t kCacheArray = std::size_t{1} << 20;

// Runs `count` threads, `batch` at a time, each running body().
template <class Body>
void run_threads(int count, int batch, Body body) {
  for (int done = 0; done < count; done += batch) {
    std::vector<std::thread> threads;
    for (int t = 0; t < batch && done + t < count; ++t)
      threads.emplace_back(body);
    for (std::thread& t : threads)
      t.join();
  }
}

}  // namespace

TEST_SUITE("threads") {
  TEST_CASE("10,000 threads with a thread_local DynArray each give back their address space") {
    // The thread's cache slot is made while the array reserves (in its constructor); whether
    // the array is destroyed before or after the slot is retired depends on the
    // OS. Either way it must not park where nobody takes it again (which would leak its whole
    // reservation per thread) but in the slot before it retires, in the shared list, or with the
    // OS. Parked reservations are address space the cache keeps on purpose (up to 16 x 64 GiB):
    // empty it before each reading, so what remains is what nobody owns.
    // Under Wine, starting and ending a thread takes about 10 ms (1,000 threads: 12 s), so 1,000
    // threads show the same there; under valgrind, which runs one thread at a time, about 60 ms
    // (10,000 threads: 10 minutes), so 500: a single reservation nobody owns any more still shows
    // in reserved_address_space(), which is checked exactly.
    const int count = under_wine() ? 1'000 : test::under_valgrind() ? 500 : 10'000;
    if (count != 10'000) MESSAGE("under Wine or valgrind: " << count << " threads");
    reservoir::clear_reservation_cache();
    const std::size_t before = test::proc_status_kib("VmSize") * 1024;
    const std::size_t reserved_before = reservoir::reserved_address_space();
    std::atomic<int> ok{0};
    std::mutex first_error_lock;
    std::string first_error;  // a failed append is reported, never an abort of the whole run
    run_threads(count, 16, [&] {
    // 4 MiB: past the slot pools' classes (default arrays take pool slots), so it parks in
    // the reservation cache.
#if RESERVOIR_TEST_THREAD_LOCAL_DESTRUCTORS
      thread_local DynArray<int> mine(reservoir::max_elements{kCacheArray});
#else
      DynArray<int> mine(reservoir::max_elements{kCacheArray});  // parks in the thread's slot,
                                                                 // retired by the thread's end
#endif
      try {
        mine.push_back(42);
        if (mine.size() == 1 && mine[0] == 42) ok.fetch_add(1);
      } catch (const std::exception& e) {
        const std::lock_guard<std::mutex> hold(first_error_lock);
        if (first_error.empty()) first_error = e.what();
      }
    });
    INFO("first failure: " << first_error);
    CHECK(ok.load() == count);
    CHECK(reservoir::reservation_cache_size() <= 16);
    reservoir::clear_reservation_cache();
    CHECK(reservoir::reserved_address_space() <= reserved_before);
    const std::size_t after = test::proc_status_kib("VmSize") * 1024;
    if (before == 0) {
      MESSAGE("no /proc/self/status here: VmSize not checked");
    } else {
      INFO("VmSize before " << before << ", after " << after);
      CHECK(after <= before + (std::size_t{1} << 30));
    }
  }

  TEST_CASE("set_reservation_cache_limit(0) releases the slots of every thread") {
    reservoir::set_reservation_cache_limit(16);
    std::atomic<int> stage{0};
    std::thread parker([&stage] {
      {
        DynArray<int> a(reservoir::max_elements{kCacheArray});
        a.push_back(1);
      }  // parked in this thread's slot
      stage.store(1);
      while (stage.load() != 2)
        std::this_thread::yield();
    });
    while (stage.load() != 1)
      std::this_thread::yield();
    CHECK(reservoir::reservation_cache_size() >= 1);
    reservoir::set_reservation_cache_limit(0);  // from another thread than the parker
    CHECK(reservoir::reservation_cache_size() == 0);
    stage.store(2);
    parker.join();
    CHECK(reservoir::reservation_cache_size() == 0);
    reservoir::set_reservation_cache_limit(16);
    {
      DynArray<int> b(reservoir::max_elements{kCacheArray});
      b.push_back(2);
    }
    CHECK(reservoir::reservation_cache_size() == 1);  // the cache works again
    reservoir::clear_reservation_cache();
    CHECK(reservoir::reservation_cache_size() == 0);
  }
}
