// Tests of <reservoir/pal.hpp>: the OS layer, its errors, its statistics, its failure seam.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

#include <reservoir/pal.hpp>

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

TEST_SUITE("pal") {
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
