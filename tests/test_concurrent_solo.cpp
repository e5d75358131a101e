// ConcurrentDynArray's solo mode: the owner's plain stores, the barrier that ends it, refusals.
#include "concurrent_support.hpp"

TEST_SUITE("concurrent") {
  TEST_CASE("solo mode: a second appending thread ends it with one barrier, once") {
    const bool solo = pal::process_barrier_supported();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    const std::uint64_t before = pal::testing::calls(pal::Op::barrier);
    std::thread owner([&] {  // appends first, then ends: the array outlives its owner thread
      for (std::uint64_t k = 0; k < 1000; ++k)
        a.push_back(encode(0, k));
    });
    owner.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before);  // nothing to end yet
    for (std::uint64_t k = 0; k < 1000; ++k)
      a.push_back(encode(1, k));
    CHECK(pal::testing::calls(pal::Op::barrier) == before + (solo ? 1 : 0));
    std::thread third([&] {
      for (std::uint64_t k = 0; k < 1000; ++k)
        a.emplace_back_with([k](std::size_t) noexcept { return encode(2, k); });
    });
    third.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before + (solo ? 1 : 0));  // ended for good
    REQUIRE(a.size() == 3000);
    for (std::uint64_t i = 0; i < 3000; ++i)
      REQUIRE(a[i] == encode(i / 1000, i % 1000));
  }

  TEST_CASE("the owner's trivial copies take the sectionless append until another thread appends") {
    using reservoir::detail::ConcurrentCore;
    const bool solo = pal::process_barrier_supported();
    ConcurrentCore core(1000, sizeof(int), alignof(int), reservoir::ArenaOptions{});
    int* const elements = static_cast<int*>(core.data());
    std::size_t constructed = 0;
    const auto store = [&](std::size_t k) noexcept {
      elements[k] = static_cast<int>(k) * 3;
      ++constructed;
    };
    CHECK(core.append_solo(store) == 0);  // no owner yet (and nothing committed)
    CHECK(constructed == 0);
    const std::size_t first =
        core.claim({sizeof(int), "push_back"});  // the general way: this thread owns it
    elements[first] = 0;
    core.publish(first);
    // An append of the owner's in progress (claimed, not yet published): a nested one must go
    // the general way.
    const std::size_t open = core.claim({sizeof(int), "push_back"});
    CHECK(core.append_solo(store) == 0);
    elements[open] = 3;
    core.publish(open);
    CHECK(core.append_solo(store) == (solo ? 3u : 0u));
    CHECK(constructed == (solo ? 1u : 0u));
    CHECK(core.size() == (solo ? 3u : 2u));
    std::thread second([&] {  // a second appender ends solo mode
      const std::size_t i = core.claim({sizeof(int), "push_back"});
      elements[i] = static_cast<int>(i) * 3;
      core.publish(i);
    });
    second.join();
    const std::size_t n = core.size();
    CHECK(core.append_solo(store) == 0);
    CHECK(core.size() == n);
    for (std::size_t k = 0; k < n; ++k)
      REQUIRE(elements[k] == static_cast<int>(k) * 3);
  }

  TEST_CASE("ending solo mode while the owner keeps appending: every value once, in order") {
    // The owner appends alone, then three more threads start at a different point each round;
    // readers check the published prefix all along.
    const std::uint64_t owner_count = valgrind_scale(60'000), others_count = owner_count / 3;
    for (std::uint64_t round = 0; round < 12; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(owner_count + 3 * others_count)};
      std::atomic<bool> done{false};
      std::atomic<std::uint64_t> bad{0};
      std::thread reader([&] {
        while (!done.load()) {
          for (std::uint64_t v : a.published())
            if (v == 0) ++bad;
        }
      });
      std::thread owner([&] {
        for (std::uint64_t k = 0; k < owner_count; ++k)
          a.push_back(encode(0, k));
      });
      // 0 (at once) .. 55% of the owner's elements
      const std::uint64_t start = round * (owner_count / 20);
      while (a.size() < start)
        std::this_thread::yield();
      std::vector<std::thread> others;
      for (std::uint64_t t = 1; t <= 3; ++t) {
        others.emplace_back([&, t] {
          if (t == 3) {
            auto w = a.writer();
            for (std::uint64_t k = 0; k < others_count; ++k)
              w.push_back(encode(t, k));
          } else {
            for (std::uint64_t k = 0; k < others_count; ++k)
              a.push_back(encode(t, k));
          }
        });
      }
      owner.join();
      for (auto& t : others)
        t.join();
      done = true;
      reader.join();
      CHECK(bad.load() == 0);
      REQUIRE(a.size() == owner_count + 3 * others_count);
      require_no_hole_no_duplicate(a);
      std::vector<std::uint64_t> next(4, 0);  // each thread's values appear in its own order
      for (std::uint64_t v : a.published()) {
        const std::uint64_t t = (v >> 32) - 1;
        REQUIRE((v & 0xffffffffU) == next[t]);
        ++next[t];
      }
    }
  }

  TEST_CASE("solo mode ends in the middle of the owner's trivial appends: no index twice") {
    // The owner's append of a trivial copy claims before it checks the mode: a claim the ending
    // thread counted stands (the owner fills and publishes it after solo mode), one it did not
    // count is dropped and taken again the shared way. Short rounds, the second thread's one
    // append landing at a different point of the owner's loop each time, hit both windows.
    // A thread per round: under ASan a fifth of the rounds (each thread start costs about a
    // millisecond there), under TSan and valgrind as stress_scale says.
    const std::uint64_t rounds = kAddressSanitizer ? 800 : stress_scale(4000), owner_count = 3000;
    std::uint64_t lost = 0, duplicated = 0, out_of_order = 0;
    for (std::uint64_t round = 0; round < rounds; ++round) {
      ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(owner_count + 1)};
      std::atomic<bool> go{false};
      std::thread owner([&] {
        a.push_back(encode(0, 0));  // owner from here on
        go.store(true);
        for (std::uint64_t k = 1; k < owner_count; ++k)
          a.push_back(encode(0, k));
      });
      while (!go.load())
        std::this_thread::yield();
      for (std::uint64_t spin = round % 64 * 20; spin != 0; --spin)
        (void)a.size();
      a.push_back(encode(1, 0));
      owner.join();
      lost += a.size() != owner_count + 1;
      std::set<std::uint64_t> seen;
      std::uint64_t next = 0;
      for (std::uint64_t v : a.published()) {
        duplicated += !seen.insert(v).second;
        if ((v >> 32) == 1) continue;
        out_of_order += (v & 0xffffffffU) != next;
        next = (v & 0xffffffffU) + 1;
      }
    }
    CHECK(lost == 0);
    CHECK(duplicated == 0);
    CHECK(out_of_order == 0);
  }

  TEST_CASE("a thread ending solo mode never waits for the owner's construction") {
    // The owner's make() waits until another thread's push_back has returned: if that push_back
    // waited for the owner's append to finish, this would never end.
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    std::atomic<bool> other_done{false};
    std::size_t seen_by_other = 99;
    std::thread owner = hold_next_index(a, 0, other_done);
    std::thread other([&] {
      a.push_back(encode(1, 0));
      seen_by_other = a.size();  // index 0 is still held by the owner's construction
      other_done = true;
    });
    other.join();
    CHECK(seen_by_other == 0);
    owner.join();
    REQUIRE(a.size() == 2);
    CHECK(a[0] == encode(0, 0));
    CHECK(a[1] == encode(1, 0));
  }

  TEST_CASE("an append nested in the owner's make() is published after the outer one") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    std::size_t seen_inside = 99;
    a.emplace_back_with([&](std::size_t i) noexcept {
      a.push_back(encode(1, 0));  // index i + 1, finished first
      seen_inside = a.size();     // held back by index i
      return encode(0, i);
    });
    CHECK(seen_inside == 0);
    REQUIRE(a.size() == 2);
    CHECK(a[0] == encode(0, 0));
    CHECK(a[1] == encode(1, 0));
    a.push_back(encode(2, 0));  // and the owner goes on
    CHECK(a.size() == 3);
  }

  TEST_CASE("a refused barrier: the second thread's append adds nothing, the owner goes on") {
    if (!pal::process_barrier_supported()) {
      MESSAGE("no process-wide barrier on this system: arrays never enter solo mode");
      return;
    }
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    for (std::uint64_t k = 0; k < 10; ++k)
      a.push_back(encode(0, k));
    {
      test::FaultGuard refuse(pal::Op::barrier, 0, 3);
      std::thread other([&] {
        CHECK_THROWS_AS(a.push_back(encode(1, 0)), std::system_error);
        CHECK_FALSE(a.try_emplace_back(encode(1, 0)).has_value());
        auto w = a.writer();
        w.push_back(encode(1, 0));
        CHECK_THROWS_AS(w.flush(), std::system_error);
        CHECK(w.buffered() == 1);  // kept
        w.flush();                 // the barrier works again
        CHECK(w.buffered() == 0);
      });
      other.join();
    }
    CHECK(a.size() == 11);
    a.push_back(encode(0, 10));
    REQUIRE(a.size() == 12);
    for (std::uint64_t k = 0; k < 10; ++k)
      CHECK(a[k] == encode(0, k));
    CHECK(a[10] == encode(1, 0));
    CHECK(a[11] == encode(0, 10));
  }

  TEST_CASE("barriers refused while the owner appends: its claims stand, nothing is lost") {
    // The owner's trivial append claims, then sees solo mode ending, waits, and finds it solo
    // again (the barrier was refused): the claim stands and the append goes on in solo mode.
    if (!pal::process_barrier_supported()) {
      MESSAGE("no process-wide barrier on this system: arrays never enter solo mode");
      return;
    }
    const std::uint64_t most = 4'000'000, attempts = valgrind_scale(3000);
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(most)};
    std::atomic<bool> owner_started{false}, tried_once{false}, stop{false};
    std::uint64_t appended = 0, refused = 0;
    {
      test::FaultGuard refuse(pal::Op::barrier, 0, std::uint64_t{1} << 40);
      std::thread owner([&] {
        a.push_back(encode(0, 0));
        owner_started.store(true);
        while (!tried_once.load())  // at least one refused attempt, whatever the scheduling
          std::this_thread::yield();
        std::uint64_t k = 1;
        for (; k < most && !stop.load(std::memory_order_relaxed); ++k) {
          a.push_back(encode(0, k));
          if (k % 256 == 0) std::this_thread::yield();  // the other thread's turn, on one core
        }
        appended = k;
        stop.store(true);
      });
      while (!owner_started.load())
        std::this_thread::yield();
      std::uint64_t tried = 0;
      for (; tried < attempts && !stop.load(); ++tried) {
        refused += !a.try_emplace_back(encode(1, 0)).has_value();
        tried_once.store(true);
        std::this_thread::yield();  // a window of solo mode for the owner to see
      }
      stop.store(true);
      owner.join();
      CHECK(refused == tried);
    }
    MESSAGE(refused << " appends refused while the owner appended " << appended);
    CHECK(refused > 0);
    CHECK(a.size() == appended);  // the refused appends added nothing
    CHECK(test::first_wrong(a.size(), [&](std::size_t k) { return a[k] == encode(0, k); }) ==
          a.size());
  }

  TEST_CASE("without a process-wide barrier an array appends the shared way from the start") {
    std::uint64_t before = 0;
    std::optional<ConcurrentDynArray<std::uint64_t>> a;
    {
      test::FaultGuard unsupported(pal::Op::barrier, 0, 1);  // the constructor's question
      a.emplace(reservoir::max_elements(100'000));
      before = pal::testing::calls(pal::Op::barrier);
    }
    std::vector<std::thread> writers;
    for (std::uint64_t t = 0; t < 3; ++t) {
      writers.emplace_back([&, t] {
        for (std::uint64_t k = 0; k < 10'000; ++k)
          a->push_back(encode(t, k));
      });
    }
    for (auto& w : writers)
      w.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before);  // never asked for one
    REQUIRE(a->size() == 30'000);
    require_no_hole_no_duplicate(*a);
  }

  TEST_CASE("a move hands solo mode over with the elements; the source starts afresh") {
    const bool solo = pal::process_barrier_supported();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000)};
    for (std::uint64_t k = 0; k < 10; ++k)
      a.push_back(encode(0, k));
    ConcurrentDynArray<std::uint64_t> b(std::move(a));
    check_empty_unreserved(a);
    const std::uint64_t before = pal::testing::calls(pal::Op::barrier);
    b.push_back(encode(0, 10));  // still the owner: no barrier
    CHECK(pal::testing::calls(pal::Op::barrier) == before);
    std::thread other([&] { b.push_back(encode(1, 0)); });
    other.join();
    CHECK(pal::testing::calls(pal::Op::barrier) == before + (solo ? 1 : 0));
    REQUIRE(b.size() == 12);
    CHECK(b[10] == encode(0, 10));
    CHECK(b[11] == encode(1, 0));
    a = ConcurrentDynArray<std::uint64_t>{reservoir::max_elements(10)};  // reusable
    a.push_back(1);
    CHECK(a.size() == 1);
  }
}
