// Tests of <reservoir/concurrent_dynarray.hpp> from one thread at a time: every member,
// append_range, the Writer and what it does with what it cannot append, the messages, the range.
// The threads' tests are in test_concurrent_claims.cpp, solo mode's in test_concurrent_solo.cpp,
// fork's in test_concurrent_fork.cpp.
#include "concurrent_support.hpp"

namespace {

// Sends this child's stderr to its stdout, which the parent captures, and prints the address of
// `array` ("array 0x..."), which the loss message must name.
void stderr_to_stdout_naming(const void* array) {
  std::printf("array %p\n", array);
  std::fflush(stdout);
  std::fflush(stderr);
#if defined(_WIN32)
  (void)_dup2(_fileno(stdout), _fileno(stderr));
#else
  (void)::dup2(STDOUT_FILENO, STDERR_FILENO);
#endif
}

// 15 elements through a Writer into an array of 10, the writer destroyed with no flush: the 5 that
// do not fit are lost without any flush having reported it. The default writer aborts with a
// message naming the array (every build); made with WriterLoss::count, it prints "dropped N size
// S".
int writer_drops_unreported(reservoir::WriterLoss on_loss) {
  ConcurrentDynArray<int> a{reservoir::max_elements(10)};
  stderr_to_stdout_naming(&a);
  {
    auto w = a.writer(on_loss);
    for (int i = 0; i < 15; ++i)
      w.push_back(i);
  }
  std::printf("dropped %zu size %zu\n", a.dropped(), a.size());
  return 0;
}
RESERVOIR_CHILD("concurrent.writer_drops_unreported") {
  return writer_drops_unreported(reservoir::WriterLoss::abort);
}
RESERVOIR_CHILD("concurrent.writer_drops_unreported_counted") {
  return writer_drops_unreported(reservoir::WriterLoss::count);
}

// A flush() throws for the one element that does not fit (the program is told), then one more is
// buffered and the writer destroyed: two dropped, the second never reported. Aborts naming one
// element (default writer), or prints "dropped N size S" (WriterLoss::count).
int writer_drops_one_unreported_after_told(reservoir::WriterLoss on_loss) {
  ConcurrentDynArray<int> a{reservoir::max_elements(4)};
  stderr_to_stdout_naming(&a);
  {
    auto w = a.writer(on_loss);
    for (int i = 0; i < 5; ++i)
      w.push_back(i);
    try {
      w.flush();
    } catch (const std::length_error&) {  // told: one element stays buffered
    }
    w.push_back(5);  // never reported
  }
  std::printf("dropped %zu size %zu\n", a.dropped(), a.size());
  return 0;
}
RESERVOIR_CHILD("concurrent.writer_drops_one_unreported_after_told") {
  return writer_drops_one_unreported_after_told(reservoir::WriterLoss::abort);
}
RESERVOIR_CHILD("concurrent.writer_drops_one_unreported_after_told_counted") {
  return writer_drops_one_unreported_after_told(reservoir::WriterLoss::count);
}

// The final flush's commit is refused: the loss message gives the refusal's own words.
RESERVOIR_CHILD("concurrent.writer_drops_refused") {
  reservoir::ArenaOptions o;
  o.reuse_reservation = false;  // nothing committed yet: the flush must commit
  ConcurrentDynArray<int> a{reservoir::max_elements(1000), o};
  stderr_to_stdout_naming(&a);
  {
    auto w = a.writer();
    for (int i = 0; i < 3; ++i)
      w.push_back(i);
    reservoir::pal::testing::fail(pal::Op::commit, 0, 1000,
                                  reservoir::pal::testing::out_of_memory_error());
  }
  std::printf("dropped %zu size %zu\n", a.dropped(), a.size());
  return 0;
}

#if !defined(NDEBUG)
// operator[] past size(): the assertion stops it (a debug build), as DynArray's does.
RESERVOIR_CHILD("concurrent.index_past_size") {
  ConcurrentDynArray<int> a{reservoir::max_elements(8)};
  a.push_back(1);
  a.push_back(2);
  std::printf("%d\n", a[1]);  // fine: the last published element
  std::fflush(stdout);
  const ConcurrentDynArray<int>& c = a;
  std::printf("%d\n", c[2]);  // committed memory, not published
  return 0;
}
#endif

// The child's end was std::abort().
bool aborted(const test::ProcessResult& r) {
#if defined(_WIN32)
  return r.exited && r.exit_code == 3;
#else
  return !r.exited && r.signal == SIGABRT;
#endif
}

// The address the child printed as "array 0x...".
std::string array_address(const std::string& output) {
  const std::size_t at = output.find("array ");
  if (at == std::string::npos) return "(none)";
  const std::size_t end = output.find_first_of("\r\n", at);
  return output.substr(at + 6, end - at - 6);
}

}  // namespace

TEST_SUITE("concurrent") {
  TEST_CASE("single-threaded basics and limits") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    CHECK(a.empty());
    CHECK(a.push_back(5) == 0);
    CHECK(a.emplace_back(6u) == 1);
    CHECK(a.size() == 2);
    CHECK(a.at(1) == 6);
    CHECK_THROWS_AS((void)a.at(2), std::out_of_range);
    while (a.size() < a.max_size())
      a.push_back(a.size());
    CHECK_THROWS_AS(a.push_back(1), std::length_error);
    CHECK_FALSE(a.try_emplace_back(1u).has_value());
    CHECK(a.size() == 100'000);
    CHECK(a.published().back() == 99'999);
    CHECK_THROWS_AS(ConcurrentDynArray<int>(reservoir::max_elements(0)), std::invalid_argument);
    if constexpr (sizeof(std::size_t) == 8) {  // the claims count in 48 bits: 2^47 at most
      CHECK_THROWS_AS(ConcurrentDynArray<char>(reservoir::max_elements((std::size_t{1} << 47) + 1)),
                      std::length_error);
    }
  }

  TEST_CASE(
      "4 writers x 250k appends while 2 readers scan: every value exactly once, no torn read") {
    const std::uint64_t each = per_writer();
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(kWriters * each)};
    const std::uint64_t* const base = a.data();
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> bad_reads{0}, scans{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&] {
        std::size_t last = 0;
        while (!done.load()) {
          const std::size_t n = a.size();
          if (n < last) bad_reads++;  // size() never decreases
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
        for (std::uint64_t s = 0; s < each; ++s)
          a.push_back(encode(t, s));
      });
    }
    for (auto& w : writers)
      w.join();
    done = true;
    for (auto& r : readers)
      r.join();
    CHECK(bad_reads == 0);
    CHECK(scans > 0);
    REQUIRE(a.size() == kWriters * each);
    CHECK(a.data() == base);  // nothing moved
    // Every value exactly once, and each writer's values in its own order.
    std::vector<std::uint64_t> next(kWriters, 0);
    for (std::uint64_t v : a.published()) {
      const std::uint64_t t = (v >> 32) - 1, s = v & 0xffffffff;
      REQUIRE(t < kWriters);
      REQUIRE(s == next[t]);
      ++next[t];
    }
    for (auto n : next)
      CHECK(n == each);
  }

  TEST_CASE(
      "refused commits under contention: errors to their threads, published elements intact") {
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
          for (std::uint64_t s = 0; s < each; ++s) {
            if (s % 2) {
              if (a.try_emplace_back(encode(t, s)))
                added++;
              else
                refused++;
            } else {
              try {
                a.push_back(encode(t, s));
                added++;
              } catch (const reservoir::OsAllocationError&) {
                refused++;
              }
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
    a.push_back(encode(0, 99'999));  // usable afterwards
    CHECK(a.size() == added + 1);
  }

  TEST_CASE("one thread appending alone never touches the ready marks' pages") {
    if (const char* why = test::rss_unmeasurable()) {
      MESSAGE(why);
      return;
    }
    // 64 MiB of elements, one mark byte each (16 MiB): in order, the marks are never written,
    // so only the elements become resident.
    constexpr std::size_t kCount = std::size_t{1} << 24;
    std::vector<std::uint32_t> batch(std::size_t{1} << 20);
    const std::size_t before = pal::current_rss() / 1024;
    {
      ConcurrentDynArray<std::uint32_t> a{reservoir::max_elements(kCount)};
      for (std::size_t done = 0; done < kCount / 2; done += batch.size()) {
        std::iota(batch.begin(), batch.end(), static_cast<std::uint32_t>(done));
        a.append_range(batch);
      }
      auto w = a.writer();  // a lone Writer's blocks are in order too
      for (std::size_t i = kCount / 2; i < kCount; ++i)
        w.push_back(static_cast<std::uint32_t>(i));
      w.flush();
      const std::size_t after = pal::current_rss() / 1024;
      const std::size_t grew_kib = after > before ? after - before : 0;
      INFO("RSS grew by " << grew_kib << " KiB for " << kCount * 4 / 1024 << " KiB of elements");
      CHECK(a.size() == kCount);
      CHECK(a[kCount - 1] == kCount - 1);
      // Elements + 8 MiB (+ ASan's shadow of them); the marks alone would add 16 MiB.
      const std::size_t shadow = kAddressSanitizer ? kCount * 4 / 8 : 0;
      CHECK(grew_kib < (kCount * 4 + shadow + kCount / 2) / 1024);
    }
  }

  TEST_CASE("a refused commit of the ready marks after the elements' commit adds nothing") {
    reservoir::ArenaOptions o;
    o.reuse_reservation = false;  // no parked reservation: the first append commits both arenas
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1000), o};
    {
      // The next commit (the elements') passes, the one after it (the marks') fails.
      test::FaultGuard fault(pal::Op::commit, 1, 1);
      const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
      CHECK_THROWS_AS(a.push_back(1), reservoir::OsAllocationError);
      CHECK(pal::testing::calls(pal::Op::commit) - commits == 2);
    }
    CHECK(a.size() == 0);
    CHECK(a.capacity() == 0);    // not published: the marks are missing
    CHECK(a.push_back(2) == 0);  // the retry commits the marks; the elements' step is kept
    CHECK(a.push_back(3) == 1);
    CHECK(a.size() == 2);
    CHECK(a[0] == 2);
    CHECK(a[1] == 3);
    CHECK(a.capacity() > 0);
  }

  TEST_CASE("every member is defined on default-constructed and moved-from arrays") {
    ConcurrentDynArray<int> d;
    check_empty_unreserved(d);

    ConcurrentDynArray<int> a{reservoir::max_elements(1000)};
    a.push_back(1);
    a.push_back(2);
    const int* base = a.data();
    ConcurrentDynArray<int> b(std::move(a));
    check_empty_unreserved(a);
    CHECK(b.size() == 2);
    CHECK(b.data() == base);  // nothing moved in memory
    CHECK(b.max_size() == 1000);
    b.push_back(3);
    CHECK(b.at(2) == 3);

    ConcurrentDynArray<int> c{reservoir::max_bytes(4000)};
    c.push_back(9);
    c = std::move(b);  // c's old element is destroyed, b's taken
    check_empty_unreserved(b);
    CHECK(c.size() == 3);
    CHECK(c[0] == 1);
    CHECK(c.data() == base);
    swap(b, c);
    CHECK(b.size() == 3);
    check_empty_unreserved(c);
    c = ConcurrentDynArray<int>{reservoir::max_elements(10)};  // a moved-from array is reusable
    CHECK(c.push_back(4) == 0);
  }

  TEST_CASE("append_range: one block of consecutive indices, all-or-nothing at the limit") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100)};
    std::vector<std::uint64_t> v(40);
    std::iota(v.begin(), v.end(), 1);
    CHECK(a.append_range(v) == 0);
    CHECK(a.push_back(1000) == 40);
    CHECK(a.append_range(v) == 41);
    CHECK(a.size() == 81);
    CHECK(a[41] == 1);
    CHECK(a[80] == 40);
    // 19 indices left: a block of 40 does not fit and claims nothing.
    CHECK_THROWS_AS(a.append_range(v), std::length_error);
    CHECK(a.size() == 81);
    // A block ending exactly at the limit fits.
    const std::vector<std::uint64_t> last(19, 7);
    CHECK(a.append_range(last) == 81);
    CHECK(a.size() == 100);
    CHECK(a.published().back() == 7);
    CHECK_THROWS_AS(a.append_range(last), std::length_error);
    CHECK_THROWS_AS(a.push_back(1), std::length_error);
    CHECK(a.size() == 100);
  }

  TEST_CASE("append_with: one block, make(i) at each index; try_get finds what is published") {
    ConcurrentDynArray<std::uint64_t> none;
    CHECK(none.try_get(0) == nullptr);
    CHECK(none.append_with(0, [](std::size_t) noexcept { return std::uint64_t{1}; }) == 0);
    CHECK_THROWS_AS(none.append_with(1, [](std::size_t) noexcept { return std::uint64_t{1}; }),
                    std::length_error);

    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100)};
    const auto triple = [](std::size_t i) noexcept { return std::uint64_t{3} * i + 1; };
    CHECK(a.append_with(10, triple) == 0);
    CHECK(a.append_with(0, triple) == a.max_size());  // claims nothing
    CHECK(a.size() == 10);
    for (std::size_t i = 0; i < 10; ++i) {
      CHECK(a[i] == 3 * i + 1);
      CHECK(a.try_get(i) == &a[i]);
    }
    CHECK(a.try_get(10) == nullptr);
    CHECK(a.try_get(a.max_size()) == nullptr);
    CHECK(a.try_get(~std::size_t{0}) == nullptr);

    // Blocks that finish while an earlier index is still being constructed (appended from inside
    // that construction): append_with's elements are each found by try_get before size() passes
    // them; an append_range block's first element is, its others only once size() passes them.
    std::size_t outer = 0;
    bool found_own = true, found_inner = false, found_range_first = false, found_range_rest = true;
    std::size_t size_inside = 0;
    CHECK(a.emplace_back_with([&](std::size_t i) noexcept {
      outer = i;
      const std::size_t inner = a.append_with(4, triple);
      const std::vector<std::uint64_t> block(4, 77);
      const std::size_t range = a.append_range(block);
      found_own = a.try_get(i) != nullptr;
      found_inner = true;
      for (std::size_t k = inner; k < inner + 4; ++k)
        found_inner = found_inner && a.try_get(k) != nullptr && *a.try_get(k) == 3 * k + 1;
      found_range_first = a.try_get(range) != nullptr && *a.try_get(range) == 77;
      found_range_rest = a.try_get(range + 1) != nullptr;
      size_inside = a.size();
      return std::uint64_t{5};
    }) == 10);
    CHECK(outer == 10);
    CHECK_FALSE(found_own);  // not constructed yet
    CHECK(found_inner);
    CHECK(found_range_first);
    CHECK_FALSE(found_range_rest);
    CHECK(size_inside == 10);  // the prefix waited for the outer element
    CHECK(a.size() == 19);
    CHECK(a[10] == 5);
    for (std::size_t i = 0; i < 19; ++i)
      CHECK(a.try_get(i) == &a[i]);

    // All-or-nothing at the limit, as append_range.
    CHECK_THROWS_AS(a.append_with(82, triple), std::length_error);
    CHECK(a.size() == 19);
    CHECK(a.append_with(81, triple) == 19);
    CHECK(a.size() == 100);
    CHECK(a[99] == 3 * 99 + 1);
  }

  TEST_CASE("a throwing copy inside a block claims nothing: no hole, array still usable") {
    ConcurrentDynArray<Picky> a{reservoir::max_elements(1000)};
    std::vector<Picky> ok, poisoned;  // (an initializer list would copy)
    for (std::uint64_t v : {1, 2, 3})
      ok.emplace_back(v);
    for (std::uint64_t v : {8, 14, 9})  // copying the second throws
      poisoned.emplace_back(v);
    CHECK(a.append_range(ok) == 0);
    CHECK_THROWS_AS(a.append_range(poisoned), std::runtime_error);
    CHECK(a.size() == 3);
    CHECK(a.append_range(ok) == 3);  // indices continue with no gap
    CHECK_THROWS_AS(a.push_back(Picky(8) = Picky(21)), std::runtime_error);  // copy throws
    for (Picky& p : poisoned)                                                // moving never throws
      a.push_back(std::move(p));
    CHECK(a.size() == 9);
    for (std::size_t i = 0; i < a.size(); ++i)
      CHECK(a[i].v != 0);
  }

  TEST_CASE("a Writer of a type without assignment: a partial flush keeps the rest in order") {
    struct Fixed {  // nothrow movable, neither copy- nor move-assignable
      const int v;
      explicit Fixed(int x) noexcept : v(x) {}
    };
    static_assert(!std::is_move_assignable_v<Fixed>);
    ConcurrentDynArray<Fixed> a{reservoir::max_elements(10)};
    CHECK(a.emplace_back(0) == 0);  // the array's own appends need no assignment either
    auto w = a.writer();
    for (int v = 1; v <= 10; ++v)  // the writer's block is the array's size, 10: no flush yet
      w.emplace_back(v);
    CHECK(w.buffered() == 10);
    try {
      (void)w.flush();
      FAIL("a flush past max_size() must throw");
    } catch (const std::length_error& e) {
      // The message says what went where.
      CHECK(std::string(e.what()).find("appended 9 of 10 buffered elements at index 1") !=
            std::string::npos);
    }
    CHECK(a.size() == 10);
    CHECK(w.buffered() == 1);
    for (int i = 0; i < 10; ++i)
      CHECK(a[static_cast<std::size_t>(i)].v == i);
    CHECK_THROWS_AS((void)w.flush(), std::length_error);     // still full: nothing moves
    CHECK_THROWS_AS(w.emplace_back(11), std::length_error);  // its flush throws: not added
    CHECK(w.buffered() == 1);
    CHECK(a.size() == 10);
  }

  TEST_CASE("append_range from a range whose iterator throws claims nothing") {
    // A forward range (not contiguous) whose dereference throws on a negative element and
    // otherwise yields ten times the element.
    struct Scaled {
      struct iterator {
        using value_type = int;
        using difference_type = std::ptrdiff_t;
        const int* p = nullptr;
        int operator*() const {
          if (*p < 0) throw std::runtime_error("bad element");
          return *p * 10;
        }
        iterator& operator++() {
          ++p;
          return *this;
        }
        iterator operator++(int) {
          iterator old = *this;
          ++p;
          return old;
        }
        bool operator==(const iterator&) const = default;
      };
      const std::vector<int>* v;
      iterator begin() const { return {v->data()}; }
      iterator end() const { return {v->data() + v->size()}; }
    };
    static_assert(std::ranges::forward_range<Scaled> && !std::ranges::contiguous_range<Scaled>);
    ConcurrentDynArray<int> a{reservoir::max_elements(100)};
    const std::vector<int> bad = {1, 2, -3, 4};
    CHECK_THROWS_AS((void)a.append_range(Scaled{&bad}), std::runtime_error);
    CHECK(a.size() == 0);  // no claimed, unpublished index holds the prefix back
    CHECK(a.push_back(7) == 0);
    CHECK(a.size() == 1);
    const std::vector<int> ok = {1, 2, 3};
    CHECK(a.append_range(Scaled{&ok}) == 1);
    CHECK(a.append_range(ok) == 4);  // contiguous: built in place
    CHECK(a.size() == 7);
    CHECK(a[3] == 30);
    CHECK(a[6] == 3);
  }

  TEST_CASE("a Writer: buffered until flush, one block of consecutive indices, then visible") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    auto w = a.writer();
    for (std::uint64_t v = 1; v <= 10; ++v)
      w.push_back(v);
    CHECK(w.buffered() == 10);
    CHECK(a.size() == 0);          // the writer's alone until flushed
    CHECK(a.push_back(100) == 0);  // the array's own appends are not held back
    CHECK(w.flush() == 1);         // the block's first index
    CHECK(w.buffered() == 0);
    CHECK(a.size() == 11);
    CHECK(a[1] == 1);
    CHECK(a[10] == 10);
    CHECK(w.flush() == a.max_size());  // nothing buffered
    // The buffer fills and flushes by itself; blocks grow (16, 32, ...), so after 1000 appends at
    // most one block is held back.
    for (std::uint64_t v = 11; v <= 1010; ++v)
      w.push_back(v);
    CHECK(a.size() >= 11 + 1000 - 512);
    CHECK(a.size() + w.buffered() == 1011);
    {
      auto moved = std::move(w);  // takes the buffer; w stays usable, empty
      CHECK(w.buffered() == 0);
      w.push_back(5000);
    }  // moved's destructor publishes
    CHECK(a.size() + w.buffered() == 1012);
    w.flush();
    CHECK(a.size() == 1012);
    for (std::uint64_t i = 1; i < 1011; ++i)
      REQUIRE(a[i] == i);
    CHECK(a[1011] == 5000);
  }

  TEST_CASE("Writer::reserve: the next n appends flush nothing; one flush appends them in order") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100'000)};
    auto w = a.writer();
    w.reserve(0);  // nothing to make room for: no buffer yet either
    w.reserve(5000);
    for (std::uint64_t v = 0; v < 5000; ++v)
      w.push_back(v);
    CHECK(a.size() == 0);  // 5000 buffered: without reserve the 16th append would have flushed
    CHECK(w.buffered() == 5000);
    CHECK(w.flush() == 0);  // one block
    CHECK(a.size() == 5000);
    // Later buffers are at least as long: the next 5000 stay buffered too.
    for (std::uint64_t v = 5000; v < 10'000; ++v)
      w.push_back(v);
    CHECK(a.size() == 5000);
    CHECK(w.flush() == 5000);
    // With elements buffered: room for n more after them, the buffered ones kept in order.
    for (std::uint64_t v = 10'000; v < 10'010; ++v)
      w.push_back(v);
    w.reserve(20'000);
    CHECK(w.buffered() == 10);
    for (std::uint64_t v = 10'010; v < 30'010; ++v)
      w.push_back(v);
    CHECK(a.size() == 10'000);
    CHECK(w.flush() == 10'000);
    CHECK(a.size() == 30'010);
    for (std::uint64_t i = 0; i < a.size(); ++i)
      REQUIRE(a[i] == i);
    // More than the array could ever hold: refused, nothing changed.
    w.push_back(1);
    CHECK_THROWS_AS(w.reserve(a.max_size()), std::length_error);
    CHECK_THROWS_AS(w.reserve(std::numeric_limits<std::size_t>::max()), std::length_error);
    CHECK(w.buffered() == 1);
    // buffered() + n == max_size(): accepted (the bound is max_size(), not the room left).
    w.reserve(a.max_size() - 1);
    CHECK(w.flush() == 30'010);
    // Moved from, a writer keeps nothing and reserves again (more than its first buffer of 16
    // would hold); the one moved to keeps the buffer.
    w.reserve(100);
    w.push_back(30'011);
    auto moved = std::move(w);
    CHECK(w.buffered() == 0);
    CHECK(moved.buffered() == 1);
    w.reserve(100);
    for (std::uint64_t v = 0; v < 100; ++v)
      w.push_back(v);
    CHECK(a.size() == 30'011);  // the moved-from writer's 100 stay buffered
    CHECK(w.buffered() == 100);
    CHECK(w.flush() == 30'011);
    CHECK(moved.flush() == 30'111);
    CHECK(a.size() == 30'112);
    CHECK(a[30'110] == 99);
    CHECK(a[30'111] == 30'011);
    // A partial flush at the limit leaves moved-from elements before the rest: reserve keeps the
    // rest, in order, and a writer of an array with no reservation refuses any room.
    ConcurrentDynArray<std::uint64_t> small{reservoir::max_elements(8)};
    auto s = small.writer();
    s.reserve(8);
    for (std::uint64_t v = 0; v < 8; ++v)
      s.push_back(v);
    CHECK(small.push_back(100) == 0);
    CHECK_THROWS_AS(s.flush(), std::length_error);  // 7 of 8 fit
    CHECK(s.buffered() == 1);
    CHECK_THROWS_AS(s.reserve(8), std::length_error);
    s.reserve(7);
    CHECK(s.buffered() == 1);
    CHECK(s.take_buffered() == std::vector<std::uint64_t>{7});
    // After a partial flush, room asked for within the block keeps the block: the buffer is
    // never shorter than a reserve made before.
    ConcurrentDynArray<std::uint64_t> part{reservoir::max_elements(100)};
    for (std::uint64_t v = 0; v < 55; ++v)
      part.push_back(v);
    auto p = part.writer();
    p.reserve(50);
    for (std::uint64_t v = 55; v < 105; ++v)
      p.push_back(v);
    CHECK_THROWS_AS(p.flush(), std::length_error);  // 45 of 50 fit
    CHECK(part.size() == 100);
    CHECK(p.buffered() == 5);
    p.reserve(10);
    for (std::uint64_t v = 105; v < 150; ++v)  // 50 buffered: no flush (the array is full)
      CHECK_NOTHROW(p.push_back(v));
    CHECK(p.buffered() == 50);
    const std::vector<std::uint64_t> kept = p.take_buffered();
    REQUIRE(kept.size() == 50);
    for (std::size_t i = 0; i < kept.size(); ++i)
      REQUIRE(kept[i] == 100 + i);
    ConcurrentDynArray<std::uint64_t> none;
    auto n = none.writer();
    CHECK_THROWS_AS(n.reserve(1), std::length_error);
    n.reserve(0);
    CHECK(n.buffered() == 0);
  }

  TEST_CASE("a Writer at the reservation limit: what fits is appended, the rest stays buffered") {
    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(100)};
    for (std::uint64_t v = 1; v <= 90; ++v)
      a.push_back(v);
    auto w = a.writer();
    for (std::uint64_t v = 91; v <= 105; ++v)  // 15 buffered, 10 fit
      w.push_back(v);
    CHECK_THROWS_AS(w.flush(), std::length_error);
    CHECK(a.size() == 100);
    CHECK(a[99] == 100);
    CHECK(w.buffered() == 5);
    CHECK_THROWS_AS(w.flush(), std::length_error);  // still full: keeps them
    CHECK(w.buffered() == 5);
    CHECK(a.size() == 100);
    // A block never outgrows the array: a writer of a tiny array flushes at its size. Errors
    // come from flushes: an element buffered while the array is already full stays buffered.
    ConcurrentDynArray<std::uint64_t> tiny{reservoir::max_elements(3)};
    auto t = tiny.writer();
    t.push_back(1);
    t.push_back(2);
    t.push_back(3);
    CHECK(tiny.size() == 0);
    t.push_back(4);  // flushes 1, 2, 3 first
    CHECK(tiny.size() == 3);
    CHECK(t.buffered() == 1);
    CHECK_THROWS_AS(t.flush(), std::length_error);
    CHECK(t.buffered() == 1);
  }  // the destructors drop what does not fit, without throwing

  TEST_CASE("a throwing constructor inside a Writer's block adds nothing; the block goes on") {
    ConcurrentDynArray<Picky> a{reservoir::max_elements(1000)};
    {
      auto w = a.writer();
      for (std::uint64_t v = 1; v <= 40; ++v) {
        const Picky p(v);
        if (v % 7 == 0)
          CHECK_THROWS_AS(w.push_back(p), std::runtime_error);  // copying throws
        else
          w.push_back(p);
      }
      CHECK(w.buffered() + a.size() == 35);
    }
    CHECK(a.size() == 35);
    std::uint64_t expected = 1;
    for (const Picky& p : a.published()) {
      if (expected % 7 == 0) ++expected;
      REQUIRE(p.v == expected);
      ++expected;
    }
  }

  TEST_CASE("hostile element types: every member compiles and behaves") {
    every_member<concurrent_hostile::Amp>();
    every_member<concurrent_hostile::Comma>();
    every_member<concurrent_hostile::MayThrow>();
  }

  TEST_CASE("a 16 MiB element is appended without a copy on the stack") {
    // A thread's default stack is 8 MiB: a 16 MiB value built or copied on it would crash.
    struct Big {
      std::array<unsigned char, 16 << 20> b;
    };
    struct BigMayThrow {
      std::array<unsigned char, 16 << 20> b;
      BigMayThrow() noexcept(false) { b[0] = 7; }
    };
    std::size_t sizes[3] = {};
    std::thread t([&] {
      ConcurrentDynArray<Big> a(reservoir::max_elements(8));
      a.emplace_back();
      const auto value = std::make_unique<Big>();
      value->b[1] = 9;
      a.push_back(*value);
      (void)a.try_emplace_back(*value);
      a.emplace_back_with([](std::size_t) noexcept { return Big{}; });
      sizes[0] = a.size();
      sizes[1] = a[1].b[1];
      ConcurrentDynArray<BigMayThrow> m(reservoir::max_elements(2));
      m.emplace_back();  // built on the heap, then moved into place
      (void)m.try_emplace_back();
      sizes[2] = m.size() * 10 + m[1].b[0];
    });
    t.join();
    CHECK(sizes[0] == 4);
    CHECK(sizes[1] == 9);
    CHECK(sizes[2] == 27);
  }

  TEST_CASE("elements aligned past a page, and to a cache line") {
    struct alignas(8192) Page2 {
      int v = 0;
    };
    struct alignas(64) Line {
      int v = 0;
    };
    auto aligned = [](const auto& a) {
      using E = typename std::remove_cvref_t<decltype(a)>::value_type;
      return reinterpret_cast<std::uintptr_t>(a.data()) % alignof(E) == 0;
    };
    ConcurrentDynArray<Page2> p(reservoir::max_elements(64));
    for (int i = 0; i < 40; ++i)
      p.push_back(Page2{i});
    CHECK(aligned(p));
    CHECK(reinterpret_cast<std::uintptr_t>(&p[39]) % 8192 == 0);
    ConcurrentDynArray<Page2> moved(std::move(p));
    CHECK(aligned(moved));
    CHECK(moved[39].v == 39);
    ConcurrentDynArray<Line> l(reservoir::max_elements(10'000));
    for (int i = 0; i < 5000; ++i)
      l.push_back(Line{i});
    CHECK(aligned(l));
    CHECK(l[4999].v == 4999);
  }

  TEST_CASE("a Writer never loses elements silently: flush throws, take_buffered, dropped()") {
    // Explicitly: the flush that cannot append throws, the rest stays buffered and comes back.
    ConcurrentDynArray<int> a{reservoir::max_elements(10)};
    {
      auto w = a.writer();
      for (int i = 0; i < 15; ++i)
        w.push_back(i);  // the 11th flushes the first 10
      CHECK(a.size() == 10);
      CHECK(w.buffered() == 5);
      CHECK_THROWS_AS(w.flush(), std::length_error);
      CHECK(w.buffered() == 5);
      const std::vector<int> rest = w.take_buffered();
      CHECK(rest == std::vector<int>{10, 11, 12, 13, 14});
      CHECK(w.buffered() == 0);
    }
    CHECK(a.dropped() == 0);
    for (int i = 0; i < 10; ++i)
      CHECK(a[static_cast<std::size_t>(i)] == i);

    // Reported, then destroyed: the program knew (the flush threw); the loss is counted.
    ConcurrentDynArray<int> b{reservoir::max_elements(10)};
    {
      auto w = b.writer();
      for (int i = 0; i < 15; ++i)
        w.push_back(i);
      CHECK_THROWS_AS(w.flush(), std::length_error);
    }
    CHECK(b.size() == 10);
    CHECK(b.dropped() == 5);
    ConcurrentDynArray<int> moved(std::move(b));  // the count moves with the elements
    CHECK(moved.dropped() == 5);
    CHECK(b.dropped() == 0);

    // Never reported: the default writer stops the program in every build, naming the array,
    // the count and why; one made with WriterLoss::count counts the loss.
    const test::ProcessResult r = test::run_child("concurrent.writer_drops_unreported");
    MESSAGE(test::describe(r) << ": " << r.output);
    CHECK_MESSAGE(aborted(r), test::describe(r));  // SIGABRT; Windows' abort() exits with 3
    CHECK(r.output.find("reservoir::ConcurrentDynArray::~Writer: 5 buffered elements could not "
                        "be appended to the array at " +
                        array_address(r.output) +
                        ": full at max_size() 10. No flush() had "
                        "reported it") != std::string::npos);
    CHECK(r.output.find("writer(reservoir::WriterLoss::count)") != std::string::npos);
    CHECK(r.output.find("\ndropped ") == std::string::npos);
    const test::ProcessResult counted =
        test::run_child("concurrent.writer_drops_unreported_counted");
    MESSAGE(test::describe(counted) << ": " << counted.output);
    CHECK(counted.exited);
    CHECK(counted.exit_code == 0);
    CHECK(counted.output.find("dropped 5 size 10") != std::string::npos);
    CHECK(counted.output.find("~Writer") == std::string::npos);  // the library printed nothing
    // Told about one element, then another buffered: the second one is not covered by the first
    // report, so its loss is treated as never reported.
    const test::ProcessResult after =
        test::run_child("concurrent.writer_drops_one_unreported_after_told");
    MESSAGE(test::describe(after) << ": " << after.output);
    CHECK_MESSAGE(aborted(after), test::describe(after));
    CHECK(after.output.find("\ndropped ") == std::string::npos);  // not its own line
    CHECK(after.output.find("~Writer: 1 buffered element could not be appended to the array at " +
                            array_address(after.output) + ": full at max_size() 4.") !=
          std::string::npos);
    const test::ProcessResult after_counted =
        test::run_child("concurrent.writer_drops_one_unreported_after_told_counted");
    MESSAGE(test::describe(after_counted) << ": " << after_counted.output);
    CHECK(after_counted.exited);
    CHECK(after_counted.output.find("dropped 2 size 4") != std::string::npos);
    // A refused commit: the message carries the refusal.
    const test::ProcessResult refused = test::run_child("concurrent.writer_drops_refused");
    MESSAGE(test::describe(refused) << ": " << refused.output);
    CHECK_MESSAGE(aborted(refused), test::describe(refused));
    CHECK(refused.output.find("~Writer: 3 buffered elements could not be appended to the array "
                              "at " +
                              array_address(refused.output) + ": cannot commit ") !=
          std::string::npos);
  }

  TEST_CASE("operator[] past size() stops a debug build, as DynArray's does") {
#if defined(NDEBUG)
    MESSAGE("NDEBUG: assertions are off, as for DynArray's operator[]");
#else
    const test::ProcessResult r = test::run_child("concurrent.index_past_size");
    CHECK_MESSAGE(aborted(r), test::describe(r));
    std::string out = r.output;  // without the \r of Windows' text mode
    out.erase(std::remove(out.begin(), out.end(), '\r'), out.end());
    CHECK(out == "2\n");  // the valid read ran, the one past size() did not
#endif
  }

  // Every length error names the user's call; a default-constructed array says what it needs.
  TEST_CASE("ConcurrentDynArray: errors name the user's call") {
    auto message = [](auto&& f) {
      try {
        f();
      } catch (const std::length_error& e) {
        return std::string("length_error ") + e.what();
      } catch (const reservoir::OsAllocationError& e) {
        return std::string("OsAllocationError ") + e.what();
      } catch (const std::system_error& e) {
        return std::string("system_error ") + e.what();
      }
      return std::string("nothing thrown");
    };
    const std::string prefix = "length_error reservoir::ConcurrentDynArray::";
    const std::string none =
        ": full at max_size() 0: a default-constructed or moved-from ConcurrentDynArray has no "
        "reservation; construct it with reservoir::max_elements(n) (or move-assign such an array "
        "into it)";
    const std::vector<int> one{9};
    const std::deque<int> one_deque{9};
    ConcurrentDynArray<int> empty;
    CHECK(message([&] { empty.push_back(9); }) == prefix + "push_back/emplace_back" + none);
    CHECK(message([&] { empty.emplace_back(9); }) == prefix + "push_back/emplace_back" + none);
    CHECK(message([&] {
            empty.emplace_back_with([](std::size_t i) noexcept { return static_cast<int>(i); });
          }) == prefix + "emplace_back_with" + none);
    CHECK(message([&] { empty.append_range(one); }) == prefix + "append_range" + none);
    CHECK(message([&] { empty.append_range(one_deque); }) == prefix + "append_range" + none);
    CHECK(message([&] {
            auto w = empty.writer();
            w.push_back(9);
          }) == prefix + "Writer::push_back/emplace_back" + none);
    ConcurrentDynArray<std::string> strings;  // a constructor that may throw: built aside first
    CHECK(message([&] { strings.emplace_back("s"); }) == prefix + "push_back/emplace_back" + none);
    ConcurrentDynArray<int> real{reservoir::max_elements(4)};
    ConcurrentDynArray<int> moved_from{reservoir::max_elements(4)};
    real = std::move(moved_from);
    CHECK(message([&] { moved_from.push_back(9); }) == prefix + "push_back/emplace_back" + none);

    ConcurrentDynArray<int> a{reservoir::max_elements(4)};
    a.append_range(std::vector<int>{0, 1});
    {
      auto w = a.writer();
      for (int i = 2; i < 6; ++i)
        w.push_back(i);
      CHECK(message([&] { (void)w.flush(); }) ==
            prefix +
                "Writer::flush: full at max_size() 4: appended 2 of 4 buffered elements at index "
                "2, the rest stay buffered");
      CHECK(message([&] { (void)w.flush(); }) == prefix + "Writer::flush: full at max_size() 4");
      CHECK(message([&] {
              w.push_back(6);
              w.push_back(7);
              w.push_back(8);  // the buffer of 4 is full: this one flushes
            }) == prefix + "Writer::push_back/emplace_back: full at max_size() 4");
      (void)w.take_buffered();
    }
    const std::string full = ": full at max_size() 4";
    CHECK(message([&] { a.push_back(9); }) == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] { a.emplace_back(9); }) == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] {
            a.emplace_back_with([](std::size_t i) noexcept { return static_cast<int>(i); });
          }) == prefix + "emplace_back_with" + full);
    CHECK(message([&] { a.append_range(one); }) == prefix + "append_range" + full);
    CHECK(message([&] { a.append_range(one_deque); }) == prefix + "append_range" + full);
    // From another thread (which ends solo mode where there is one), then shared: the same words.
    std::string from_other;
    std::thread other([&] { from_other = message([&] { a.push_back(9); }); });
    other.join();
    CHECK(from_other == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] { a.push_back(9); }) == prefix + "push_back/emplace_back" + full);
    CHECK(message([&] { a.append_range(one); }) == prefix + "append_range" + full);
    CHECK(a.size() == 4);

    // A refused commit: the arena's own words (what, how much, where, the OS's reason).
    reservoir::ArenaOptions o;
    o.reuse_reservation = false;  // nothing committed: the first append commits
    ConcurrentDynArray<int> b{reservoir::max_elements(1000), o};
    {
      test::FaultGuard fault(pal::Op::commit, 0, 100);
      CHECK(message([&] { b.push_back(1); }).starts_with("OsAllocationError cannot commit "));
      CHECK(message([&] { b.append_range(one); }).starts_with("OsAllocationError cannot commit "));
    }
    // Shared mode: a one-index claim past capacity whose commit is refused closes the claims,
    // and what it throws names the call and the index.
    ConcurrentDynArray<int> d{reservoir::max_elements(1'000'000), o};
    d.push_back(0);
    std::thread second_appender([&] { d.push_back(1); });  // ends solo mode where there is one
    second_appender.join();
    {
      test::FaultGuard fault(pal::Op::commit, 0, 1'000'000);
      std::string refused = message([&] {
        for (;;)
          d.push_back(2);
      });
      const std::size_t at = d.size();
      CHECK(refused.starts_with("OsAllocationError cannot commit "));
      CHECK(
          refused.ends_with(". reservoir::ConcurrentDynArray::push_back/emplace_back needed it "
                            "for index " +
                            std::to_string(at) + "; nothing was appended"));
      refused = message(
          [&] { d.emplace_back_with([](std::size_t i) noexcept { return static_cast<int>(i); }); });
      CHECK(
          refused.ends_with(". reservoir::ConcurrentDynArray::emplace_back_with needed it for "
                            "index " +
                            std::to_string(at) + "; nothing was appended"));
      CHECK(d.size() == at);
    }
    // A refused barrier names the call of the second thread.
    if (pal::process_barrier_supported()) {
      ConcurrentDynArray<int> c{reservoir::max_elements(100)};
      c.push_back(1);  // this thread owns solo mode
      test::FaultGuard refuse(pal::Op::barrier, 0, 100);
      std::string barrier;
      std::thread second([&] { barrier = message([&] { c.append_range(one); }); });
      second.join();
      CHECK(
          barrier.starts_with("system_error reservoir::ConcurrentDynArray::append_range: a "
                              "second appending thread needs a process-wide memory barrier"));
    }
  }

  // std::ranges' algorithms where the standard library has them (libc++ gained them in 15); the
  // same checks through the range's iterators elsewhere.
#if defined(__cpp_lib_ranges)
  namespace range_algo = std::ranges;
#else
  namespace range_algo {
  template <class R, class V>
  auto count(R&& r, const V& v) {
    return std::count(std::begin(r), std::end(r), v);
  }
  template <class I, class V>
  auto count(I first, I last, const V& v) {
    return std::count(first, last, v);
  }
  template <class R, class V>
  auto find(R&& r, const V& v) {
    return std::find(std::begin(r), std::end(r), v);
  }
  template <class I, class V>
  auto find(I first, I last, const V& v) {
    return std::find(first, last, v);
  }
  template <class A, class B>
  bool equal(A&& a, B&& b) {
    return std::equal(std::begin(a), std::end(a), std::begin(b), std::end(b));
  }
  }  // namespace range_algo
#endif

  TEST_CASE("the array is a range over its published prefix: range-for, std::ranges algorithms") {
    static_assert(std::ranges::random_access_range<ConcurrentDynArray<int>>);
    static_assert(std::ranges::contiguous_range<const ConcurrentDynArray<int>>);
    ConcurrentDynArray<int> empty;  // no reservation: an empty range
    CHECK(empty.begin() == empty.end());
    CHECK(range_algo::count(empty, 0) == 0);
    ConcurrentDynArray<int> moved_from{reservoir::max_elements(4)};
    ConcurrentDynArray<int> target(std::move(moved_from));
    CHECK(moved_from.begin() == moved_from.end());

    ConcurrentDynArray<std::uint64_t> a{reservoir::max_elements(1'000'000)};
    const std::vector<std::uint64_t> same{1, 2, 3, 2, 1};  // std::vector: the same answers
    for (std::uint64_t v : same)
      a.push_back(v);
    std::uint64_t sum = 0;
    for (std::uint64_t v : a)
      sum += v;
    CHECK(sum == 9);
    CHECK(range_algo::count(a, 2u) == range_algo::count(same, 2u));
    CHECK(range_algo::find(a, 3u) - a.begin() == range_algo::find(same, 3u) - same.begin());
    CHECK(range_algo::find(a, 7u) == a.end());
    CHECK(range_algo::equal(a, same));

    // While 2 threads append: each snapshot holds only published, whole values, in order per
    // thread, and a value found is one that was appended.
    ConcurrentDynArray<std::uint64_t> b{reservoir::max_elements(1'000'000)};
    std::atomic<bool> stop{false};
    std::vector<std::thread> appenders;
    for (std::uint64_t t = 1; t <= 2; ++t) {
      appenders.emplace_back([&b, &stop, t] {
        for (std::uint64_t s = 1; s <= stress_scale(200'000) && !stop.load(); ++s)
          b.push_back(encode(t, s));
      });
    }
    for (int scan = 0; scan < 50; ++scan) {
      const auto first = b.begin(), last = b.end();
      CHECK(range_algo::count(first, last, std::uint64_t{0}) == 0);  // no hole in the snapshot
      // Within the same snapshot: a second end() may be further on, past an element that is not
      // the one looked for.
      const auto it = range_algo::find(first, last, encode(1, 1));
      CHECK((it == last || *it == encode(1, 1)));
    }
    stop = true;
    for (auto& t : appenders)
      t.join();
    CHECK(static_cast<std::size_t>(std::distance(b.begin(), b.end())) == b.size());
    require_no_hole_no_duplicate(b);
  }
}
