// Tests of <reservoir/pal.hpp>: the OS layer, its errors, its statistics, its failure seam.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

#include <reservoir/pal.hpp>

#if defined(__APPLE__)
#include <TargetConditionals.h>
#endif

#include "support.hpp"

namespace pal = reservoir::pal;

namespace {

using test::kMiB;

// Reserves, and releases at scope exit.
struct Reservation {
  explicit Reservation(std::size_t n) : size(n) {
    REQUIRE_FALSE(pal::reserve(size, &base));
    REQUIRE(base != nullptr);
  }
  ~Reservation() { CHECK_FALSE(pal::release(base, size)); }
  unsigned char* bytes() const { return static_cast<unsigned char*>(base); }
  void* base = nullptr;
  std::size_t size;
};

// Writes a byte every 4 KiB, the smallest page of any supported OS: every page is touched even
// when page_size() is forced larger than the OS's.
void touch(unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 4096)
    p[i] = 1;
}

}  // namespace

#if defined(__linux__)
constexpr bool kLinux = true;
#else
constexpr bool kLinux = false;
#endif

TEST_SUITE("pal") {
  TEST_CASE("transparent huge pages and free page reporting are read from sysfs") {
    // An independent reading (every virtio device, in directory order) of what pal reads once.
    bool thp = false, reporting = false;
#if defined(__linux__)
    auto first_line = [](const std::filesystem::path& p) {
      std::ifstream f(p);
      std::string line;
      std::getline(f, line);
      return line;
    };
    const std::string mode = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
    thp = mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
    std::error_code ec;
    for (const auto& dev : std::filesystem::directory_iterator("/sys/bus/virtio/devices", ec)) {
      const std::string id = first_line(dev.path() / "device");
      const std::string features = first_line(dev.path() / "features");
      if (!id.empty() && std::stol(id, nullptr, 0) == 5 && features.size() > 5 &&
          features[5] == '1') {
        reporting = true;
      }
    }
    // The posix-generic build (the macOS/FreeBSD paths, which decommit by re-mapping) reads
    // neither.
    if (pal::testing::decommit_remaps()) thp = reporting = false;
#endif
    CHECK(pal::transparent_huge_pages() == thp);
    CHECK(pal::host_reclaims_free_pages() == reporting);
    // A test that forces the THP answer also rules out a reclaiming host.
    pal::testing::set_transparent_huge_pages(1);
    CHECK(pal::transparent_huge_pages());
    CHECK_FALSE(pal::host_reclaims_free_pages());
    pal::testing::set_transparent_huge_pages(-1);
    CHECK(pal::host_reclaims_free_pages() == reporting);
  }

#if defined(__linux__)
  TEST_CASE("the machine's memory and the resident set are read from /proc") {
    // An independent reading of the "Key:   123 kB" lines pal reads (every Linux build).
    auto kib = [](const char* path, const std::string& key) {
      std::ifstream f(path);
      std::string line;
      while (std::getline(f, line)) {
        if (line.compare(0, key.size() + 1, key + ":") == 0) {
          return std::stoull(line.substr(key.size() + 1)) * 1024;
        }
      }
      return 0ull;
    };
    pal::MachineMemory m;
    REQUIRE(pal::machine_memory(&m));
    // Totals do not change while the test runs; what is free does.
    CHECK(m.total == kib("/proc/meminfo", "MemTotal"));
    CHECK(m.total > 0);
    CHECK(m.swap_total == kib("/proc/meminfo", "SwapTotal"));
    CHECK(m.available > 0);
    CHECK(m.available <= m.total);
    CHECK(m.swap_free <= m.swap_total);
    std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
    int mode = -1;
    if (overcommit >> mode) {
      CHECK(m.overcommit == mode);
    }
    // The resident set: between two independent readings, give or take the pages in between.
    const std::size_t before = kib("/proc/self/status", "VmRSS");
    const std::size_t rss = pal::current_rss();
    const std::size_t after = kib("/proc/self/status", "VmRSS");
    CHECK(rss > 0);
    CHECK(rss + 4 * kMiB >= std::min(before, after));
    CHECK(rss <= std::max(before, after) + 4 * kMiB);
  }
#endif

  TEST_CASE("page size and allocation granularity come from the OS") {
    const std::size_t page = pal::page_size();
    CHECK(page >= 4096);
    CHECK((page & (page - 1)) == 0);
    CHECK(pal::allocation_granularity() >= page);
    CHECK(pal::allocation_granularity() % page == 0);
#if defined(_WIN32)
    CHECK(pal::allocation_granularity() == 65536);
#endif
  }

  // 64-bit systems whose user space is far larger than 64 GiB (not iOS and its kin: 63 GiB).
#if defined(__APPLE__) && !TARGET_OS_OSX
  static constexpr bool kLargeUserSpace = false;
#else
  static constexpr bool kLargeUserSpace = sizeof(void*) >= 8;
#endif

  TEST_CASE("the address space counted holds the stack and the mappings made") {
    // The budget of default arrays is half of it: counting too little (a stack far below the top
    // of user space, as on Darwin arm64) would shrink every default array's reservation.
    int probe = 0;
    const auto stack = reinterpret_cast<std::uintptr_t>(&probe);
    const std::size_t size = pal::address_space_size();
    CAPTURE(size);
    if (pal::AddressSpaceLimit l; !pal::address_space_limit(&l) && !kThreadSanitizer) {
      if (kLargeUserSpace) CHECK(size >= std::size_t{1} << 36);
      CHECK(stack < size);
      Reservation r(pal::allocation_granularity());
      CHECK(reinterpret_cast<std::uintptr_t>(r.base) < size);
    }
  }

  TEST_CASE("under ThreadSanitizer at most 1 TiB of address space is counted") {
    // TSan's application ranges hold about 2 TiB: counting 1 TiB keeps the budget (half of what
    // is counted, unless set by hand) well inside them.
    if (!kThreadSanitizer) {
      MESSAGE("not a ThreadSanitizer build: the whole address space is counted");
      return;
    }
    CHECK(pal::address_space_size() <= std::size_t{1} << 40);
  }

  TEST_CASE("reserve, commit, write, decommit, commit again reads zeros") {
    const std::size_t page = pal::page_size();
    Reservation r(pal::allocation_granularity() * 4);
    CHECK(reinterpret_cast<std::uintptr_t>(r.base) % pal::allocation_granularity() == 0);
    REQUIRE_FALSE(pal::commit(r.base, 2 * page));
    std::memset(r.base, 0xAB, 2 * page);
    CHECK(r.bytes()[2 * page - 1] == 0xAB);
    // Committing again keeps contents.
    REQUIRE_FALSE(pal::commit(r.base, 2 * page));
    CHECK(r.bytes()[0] == 0xAB);
    REQUIRE_FALSE(pal::decommit(r.bytes() + page, page));
    REQUIRE_FALSE(pal::commit(r.bytes() + page, page));
    CHECK(r.bytes()[0] == 0xAB);  // the first page was not decommitted
    for (std::size_t i = page; i < 2 * page; ++i)
      REQUIRE(r.bytes()[i] == 0);
  }

  TEST_CASE("an impossible reservation is refused with the OS's error") {
    void* p = nullptr;
    // More than any 64-bit address space (or any 32-bit one).
    const std::size_t huge = sizeof(void*) >= 8 ? (std::size_t{1} << 62) : (std::size_t{3} << 30);
    std::error_code ec = pal::reserve(huge, &p);
    REQUIRE(ec);
    CHECK(p == nullptr);
    CHECK_FALSE(pal::describe(ec).empty());
  }

  TEST_CASE("error descriptions name the error") {
    std::error_code oom = pal::testing::out_of_memory_error();
    CHECK(oom.category() == pal::os_category());
    CHECK(oom == std::errc::not_enough_memory);
    const std::string text = pal::describe(oom);
#if defined(_WIN32)
    CHECK(text.find("ERROR_NOT_ENOUGH_MEMORY") != std::string::npos);
#else
    CHECK(text == "Cannot allocate memory (ENOMEM)");
#endif
    CHECK(text.find('\n') == std::string::npos);
  }

  TEST_CASE("the failure seam fails the chosen call, counts calls, then disarms") {
    Reservation r(pal::allocation_granularity());
    const std::uint64_t before = pal::testing::calls(pal::Op::commit);
    {
      test::FaultGuard fault(pal::Op::commit, /*skip=*/1, /*count=*/2);
      CHECK_FALSE(pal::commit(r.base, pal::page_size()));  // skipped
      CHECK(pal::commit(r.base, pal::page_size()) == pal::testing::out_of_memory_error());
      CHECK(pal::commit(r.base, pal::page_size()) == pal::testing::out_of_memory_error());
      CHECK_FALSE(pal::commit(r.base, pal::page_size()));  // count exhausted
    }
    CHECK(pal::testing::calls(pal::Op::commit) == before + 4);
    {
      test::FaultGuard fault(pal::Op::reserve);
      void* p = nullptr;
      CHECK(pal::reserve(pal::allocation_granularity(), &p) == pal::testing::out_of_memory_error());
      CHECK(p == nullptr);
    }
    {
      test::FaultGuard fault(pal::Op::decommit);
      CHECK(pal::decommit(r.base, pal::page_size()));
    }
    CHECK_FALSE(pal::decommit(r.base, pal::page_size()));
  }

  TEST_CASE("wait_while_equal sleeps until the word changes, and no wake is ever lost") {
    const test::HangWatchdog watchdog("wait_while_equal", 300);
    std::atomic<std::uint32_t> turn{7};
    pal::wait_while_equal(turn, 8);  // the word differs: back at once
    pal::wake_all(turn);             // nobody waits: harmless
    // Two threads hand the word to each other: each waits for its turn, then passes it on and
    // wakes the other. One lost wake leaves both asleep, and the watchdog fails the test.
    const std::uint32_t rounds = test::under_valgrind() ? 500 : 5000;
    auto side = [&turn, rounds](std::uint32_t first) {
      for (std::uint32_t mine = first; mine < 2 * rounds; mine += 2) {
        for (std::uint32_t seen; (seen = turn.load(std::memory_order_acquire)) != mine;)
          pal::wait_while_equal(turn, seen);
        turn.store(mine + 1, std::memory_order_release);
        pal::wake_all(turn);
      }
    };
    turn.store(0);
    std::thread other(side, 1);
    side(0);
    other.join();
    CHECK(turn.load() == 2 * rounds);
  }

  TEST_CASE(
      "a wait the OS refuses sleeps one short poll and returns; waits and wakes are counted") {
    // Where the OS will not sleep on the word (no futex under a seccomp filter, a failed
    // WaitOnAddress), wait_while_equal must neither spin nor sleep for ever: the word below never
    // changes and nobody wakes it, so each call returns only through that path.
    const test::HangWatchdog watchdog("a refused wait", 300);
    std::atomic<std::uint32_t> word{5};
    const std::uint64_t waits = pal::testing::calls(pal::Op::wait);
    const std::uint64_t wakes = pal::testing::calls(pal::Op::wake);
    {
      test::FaultGuard refused(pal::Op::wait, 0, 3, std::make_error_code(std::errc::not_supported));
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 3; ++i)
        pal::wait_while_equal(word, 5);
      // A poll sleeps (50 us on POSIX, 1 ms on Windows): three of them cannot all be skipped.
      CHECK(std::chrono::steady_clock::now() - start >= std::chrono::microseconds(150));
    }
    CHECK(pal::testing::calls(pal::Op::wait) == waits + 3);
    pal::wake_all(word);
    CHECK(pal::testing::calls(pal::Op::wake) == wakes + 1);
    CHECK(word.load() == 5);
  }

  TEST_CASE("current RSS rises by roughly the bytes touched, and falls on decommit") {
    const std::size_t n = 64 * kMiB;
    Reservation r(n);
    REQUIRE_FALSE(pal::commit(r.base, n));
    const std::size_t rss_before = pal::current_rss();
    REQUIRE(rss_before > 0);
    touch(r.bytes(), n);
    const std::size_t rss_touched = pal::current_rss();
    CHECK(rss_touched >= rss_before + n - 4 * kMiB);
    if (!kThreadSanitizer) CHECK(rss_touched <= rss_before + n + 16 * kMiB);
    REQUIRE_FALSE(pal::decommit(r.base, n));
    if (!kThreadSanitizer) CHECK(pal::current_rss() <= rss_touched - n + 4 * kMiB);
  }

  TEST_CASE(
      "the process-wide barrier: on Linux it works while other threads run; refusals report") {
    // Linux 4.14+ has membarrier; the macOS/FreeBSD paths (decommit by re-map) have none, and
    // Windows' FlushProcessWriteBuffers is not used (see pal.hpp).
    const bool expected = kLinux && !pal::testing::decommit_remaps();
    const bool supported = pal::process_barrier_supported();
    CHECK(supported == expected);
    std::atomic<bool> stop{false};
    std::thread busy([&] {  // a second running thread, which the barrier must interrupt
      while (!stop.load())
        pal::yield_thread();
    });
    const std::error_code ec = pal::process_barrier();
    stop = true;
    busy.join();
    if (supported) {
      CHECK_FALSE(ec);
    } else {
      CHECK(ec == std::errc::not_supported);
    }
    {
      test::FaultGuard refuse(pal::Op::barrier, 0, 2);
      CHECK_FALSE(pal::process_barrier_supported());  // an injected failure: "not supported"
      CHECK(pal::process_barrier() == pal::testing::out_of_memory_error());
    }
    CHECK(pal::process_barrier_supported() == supported);  // the registration is kept
  }

  TEST_CASE("a thread key runs its exit function at a thread's end until it is deleted") {
    static std::atomic<int> ended{0};
    const auto on_exit = [](void*) { ended.fetch_add(1); };
    pal::ThreadKey key;
    REQUIRE(!pal::create_thread_key(on_exit, &key));
    static int value = 0;
    ended = 0;
    std::thread([&] { REQUIRE(!pal::set_thread_value(key, &value)); }).join();
    CHECK(ended.load() == 1);
    // A thread that set its value before the key was deleted, and ends after: nothing runs (what
    // code that is unloaded needs of its keys).
    std::atomic<bool> set{false};
    std::atomic<bool> deleted{false};
    std::thread late([&] {
      REQUIRE(!pal::set_thread_value(key, &value));
      set = true;
      while (!deleted)
        std::this_thread::yield();
    });
    while (!set)
      std::this_thread::yield();
    const int before = ended.load();  // Windows: FlsFree may run it here, for the late thread
    CHECK(!pal::delete_thread_key(key));
    const int at_delete = ended.load();
    CHECK(at_delete - before <= 1);
    deleted = true;
    late.join();
    CHECK(ended.load() == at_delete);
  }

  TEST_CASE("prefault backs committed pages or says it cannot") {
    Reservation r(4 * kMiB);
    REQUIRE_FALSE(pal::commit(r.base, 4 * kMiB));
    std::error_code ec = pal::prefault(r.base, 4 * kMiB);
    CHECK((!ec || ec == std::errc::not_supported));
    CHECK(r.bytes()[4 * kMiB - 1] == 0);
  }
}

RESERVOIR_CHILD("pal.use_after_decommit") {
  test::expect_fault_here();
  void* p = nullptr;
  if (pal::reserve(pal::allocation_granularity(), &p)) return 2;
  if (pal::commit(p, pal::page_size())) return 3;
  static_cast<volatile char*>(p)[0] = 1;
  if (pal::decommit(p, pal::page_size())) return 4;
  static_cast<volatile char*>(p)[0] = 2;  // must fault
  return 0;
}

// An open reservation: a page past a guard page faults.
RESERVOIR_CHILD("pal.open_guard") {
  const std::size_t page = pal::page_size();
  const std::size_t size = 4 * std::max(page, pal::allocation_granularity());
  void* p = nullptr;
  if (pal::reserve_open(size, &p)) return 3;
  if (pal::guard(static_cast<unsigned char*>(p) + page, page)) return 4;
  auto* bytes = static_cast<volatile unsigned char*>(p);
  bytes[0] = 1;         // read-write around it
  bytes[2 * page] = 1;  // read-write around it
  test::expect_fault_here();
  bytes[page] = 1;  // must fault
  return 0;
}

TEST_SUITE("pal") {
  TEST_CASE("an open reservation reads and writes at once; discard zeroes; a guard faults") {
    const std::size_t page = pal::page_size();
    const std::size_t size = 4 * std::max(page, pal::allocation_granularity());
    void* p = nullptr;
    const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
    const std::error_code ec = pal::reserve_open(size, &p);
    if (!kLinux || pal::testing::decommit_remaps()) {
      // macOS, FreeBSD, Windows and the posix-generic build: reserve() and commit() instead.
      CHECK(ec == std::errc::not_supported);
      void* q = nullptr;
      CHECK(pal::guard(&q, page) == std::errc::not_supported);
      CHECK(pal::discard(&q, page) == std::errc::not_supported);
      return;
    }
    REQUIRE_FALSE(ec);
    CHECK(pal::testing::calls(pal::Op::reserve) == reserves + 1);
    auto* bytes = static_cast<unsigned char*>(p);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % pal::allocation_granularity() == 0);
    std::memset(bytes, 0xCD, size);  // no commit call
    const std::uint64_t decommits = pal::testing::calls(pal::Op::decommit);
    REQUIRE_FALSE(pal::discard(bytes + page, page));
    CHECK(pal::testing::calls(pal::Op::decommit) == decommits + 1);
    CHECK(bytes[0] == 0xCD);
    CHECK(bytes[2 * page] == 0xCD);
    for (std::size_t i = page; i < 2 * page; ++i)
      REQUIRE(bytes[i] == 0);
    bytes[page] = 7;  // still writable
    CHECK(bytes[page] == 7);
    const std::uint64_t guards = pal::testing::calls(pal::Op::guard);
    REQUIRE_FALSE(pal::guard(bytes + 3 * page, page));
    CHECK(pal::testing::calls(pal::Op::guard) == guards + 1);
    CHECK(bytes[2 * page] == 0xCD);  // the page below the guard keeps its contents
    {
      test::FaultGuard fault(pal::Op::guard);
      CHECK(pal::guard(bytes, page) == pal::testing::out_of_memory_error());
    }
    bytes[0] = 1;  // the refused guard changed nothing
    CHECK_FALSE(pal::release(p, size));
    test::ProcessResult r = test::run_child("pal.open_guard");
    CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
    // Refused on request, so that the closed path runs here too.
    pal::testing::refuse_open_reservations(true);
    CHECK(pal::reserve_open(size, &p) == std::errc::not_supported);
    pal::testing::refuse_open_reservations(false);
    // Not made where it cannot be kept out of core dumps (the advice refused).
    pal::testing::refuse_dontdump(true);
    CHECK(pal::reserve_open(size, &p) == std::errc::not_supported);
    pal::testing::refuse_dontdump(false);
    // Made open, it is out of core dumps: "dd" in its VmFlags.
    REQUIRE_FALSE(pal::reserve_open(size, &p));
    {
      std::ifstream smaps("/proc/self/smaps");
      const auto addr = reinterpret_cast<std::uintptr_t>(p);
      bool inside = false, dontdump = false;
      for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2) {  // a mapping
          inside = addr >= lo && addr < hi;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
          dontdump = line.find(" dd") != std::string::npos;
        }
      }
      CHECK(dontdump);
    }
    CHECK_FALSE(pal::release(p, size));
  }

  TEST_CASE("a decommitted page faults instead of reading stale data") {
    test::ProcessResult r = test::run_child("pal.use_after_decommit");
    CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
  }

  TEST_CASE("a decommit whose re-map fails leaves no hole: the range stays ours") {
    if (!pal::testing::decommit_remaps()) {
      MESSAGE("this build decommits without re-mapping (see the posix-generic preset)");
      return;
    }
    const std::size_t n = 16 * pal::page_size();
    Reservation r(n);
    REQUIRE_FALSE(pal::commit(r.base, n));
    touch(r.bytes(), n);
    {
      // The injected failure unmaps the range first, as a failed MAP_FIXED may.
      test::FaultGuard fault(pal::Op::remap);
      (void)pal::decommit(r.base, n);  // mapped again (decommitted) or reported: either is fine
    }
    // The range must still be a mapping of ours: committing it works (mprotect fails with ENOMEM
    // over a hole) and it reads as zeros.
    REQUIRE_FALSE(pal::commit(r.base, n));
    CHECK(r.bytes()[0] == 0);
    CHECK(r.bytes()[n - 1] == 0);
    r.bytes()[n - 1] = 5;
    CHECK(r.bytes()[n - 1] == 5);
  }

  TEST_CASE("a decommit whose re-map fails in place reports it and leaves the pages usable") {
    if (!pal::testing::decommit_remaps()) {
      MESSAGE("this build decommits without re-mapping (see the posix-generic preset)");
      return;
    }
    const std::size_t n = 16 * pal::page_size();
    Reservation r(n);
    REQUIRE_FALSE(pal::commit(r.base, n));
    touch(r.bytes(), n);
    std::error_code ec;
    {
      // The re-map fails and leaves the old mapping alone (the usual case: ENOMEM is the worst).
      test::FaultGuard fault(pal::Op::remap, 0, 1,
                             std::make_error_code(std::errc::invalid_argument));
      ec = pal::decommit(r.base, n);
    }
    // Failed, so an arena keeps counting the pages as committed: they must still be writable.
    CHECK(ec == std::errc::invalid_argument);
    r.bytes()[0] = 3;
    r.bytes()[n - 1] = 4;
    CHECK(r.bytes()[0] == 3);
    CHECK(r.bytes()[n - 1] == 4);
    CHECK_FALSE(pal::decommit(r.base, n));  // and a later decommit works
  }
}
