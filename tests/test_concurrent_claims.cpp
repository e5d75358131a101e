// ConcurrentDynArray under contention: many appending threads and readers that never wait, the
// claims' fast and slow paths, commits (and the commit lock), refusals that close the claims,
// pacing.
#include "concurrent_support.hpp"

// 4 Writers released at once fill a fresh array of ints, 5 times; exit 0 if every array ends
// full, 3 (the watchdog) if a round hangs.
RESERVOIR_CHILD("concurrent.writers_meet_fresh") {
  const test::HangWatchdog watchdog("4 Writers at the commit lock", 120);
  constexpr std::uint64_t kEach = 25'000;
  for (int round = 0; round < 5; ++round) {
    ConcurrentDynArray<int> a{reservoir::max_elements(kWriters * kEach)};
    std::atomic<int> arrived{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&] {
        arrived.fetch_add(1);
        while (!go.load())
          std::this_thread::yield();
        auto w = a.writer();
        for (std::uint64_t s = 0; s < kEach; ++s)
          w.push_back(static_cast<int>(s));
      });
    }
    while (arrived.load() < kWriters)
      std::this_thread::yield();
    go.store(true);
    for (auto& w : writers)
      w.join();
    if (a.size() != kWriters * kEach) return 1;
  }
  return 0;
}

namespace {
// Holds the commit lock on purpose: the first commit the thread marked with t_hold_commit makes
// (inside pal's commit, testing::on_call) waits there, under the lock, until another thread has
// gone to sleep on that lock (pal counted a wait), or gives up after a minute.
thread_local bool t_hold_commit = false;
std::atomic<std::uint64_t> g_waits_at_hold{0};
std::atomic<bool> g_held{false};
std::atomic<bool> g_hold_gave_up{false};

void hold_commit_until_a_wait() {
  if (!t_hold_commit) return;
  t_hold_commit = false;  // once
  g_waits_at_hold = pal::testing::calls(pal::Op::wait);
  g_held = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (pal::testing::calls(pal::Op::wait) == g_waits_at_hold.load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      g_hold_gave_up = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Lets the construction held by the wait_for_size test go on: installed as the hook of pal's
// wait, so it runs once a waiter is about to sleep.
std::atomic<bool> g_wait_release{false};
std::atomic<bool> g_wait_gave_up{false};
void release_on_a_wait() {
  g_wait_release = true;
}
}  // namespace

TEST_SUITE("concurrent") {
  TEST_CASE("4 writers appending blocks of 1..64 with throwing copies while readers scan") {
    const std::uint64_t blocks = valgrind_scale(4000);
    ConcurrentDynArray<Picky> a{reservoir::max_elements(kWriters * blocks * 64)};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, added{0}, thrown{0};
    std::thread reader([&] {
      while (!done.load()) {
        for (const Picky& p : a.published())
          if (p.v == 0) bad_reads++;
      }
    });
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        std::uint64_t seq = 1;
        std::vector<Picky> block;
        for (std::uint64_t b = 0; b < blocks; ++b) {
          block.clear();
          const std::uint64_t n = 1 + (b * 37 + static_cast<std::uint64_t>(t)) % 64;
          for (std::uint64_t k = 0; k < n; ++k) {
            // Values that are multiples of 7 throw when copied: only in every 10th block.
            std::uint64_t v = encode(t, seq++);
            if (b % 10 != 0 && v % 7 == 0) v = encode(t, seq++);
            if (b % 10 != 0 && v % 7 == 0) v = encode(t, seq++);
            block.emplace_back(v);
          }
          try {
            a.append_range(block);  // copies
            added += n;
          } catch (const std::runtime_error&) {
            thrown++;
          }
        }
      });
    }
    for (auto& w : writers)
      w.join();
    done = true;
    reader.join();
    CHECK(bad_reads == 0);
    CHECK(thrown > 0);
    REQUIRE(a.size() == added);
    // Blocks are contiguous and each writer's values in its own order.
    std::vector<std::uint64_t> last(kWriters, 0);
    for (const Picky& p : a.published()) {
      const std::uint64_t t = (p.v >> 32) - 1, s = p.v & 0xffffffff;
      REQUIRE(t < kWriters);
      REQUIRE(s > last[t]);
      last[t] = s;
    }
  }

  TEST_CASE("once every writer has returned from its last append, a reader sees all of it") {
    // No publish point is needed: no thread holds claimed indices between calls, so after the last
    // append of every writer returns, size() is the total (without joining the writers).
    const std::uint64_t each = valgrind_scale(5000);
    for (int round = 0; round < 20; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each * 2)};
      std::atomic<int> finished{0};
      std::atomic<bool> release{false};
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          for (std::uint64_t s = 0; s < each; ++s) {
            if (s % 3 == 0) {
              const std::uint64_t pair[2] = {encode(t, s), encode(t, s) | (1ull << 31)};
              a.append_range(pair);
            } else {
              a.push_back(encode(t, s));
            }
          }
          finished.fetch_add(1, std::memory_order_release);
          while (!release.load())  // stay alive: the check below must not rely on join()
            std::this_thread::yield();
        });
      }
      while (finished.load(std::memory_order_acquire) < kWriters)
        std::this_thread::yield();
      const std::uint64_t expected = kWriters * (each + (each + 2) / 3);
      CHECK(a.size() == expected);
      std::uint64_t zeros = 0;
      for (std::uint64_t v : a.published())
        zeros += v == 0;
      CHECK(zeros == 0);
      release = true;
      for (auto& w : writers)
        w.join();
    }
  }

  TEST_CASE("4 writers race blocks to a reservation limit: the last blocks fit exactly, no hole") {
    // 4 threads append blocks of 1..16 until the array refuses: every refused block claims
    // nothing, so the array ends full or with fewer free indices than the smallest refused block.
    const std::size_t limit = valgrind_scale(50'000);
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(limit)};
    std::atomic<std::uint64_t> added{0};
    std::atomic<std::size_t> smallest_refused{limit};
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        std::uint64_t seq = 0;
        std::vector<std::uint64_t> block;
        for (std::uint64_t b = 0;; ++b) {
          const std::size_t n = 1 + (b * 5 + static_cast<std::uint64_t>(t)) % 16;
          block.clear();
          for (std::size_t k = 0; k < n; ++k)
            block.push_back(encode(t, seq++));
          try {
            a.append_range(block);
            added += n;
          } catch (const std::length_error&) {
            std::size_t cur = smallest_refused.load();
            while (n < cur && !smallest_refused.compare_exchange_weak(cur, n)) {
            }
            if (n == 1) return;  // full
            seq -= n;            // retry smaller blocks with the same values
          }
        }
      });
    }
    for (auto& w : writers)
      w.join();
    CHECK(a.size() == added);
    CHECK(a.size() == limit);  // threads stop only when a 1-element block is refused
    CHECK(smallest_refused == 1);
    require_no_hole_no_duplicate(a);
  }

  TEST_CASE("4 Writers and 2 readers: every value once, no torn read, each writer in order") {
    const std::uint64_t each = per_writer();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each)};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, scans{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&] {
        std::size_t last = 0;
        while (!done.load()) {
          const std::size_t n = a.size();
          if (n < last) bad_reads++;
          last = n;
          for (std::uint64_t v : a.published()) {
            if (v == 0 || (v >> 32) > kWriters || (v & 0xffffffff) >= each) bad_reads++;
          }
          scans++;
        }
      });
    }
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&a, t, each] {
        auto w = a.writer();
        for (std::uint64_t s = 0; s < each; ++s) {
          w.push_back(encode(t, s));
          if (s % (each / 25 + 7) == 0) w.flush();  // some short blocks too
        }
      });  // the writer's destructor publishes the rest
    }
    for (auto& w : writers)
      w.join();
    done = true;
    for (auto& r : readers)
      r.join();
    CHECK(bad_reads == 0);
    CHECK(scans > 0);
    REQUIRE(a.size() == kWriters * each);
    std::vector<std::uint64_t> next(kWriters, 0);
    for (std::uint64_t v : a.published()) {
      const std::uint64_t t = (v >> 32) - 1, s = v & 0xffffffff;
      REQUIRE(t < kWriters);
      REQUIRE(s == next[t]);
      ++next[t];
    }
  }

  TEST_CASE("Writers that meet at a fresh process's first commits: every waiter wakes") {
    // Each child starts 4 Writers at once on the process's first arrays (test::run_child starts
    // a fresh process), where a waiter's first sleep is slowest to begin. std::atomic::wait
    // under MinGW-w64's libstdc++ lost the holder's wake there now and then (a bench cell hung
    // in about 1 of 15 fresh processes under Wine); the child's watchdog turns a hang into exit 3.
    const int children = test::under_valgrind() ? 2 : 24;
    for (int c = 0; c < children; ++c) {
      CAPTURE(c);
      const test::ProcessResult r = test::run_child("concurrent.writers_meet_fresh");
      INFO(test::describe(r) << ": " << r.output);
      REQUIRE(r.exited);
      REQUIRE(r.exit_code == 0);
    }
  }

  TEST_CASE("the commit lock: no wait or wake alone; a waiter sleeps until the holder lets go") {
    // Both with the OS's wait and with every wait refused by the OS (then the waiter polls).
    const test::HangWatchdog watchdog("the commit lock's waiter", 600);
    for (const bool refuse_waits : {false, true}) {
      CAPTURE(refuse_waits);
      reservoir::ArenaOptions o;
      o.commit_granule = o.max_commit_step = pal::page_size();  // a commit every page
      ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(10'000'000), o);
      a.push_back(encode(9, 1));
      std::thread([&] { a.push_back(encode(9, 2)); }).join();  // shared mode from here
      // One appender alone: hundreds of commits under the lock, never a wait, so never a wake
      // (a release wakes only when a waiter marked the lock).
      const std::uint64_t waits = pal::testing::calls(pal::Op::wait);
      const std::uint64_t wakes = pal::testing::calls(pal::Op::wake);
      const std::uint64_t alone = test::under_valgrind() ? 20'000 : 100'000;
      for (std::uint64_t s = 1; s <= alone; ++s)
        a.push_back(encode(8, s));
      CHECK(pal::testing::calls(pal::Op::wait) == waits);
      CHECK(pal::testing::calls(pal::Op::wake) == wakes);

      // The holder's next commit stops under the lock until the other thread, out of capacity,
      // has gone to sleep on it; its release must then wake that thread.
      std::optional<test::FaultGuard> refused;
      if (refuse_waits)
        refused.emplace(pal::Op::wait, 0, 1'000'000'000,
                        std::make_error_code(std::errc::not_supported));
      g_held = false;
      g_hold_gave_up = false;
      pal::testing::on_call(pal::Op::commit, &hold_commit_until_a_wait);
      std::atomic<bool> holder_done{false};
      std::atomic<std::uint64_t> other_added{0};
      const std::uint64_t each = 50'000;
      std::thread holder([&] {
        t_hold_commit = true;
        for (std::uint64_t s = 1; s <= each; ++s)
          a.push_back(encode(0, s));
        holder_done = true;
      });
      std::thread other([&] {
        // Appends until the holder is done (and at least until it has held the lock), so it
        // runs out of capacity while the lock is held.
        std::uint64_t s = 0;
        while ((!holder_done.load() || !g_held.load()) && s < 5'000'000)
          a.push_back(encode(1, ++s));
        other_added = s;
      });
      holder.join();
      other.join();
      pal::testing::on_call(pal::Op::commit, nullptr);
      refused.reset();
      CHECK(g_held.load());
      CHECK_FALSE(g_hold_gave_up.load());  // the other thread went to sleep on the held lock
      CHECK(pal::testing::calls(pal::Op::wait) > g_waits_at_hold.load());
      CHECK(pal::testing::calls(pal::Op::wake) > wakes);  // and the release woke it
      REQUIRE(a.size() == 2 + alone + each + other_added.load());
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE(
      "once every Writer has flushed, a reader sees all of it; a stopped one hides only its own") {
    // At least 737: writer t of round r appends each - (r * 37 + t * 11).
    const std::uint64_t each = test::under_valgrind() ? 1000 : 5000;
    for (int round = 0; round < 20; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each * 2)};
      std::atomic<int> finished{0};
      std::atomic<bool> release{false};
      std::vector<std::thread> writers;
      // Writer 0 also appends a partly filled block and does not flush it: the others' elements
      // after it must still be published, and only its buffer is missing.
      std::atomic<std::uint64_t> hidden{0};
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          auto w = a.writer();
          const std::uint64_t n = each - static_cast<std::uint64_t>(round * 37 + t * 11);
          for (std::uint64_t s = 0; s < n; ++s) {
            if (s % 3 == 0)
              a.push_back(encode(t, s));  // the array's own appends mixed in
            else
              w.push_back(encode(t, s));
          }
          w.flush();
          if (t == 0) {
            for (std::uint64_t s = 0; s < 5; ++s)
              w.push_back(encode(t, n + s));
            hidden = w.buffered();
          }
          finished.fetch_add(1, std::memory_order_release);
          while (!release.load())  // stay alive: the check below must not rely on join()
            std::this_thread::yield();
        });
      }
      while (finished.load(std::memory_order_acquire) < kWriters)
        std::this_thread::yield();
      std::uint64_t expected = 0;
      for (int t = 0; t < kWriters; ++t)
        expected += each - static_cast<std::uint64_t>(round * 37 + t * 11);
      CHECK(hidden == 5);
      CHECK(a.size() == expected);
      std::uint64_t zeros = 0;
      for (std::uint64_t v : a.published())
        zeros += v == 0;
      CHECK(zeros == 0);
      release = true;
      for (auto& w : writers)
        w.join();
      CHECK(a.size() == expected + 5);  // writer 0's destructor published its block
    }
  }

  TEST_CASE("threads that exit with partly filled Writer blocks: all of it published, no hole") {
    // Threads come and go, each appending a count that is no multiple of a block and exiting
    // without flushing; a reader scans meanwhile.
    constexpr std::size_t kMax = 400'000;
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kMax)};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, total{0};
    std::thread reader([&] {
      while (!done.load())
        for (std::uint64_t v : a.published())
          if (v == 0) bad_reads++;
    });
    const std::uint64_t longest = valgrind_scale(3000);
    for (int wave = 0; wave < 25; ++wave) {
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        const std::uint64_t n = 1 + (static_cast<std::uint64_t>(wave) * 977 + 131 * t) % longest;
        total += n;
        writers.emplace_back([&a, t, wave, n] {
          auto w = a.writer();
          for (std::uint64_t s = 0; s < n; ++s)
            w.push_back(encode(static_cast<std::uint64_t>(wave * kWriters + t), s));
        });
      }
      for (auto& w : writers)
        w.join();
      CHECK(a.size() == total);  // every exited thread's block is in
    }
    done = true;
    reader.join();
    CHECK(bad_reads == 0);
    require_no_hole_no_duplicate(a);
  }

  TEST_CASE("4 Writers race to the reservation limit: the array ends exactly full, no hole") {
    const std::size_t limit = valgrind_scale(100'000) + 3;  // not a multiple of any block
    for (int round = 0; round < 5; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(limit)};
      std::atomic<std::uint64_t> accepted{0}, left_over{0};
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          auto w = a.writer();
          for (std::uint64_t s = 0;; ++s) {
            try {
              w.push_back(encode(t, s));
              accepted++;
              if (s % 1'001 == 0) w.flush();
            } catch (const std::length_error&) {
              break;  // full: what fitted was appended
            }
          }
          left_over += w.buffered();  // dropped by the destructor
        });
      }
      for (auto& w : writers)
        w.join();
      CHECK(a.size() == limit);
      CHECK(a.size() + left_over == accepted);
      CHECK(a.dropped() == left_over);  // each writer's last flush threw: reported, then counted
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE("refused commits under contention with Writers: nothing lost, no hole") {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // many commits
    // Enough pages for the refusals to end (about 2 commits a page: the elements' and the
    // marks'), fewer under valgrind.
    const std::uint64_t each = test::under_valgrind() ? 5'000 : 20'000;
    ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(kWriters * each), o);
    std::atomic<std::uint64_t> added{0}, refused{0};
    {
      test::FaultGuard fault(pal::Op::commit, 10, 25);  // the 11th..35th commits fail
      std::vector<std::thread> writers;
      for (int t = 0; t < kWriters; ++t) {
        writers.emplace_back([&, t] {
          auto w = a.writer();
          for (std::uint64_t s = 0; s < each; ++s) {
            try {
              w.push_back(encode(t, s));
              added++;
            } catch (const reservoir::OsAllocationError&) {
              refused++;  // the buffer is kept; this value was not added
            }
          }
          for (;;) {  // the refusals are finite: flush until it goes through
            try {
              w.flush();
              break;
            } catch (const reservoir::OsAllocationError&) {
              refused++;
            }
          }
        });
      }
      for (auto& w : writers)
        w.join();
    }
    CHECK(refused > 0);
    CHECK(a.size() == added);
    require_no_hole_no_duplicate(a);
  }

  TEST_CASE("blocks of many sizes marked ready out of order: the prefix skips whole pieces") {
    // Holds back index 0 while other threads publish blocks of 1..300 after it through
    // append_range, so every block is marked ready in pieces; then index 0 completes and one
    // thread publishes the whole run.
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(200'000)};
    std::atomic<bool> go{false};
    std::thread first = hold_next_index(a, 9, go);  // index 0 is taken
    std::vector<std::thread> writers;
    std::atomic<std::uint64_t> added{1};
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        std::vector<std::uint64_t> block;
        std::uint64_t seq = 0;
        for (std::uint64_t b = 0; b < 100; ++b) {
          block.clear();
          const std::uint64_t n = 1 + (b * 89 + static_cast<std::uint64_t>(t) * 7) % 300;
          for (std::uint64_t k = 0; k < n; ++k)
            block.push_back(encode(t, seq++));
          a.append_range(block);
          added += n;
        }
      });
    }
    for (auto& w : writers)
      w.join();
    CHECK(a.size() == 0);  // all held back by index 0
    go = true;
    first.join();
    CHECK(a.size() == added);
    for (std::uint64_t v : a.published())
      REQUIRE(v != 0);
  }

  // ---- solo mode: one appending thread uses no atomic read-modify-write until a second appends

  TEST_CASE("2 to 16 threads push_back at once (oversubscribed): every value once, no hole") {
    // More threads than cores: appenders are preempted between claim and publish, and those
    // still running go on past them. A reader checks the published prefix all along.
    for (const unsigned threads : {2u, 3u, 4u, 8u, 16u}) {
      CAPTURE(threads);
      const std::uint64_t each = stress_scale(160'000) / threads;
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(threads * each)};
      std::atomic<bool> done{false};
      std::atomic<std::uint64_t> bad_reads{0}, shrank{0};
      std::thread reader([&] {
        std::size_t last = 0;
        while (!done.load()) {
          const std::span<const std::uint64_t> p = a.published();
          if (p.size() < last) shrank++;
          last = p.size();
          for (std::uint64_t v : p)
            bad_reads += v == 0;
        }
      });
      std::vector<std::thread> writers;
      for (unsigned t = 0; t < threads; ++t) {
        writers.emplace_back([&a, t, each] {
          for (std::uint64_t s = 1; s <= each; ++s)
            a.push_back(encode(t, s));
        });
      }
      for (auto& w : writers)
        w.join();
      done = true;
      reader.join();
      CHECK(bad_reads == 0);
      CHECK(shrank == 0);
      REQUIRE(a.size() == threads * each);
      // Each thread's values once each and in its own order.
      std::vector<std::uint64_t> last(threads, 0);
      for (std::uint64_t v : a.published()) {
        const std::uint64_t t = (v >> 32) - 1, s = v & 0xffffffff;
        REQUIRE(t < threads);
        REQUIRE(s == last[t] + 1);
        last[t] = s;
      }
    }
  }

  TEST_CASE("a reader never observes an element under construction, with 2 to 16 appenders") {
    // Slow writes its fields apart from one another, in place (its constructor cannot throw).
    // Readers check every element below size(), and the newest one through at(), while 2-16
    // threads append; under TSan a read of an element being constructed is also reported as a race.
    for (const unsigned threads : {2u, 5u, 16u}) {
      CAPTURE(threads);
      const std::uint64_t each = stress_scale(32'000) / threads;
      ConcurrentDynArray<Slow> a{reservoir::max_elements(threads * (each + each / 16))};
      std::atomic<bool> done{false};
      std::atomic<std::uint64_t> torn{0}, checked{0};
      std::vector<std::thread> readers;
      for (int r = 0; r < 2; ++r) {
        readers.emplace_back([&, r] {
          std::uint64_t n = 0;
          std::size_t seen = 0;
          while (!done.load()) {
            if (r == 0) {  // what was published since the last look
              const std::span<const Slow> p = a.published();
              for (std::size_t i = seen; i < p.size(); ++i)
                torn += !p[i].whole();
              n += p.size() - seen;
              seen = p.size();
            } else {  // the newest element only, as soon as it is counted
              const std::size_t size = a.size();
              if (size != 0) torn += !a.at(size - 1).whole();
              ++n;
            }
          }
          checked += n;
        });
      }
      std::vector<std::thread> writers;
      for (unsigned t = 0; t < threads; ++t) {
        writers.emplace_back([&a, t, each] {
          for (std::uint64_t s = 1; s <= each; ++s) {
            if (s % 16 == 0) {
              const std::uint64_t v[2] = {encode(t, s), encode(t, s) | (1ull << 31)};
              a.append_range(std::span<const std::uint64_t>(v));  // a block of two
            } else {
              a.emplace_back(encode(t, s));
            }
          }
        });
      }
      for (auto& w : writers)
        w.join();
      done = true;
      for (auto& r : readers)
        r.join();
      CHECK(torn == 0);
      CHECK(checked > 0);
      REQUIRE(a.size() == threads * (each + each / 16));
      for (const Slow& e : a.published())
        REQUIRE(e.whole());
    }
  }

  TEST_CASE("a stalled append holds the prefix back only until it returns, with no later append") {
    // Index 0 is held by a construction in progress while 2 other threads append past it; when it
    // finishes, size() counts every element although nobody appends afterwards (a reader's size()
    // finds the ready blocks, whichever thread finished last).
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(10'000)};
    std::atomic<bool> release{false};
    a.push_back(encode(9, 1));                               // the owner
    std::thread([&] { a.push_back(encode(9, 2)); }).join();  // ends solo mode
    std::thread holder = hold_next_index(a, 0, release);
    std::vector<std::thread> others;
    for (unsigned t = 1; t <= 2; ++t) {
      others.emplace_back([&a, t] {
        for (std::uint64_t s = 1; s <= 1000; ++s)
          a.push_back(encode(t, s));
      });
    }
    for (auto& o : others)
      o.join();
    CHECK(a.size() == 2);  // held back by index 2
    release = true;
    holder.join();
    CHECK(a.size() == 2003);
    for (std::uint64_t v : a.published())
      REQUIRE(v != 0);
  }

  TEST_CASE(
      "wait_for_size: a reader waiting for a stalled append sleeps until its publish wakes it") {
    // Index `base` is held by a construction that goes on only once the waiter has gone to sleep
    // (pal counted a wait: the hook below), or gives up after a minute: a waiter that spun or
    // yielded instead would never let it go on. Its publish must then wake the waiter. In solo
    // mode (the holder is the only appender) and in shared mode.
    const test::HangWatchdog watchdog("wait_for_size's sleeper", 600);
    if (!pal::process_barrier_supported()) {
      MESSAGE("no process-wide barrier here: wait_for_size yields instead of sleeping");
      return;
    }
    for (const bool shared : {false, true}) {
      CAPTURE(shared);
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
      std::uint64_t base = 0;
      if (shared) {
        a.push_back(encode(9, 1));
        std::thread([&] { a.push_back(encode(9, 2)); }).join();  // shared mode from here
        // Appends with nobody waiting: no wake (the flag is clear, so a publish only loads it).
        const std::uint64_t wakes = pal::testing::calls(pal::Op::wake);
        for (std::uint64_t s = 1; s <= 1000; ++s)
          a.push_back(encode(8, s));
        CHECK(pal::testing::calls(pal::Op::wake) == wakes);
        base = a.size();
        REQUIRE(base == 1002);
      }
      CHECK(a.wait_for_size(base) == base);  // reached already: returns at once, no sleep
      g_wait_release = false;
      g_wait_gave_up = false;
      const std::uint64_t waits = pal::testing::calls(pal::Op::wait);
      const std::uint64_t wakes = pal::testing::calls(pal::Op::wake);
      pal::testing::on_call(pal::Op::wait, &release_on_a_wait);
      std::thread holder([&] {
        a.emplace_back_with([&](std::size_t i) noexcept {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
          while (!g_wait_release.load()) {
            if (std::chrono::steady_clock::now() > deadline) {
              g_wait_gave_up = true;
              break;
            }
            std::this_thread::yield();
          }
          return encode(7, i);
        });
      });
      std::uint64_t seen = 0;
      std::thread waiter([&] { seen = a.wait_for_size(base + 1); });
      holder.join();
      waiter.join();
      pal::testing::on_call(pal::Op::wait, nullptr);
      CHECK_FALSE(g_wait_gave_up.load());  // the waiter went to sleep while the append stalled
      CHECK(pal::testing::calls(pal::Op::wait) > waits);
      CHECK(pal::testing::calls(pal::Op::wake) > wakes);  // and the publish woke it
      CHECK(seen == base + 1);
      CHECK(a[base] == encode(7, base));
      CHECK_THROWS_AS((void)a.wait_for_size(a.max_size() + 1), std::length_error);
    }
  }

  TEST_CASE("a memo that reads past the prefix: try_get and append_with from 4 threads") {
    // Element i is the Collatz orbit length of i + 1, appended by emplace_back_with (one thread)
    // or append_with blocks (the others); every lookup below i goes through try_get, so it reads
    // elements published past the prefix while other threads' appends are in progress. A reader
    // checks whatever try_get finds meanwhile. Every value must equal a plain computation.
    const std::uint64_t n = stress_scale(200'000);
    const auto plain = [](std::uint64_t x) {
      std::uint32_t steps = 0;
      for (; x != 1; ++steps)
        x = x % 2 == 1 ? 3 * x + 1 : x / 2;
      return steps;
    };
    ConcurrentDynArray<std::uint32_t> a{reservoir::max_elements(n)};
    std::atomic<std::uint64_t> taken{0}, found{0}, wrong{0};
    const auto make = [&a, &found](std::size_t i) noexcept {
      std::uint32_t steps = 0;
      for (std::uint64_t x = i + 1; x != 1; ++steps) {
        if (x <= i) {
          if (const std::uint32_t* known = a.try_get(x - 1)) {
            found.fetch_add(1, std::memory_order_relaxed);
            return steps + *known;
          }
        }
        x = x % 2 == 1 ? 3 * x + 1 : x / 2;
      }
      return steps;
    };
    std::atomic<bool> done{false};
    std::thread reader([&] {
      while (!done.load()) {
        for (std::uint64_t j = 0; j < n; j += 97) {
          const std::uint32_t* v = a.try_get(j);
          if (v != nullptr && *v != plain(j + 1)) wrong.fetch_add(1);
        }
      }
    });
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < 4; ++t) {
      pool.emplace_back([&, t] {
        const std::uint64_t block = t == 0 ? 1 : 2 + 3 * t;  // 1, 5, 8, 11
        for (;;) {
          const std::uint64_t first = taken.fetch_add(block);
          if (first >= n) return;
          const std::uint64_t count = std::min(block, n - first);
          if (count == 1) {
            (void)a.emplace_back_with(make);
          } else {
            (void)a.append_with(count, make);
          }
        }
      });
    }
    for (auto& t : pool)
      t.join();
    done = true;
    reader.join();
    REQUIRE(a.size() == n);
    std::uint64_t mismatches = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (a[i] != plain(i + 1)) ++mismatches;
      if (a.try_get(i) != &a[i]) ++mismatches;
    }
    CHECK(mismatches == 0);
    CHECK(wrong == 0);
    CHECK(found > 0);
  }

  TEST_CASE("plain push_back from 2 to 16 threads: one fetch_add each, no failed claim, no retry") {
    for (unsigned threads : {2u, 4u, 8u, 16u}) {
      const std::uint64_t each = stress_scale(100'000);
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(threads * each)};
      std::atomic<std::uint64_t> failed{0}, single{0}, past{0}, refused{0};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          const reservoir::detail::ClaimCounts before = reservoir::detail::claim_counts();
          for (std::uint64_t s = 1; s <= each; ++s)
            a.push_back(encode(t, s));
          const reservoir::detail::ClaimCounts& after = reservoir::detail::claim_counts();
          failed += after.failed_cas - before.failed_cas;
          single += after.single - before.single;
          past += after.past_capacity - before.past_capacity;
          refused += after.refused - before.refused;
        });
      }
      for (auto& t : pool)
        t.join();
      MESSAGE(threads << " threads: " << threads * each << " appends, " << single.load()
                      << " off the fast path (" << past.load() << " past capacity), "
                      << failed.load() << " failed claims");
      CHECK(failed == 0);   // a fetch_add never fails: no retry, whatever the contention
      CHECK(refused == 0);  // and none was undone
      CHECK(single < threads * each / 8);  // the rest took the fast path: one RMW, no branch out
      CHECK(a.size() == threads * each);
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE(
      "pacing: a thread cut into pauses, the turn changes hands, a pause that buys no streak "
      "stops") {
    namespace d = reservoir::detail;
    // Two threads append in an exact order (a step counter hands over), so every cut is known.
    ConcurrentDynArray<int> a{reservoir::max_elements(10'000)};
    // The main thread's append, so that the workers' appends are shared; its pacing record is
    // cleared first, as an earlier test's array may have had this address.
    d::t_pace = d::PaceState{};
    a.push_back(-1);
    std::atomic<int> step{0};
    struct Seen {
      std::uint64_t paced = 0, turns = 0, unpaid = 0, owed = 0;
    };
    std::vector<Seen> seen_a, seen_b;  // each thread's counts after each of its turns
    const auto counts = [] {
      const d::ClaimCounts& c = d::claim_counts();
      return Seen{c.paced, c.turns, c.unpaid, d::t_pace.owed};
    };
    const auto worker = [&](int parity, const std::vector<int>& appends, std::vector<Seen>& seen) {
      const Seen base = counts();
      for (std::size_t k = 0; k < appends.size(); ++k) {
        const int my_step = static_cast<int>(2 * k) + parity;
        while (step.load(std::memory_order_acquire) != my_step)
          std::this_thread::yield();
        for (int e = 0; e < appends[k]; ++e)
          a.push_back(my_step);
        const Seen now = counts();
        seen.push_back(
            {now.paced - base.paced, now.turns - base.turns, now.unpaid - base.unpaid, now.owed});
        step.store(my_step + 1, std::memory_order_release);
      }
    };
    // A: 1, 1, then kRunPaid + 36 kPacedTurn times, then 1 five times. B: 1 each turn.
    const unsigned runs = reservoir::detail::kPacedTurn;
    std::vector<int> appends_a{1, 1};
    for (unsigned k = 0; k < runs; ++k)
      appends_a.push_back(static_cast<int>(d::kRunPaid) + 36);
    for (int k = 0; k < 5; ++k)
      appends_a.push_back(1);
    const std::vector<int> appends_b(appends_a.size(), 1);
    std::thread ta([&] { worker(0, appends_a, seen_a); });
    std::thread tb([&] { worker(1, appends_b, seen_b); });
    ta.join();
    tb.join();
    REQUIRE(seen_a.size() == appends_a.size());
    REQUIRE(seen_b.size() == appends_b.size());
    // Turn 1: each thread's first claim is no cut. Turn 2: A is cut into, nobody holds the turn:
    // A takes it; B, cut into by A, pauses.
    CHECK(seen_a[0].turns == 0);
    CHECK(seen_a[1].turns == 1);
    CHECK(seen_b[1].paced == 1);
    CHECK(seen_b[1].owed == d::kFirstBackoff);  // paid before B's next claim
    CHECK(seen_b[2].owed == 2 * d::kFirstBackoff);
    // While A (the turn holder) claims runs, B pauses after each of its claims, and after
    // kPacedTurn pauses in a row takes the turn.
    for (unsigned k = 2; k < 2 + runs - 1; ++k) {
      CHECK(seen_a[k].paced == 0);
      CHECK(seen_b[k].paced == k);
      CHECK(seen_b[k].turns == 0);
    }
    CHECK(seen_b[runs + 1].turns == 1);
    CHECK(seen_b[runs + 1].paced == runs);
    // Now A is cut into by B's turn: A pauses once; its next claim finds that B claimed one index
    // meanwhile (no run: the pause bought nothing), so A takes the turn and lets the following
    // cuts pass. B, cut into by A, pauses once, finds no run either, and does the same.
    const std::size_t last = appends_a.size() - 1;
    CHECK(seen_a[runs + 2].paced == 1);
    CHECK(seen_a[runs + 3].unpaid == 1);
    CHECK(seen_a[runs + 3].turns == 2);
    CHECK(seen_b[runs + 3].paced == runs + 1);
    CHECK(seen_b[runs + 4].unpaid == 1);
    CHECK(seen_b[runs + 4].turns == 2);
    CHECK(seen_a[last].paced == 1);  // no more pauses on either side
    CHECK(seen_a[last].unpaid == 1);
    CHECK(seen_b[last].paced == runs + 1);
    CHECK(seen_b[last].unpaid == 1);
    CHECK(a.size() == 1 + std::accumulate(appends_a.begin(), appends_a.end(), std::size_t{0}) +
                          appends_b.size());
  }

  TEST_CASE("16 threads push_back past max_size(): exactly full, every refusal a length_error") {
    const std::size_t limit = valgrind_scale(50'000) + 7;
    for (int round = 0; round < 3; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(limit)};
      std::atomic<std::uint64_t> kept{0}, full{0};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < 16; ++t) {
        pool.emplace_back([&, t] {
          for (std::uint64_t s = 1; s <= limit / 4; ++s) {
            try {
              a.push_back(encode(t, s));
              ++kept;
            } catch (const std::length_error&) {
              ++full;
            }
          }
        });
      }
      for (auto& t : pool)
        t.join();
      CHECK(kept == limit);
      CHECK(a.size() == limit);
      CHECK(full == 16 * (limit / 4) - limit);
      CHECK_THROWS_AS(a.push_back(1), std::length_error);  // still full, claims reopened
      require_no_hole_no_duplicate(a);
    }
  }

  TEST_CASE("refused commits while 4 threads push_back: nothing added for a refusal, no hole") {
    reservoir::ArenaOptions o;
    o.commit_granule = o.max_commit_step = pal::page_size();  // many commits
    const std::uint64_t each = test::under_valgrind() ? 5'000 : 20'000;
    ConcurrentDynArray<std::uint64_t> a(reservoir::max_elements(kWriters * each * 2), o);
    a.push_back(encode(9, 1));
    std::thread([&] { a.push_back(encode(9, 2)); }).join();  // shared mode from here
    std::atomic<std::uint64_t> added{2}, refused{0};
    {
      test::FaultGuard fault(pal::Op::commit, 4,
                             40);  // the 5th..44th commits fail (64 KiB pages: ~10 in all)
      std::vector<std::thread> pool;
      for (int t = 0; t < kWriters; ++t) {
        pool.emplace_back([&, t] {
          for (std::uint64_t s = 1; s <= each; ++s) {
            try {
              a.push_back(encode(static_cast<std::uint64_t>(t), s));
              ++added;
            } catch (const reservoir::OsAllocationError&) {
              ++refused;  // this value was not added
            }
          }
        });
      }
      for (auto& t : pool)
        t.join();
    }
    CHECK(refused > 0);
    CHECK(a.size() == added);
    require_no_hole_no_duplicate(a);
    const std::size_t next = a.push_back(encode(9, 3));  // the claims reopened after the refusals
    CHECK(next == added);
    CHECK(a.size() == added + 1);
  }
}
