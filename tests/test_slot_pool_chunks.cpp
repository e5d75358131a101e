// The slot pools' chunks: open (the opt-in) and closed ones, their kernel mappings, huge pages
// and what a parked mapping keeps of them, resource limits that keep chunks closed or off, and
// core dumps (closed chunks are in them, open ones are not).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "pool_support.hpp"
#include "support.hpp"

#if !defined(_WIN32)
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

using reservoir::Arena;
using reservoir::ArenaOptions;
using reservoir::DynArray;
namespace pal = reservoir::pal;

namespace {

using test::FreshPools;
using test::full_default_here;

#if defined(RESERVOIR_TEST_ASAN)
constexpr bool kSanitizedBuild = true;
#else
constexpr bool kSanitizedBuild = kThreadSanitizer;
#endif

#if defined(__linux__)
// The VmFlags line of the mapping that holds `p` (/proc/self/smaps), with a space after it so that
// " hg " finds the last flag too; "" if no mapping holds it.
std::string vm_flags(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = addr >= lo && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line + " ";
    }
  }
  return std::string();
}
#endif

}  // namespace

#if !defined(_WIN32)
RESERVOIR_CHILD("pool.large_under_rlimit_as") {
  // Under an address-space limit no multi-slot chunk is reserved: a default array reserves a
  // mapping of its own, of what the limit leaves it (half of it at most).
  reservoir::trim_pools();
  reservoir::clear_reservation_cache();
  const std::size_t vm = test::proc_status_kib("VmSize") * 1024;
  if (vm == 0) return 0;  // no /proc: nothing to compare with
  struct rlimit lim{};
  lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(vm + (std::size_t{256} << 30));
  if (::setrlimit(RLIMIT_AS, &lim) != 0) return 2;
  const std::size_t before = reservoir::reserved_address_space();
  const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
  DynArray<int> a;
  a.push_back(7);
  const std::size_t added = reservoir::reserved_address_space() - before;
  std::printf("max_size %zu GiB, reserved %zu GiB in %llu calls\n", a.max_size() * 4 >> 30,
              added >> 30,
              static_cast<unsigned long long>(pal::testing::calls(pal::Op::reserve) - reserves));
  if (a[0] != 7) return 3;
  if (pal::testing::calls(pal::Op::reserve) - reserves != 1) return 4;  // its own mapping only
  if (added > a.max_size() * sizeof(int) + (std::size_t{4} << 20)) return 5;
  return 0;
}

// Under a data limit (RLIMIT_DATA), which counts every writable private mapping in full, the
// large chunks stay closed (PROT_NONE until committed): default arrays still share chunks.
RESERVOIR_CHILD("pool.large_under_rlimit_data") {
  reservoir::trim_pools();
  reservoir::clear_reservation_cache();
  const std::size_t data = test::proc_status_kib("VmData") * 1024;
  if (data == 0) return 0;  // no /proc
  struct rlimit lim{};
  lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(data + (std::size_t{1} << 30));
  if (::setrlimit(RLIMIT_DATA, &lim) != 0) return 2;
  void* p = nullptr;
  if (pal::reserve_open(pal::page_size(), &p) != std::errc::not_supported) return 3;
  const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
  std::vector<DynArray<int>> live(100);
  for (std::size_t i = 0; i < live.size(); ++i)
    live[i].assign(100, static_cast<int>(i));
  const std::uint64_t made = pal::testing::calls(pal::Op::reserve) - reserves;
  std::printf("100 default arrays under RLIMIT_DATA: %llu reservations\n",
              static_cast<unsigned long long>(made));
  for (std::size_t i = 0; i < live.size(); ++i) {
    if (live[i].size() != 100 || live[i][99] != static_cast<int>(i)) return 4;
  }
  // Chunks of 2, 4, 8, ... slots: about 7 reservations (a mapping of its own each: 100 or more).
  return made <= 10 ? 0 : 5;
}

// Locked memory (any page in VmLck, as mlockall(MCL_FUTURE) would make every new mapping) keeps
// open reservations off: the kernel would back the whole range at once.
RESERVOIR_CHILD("pal.open_refused_while_locked") {
  void* p = nullptr;
  const std::size_t page = pal::page_size();
  const bool open_before = !pal::reserve_open(page, &p);
  if (open_before) (void)pal::release(p, page);
  static unsigned char locked[65536];
  if (::mlock(locked, sizeof locked) != 0) return 0;  // not allowed here: nothing to check
  const std::error_code ec = pal::reserve_open(page, &p);
  (void)::munlock(locked, sizeof locked);
  if (!open_before) return 0;
  return ec == std::errc::not_supported ? 0 : 3;
}
#endif

TEST_SUITE("slot_pool") {
#if !defined(_WIN32)
#if defined(__linux__)
  // True where a guard page in an open reservation is a mapping of its own: guard() fell back to
  // mprotect (a kernel before 6.13, or the testing switch).
  bool guards_split_mappings() {
    const std::size_t page = pal::page_size();
    void* p = nullptr;
    if (pal::reserve_open(3 * page, &p)) return true;
    auto* b = static_cast<std::byte*>(p);
    const bool guarded = !pal::guard(b + page, page);
    std::size_t inside = 0;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      std::uintptr_t lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 &&
          lo < reinterpret_cast<std::uintptr_t>(b + 3 * page) &&
          hi > reinterpret_cast<std::uintptr_t>(b)) {
        ++inside;
      }
    }
    (void)pal::release(p, 3 * page);
    return !guarded || inside > 1;
  }

  TEST_CASE("an open chunk is one kernel mapping; a closed one's arrays are about two each") {
    FreshPools fresh;
    if (!full_default_here()) return;
    if (!test::open_reservations_here()) {
      MESSAGE("skipped: no open reservations here");
      return;
    }
    const auto mappings = [] {
      std::ifstream maps("/proc/self/maps");
      std::size_t n = 0;
      for (std::string line; std::getline(maps, line);)
        ++n;
      return n;
    };
    // Open chunks with guards by MADV_GUARD_INSTALL, open ones with guards by mprotect (kernels
    // before 6.13), closed chunks.
    for (const std::string mode : {"open", "open, mprotect guards", "closed"}) {
      CAPTURE(mode);
      const bool closed = mode == "closed";
      const bool by_mprotect = mode.find("mprotect") != std::string::npos;
      pal::testing::refuse_open_reservations(closed);
      pal::testing::refuse_guard_install(by_mprotect);
      struct Reopen {
        ~Reopen() {
          pal::testing::refuse_open_reservations(false);
          pal::testing::refuse_guard_install(false);
        }
      } reopen;
      const test::PoolChunks chunk_kind(!closed);  // open: the opt-in
      reservoir::trim_pools();
      const std::size_t before = mappings();
      const std::uint64_t reserves = pal::testing::calls(pal::Op::reserve);
      std::vector<DynArray<int>> live(300);
      for (DynArray<int>& a : live)
        a.push_back(1);
      const std::size_t added = mappings() - before;
      const std::uint64_t chunks = pal::testing::calls(pal::Op::reserve) - reserves;
      CAPTURE(added);
      CAPTURE(chunks);
      // A new chunk costs a dozen system calls, several arrays' worth: chunks double up to
      // their cap (31 slots of 64 GiB, 256 of 1 GiB), about 17 for 300 arrays.
      CHECK(chunks <= 24);
      // Open: at most one per chunk (adjacent chunks merge) and the vector's own; closed: a
      // committed prefix amid PROT_NONE is a mapping of its own and splits its neighbour in two,
      // as each guard page made by mprotect does in an open chunk (kernels before 6.13 too).
      if (by_mprotect) CHECK(guards_split_mappings());  // the probe below sees what it is for
      if (closed || by_mprotect || guards_split_mappings()) {
        CHECK(added >= live.size());
      } else if (!kAddressSanitizer) {  // its allocator maps regions of its own meanwhile
        CHECK(added <= chunks + 2);
      }
    }
  }

  TEST_CASE("set_open_pool_chunks(true) opts in to open chunks; closed ones are the default") {
    FreshPools fresh;
    CHECK_FALSE(reservoir::open_pool_chunks());  // commit means commit unless asked otherwise
    if (!full_default_here()) return;
    if (!test::open_reservations_here()) {
      MESSAGE("skipped: no open reservations here");
      return;
    }
    const test::PoolChunks restore(false);
    for (const bool open : {true, false}) {
      CAPTURE(open);
      reservoir::set_open_pool_chunks(open);
      CHECK(reservoir::open_pool_chunks() == open);
      reservoir::trim_pools();  // no slot of an earlier chunk is handed out
      const std::uint64_t commits = pal::testing::calls(pal::Op::commit);
      std::vector<DynArray<int>> live(4);
      for (DynArray<int>& a : live)
        for (int i = 0; i < 5000; ++i)
          a.push_back(i);
      // Open: committing is bookkeeping; closed: each array's steps are mprotect calls.
      const std::uint64_t made = pal::testing::calls(pal::Op::commit) - commits;
      if (open) {
        CHECK(made == 0);
      } else {
        CHECK(made >= live.size());
      }
      for (const DynArray<int>& a : live)
        CHECK(a[4999] == 4999);
    }
  }

  TEST_CASE("with guards made by mprotect (kernels before 6.13) open chunks keep every array") {
    FreshPools fresh;
    if (!full_default_here()) return;
    if (!test::open_reservations_here()) {
      MESSAGE("skipped: no open reservations here");
      return;
    }
    pal::testing::refuse_guard_install(true);
    struct Restore {
      ~Restore() { pal::testing::refuse_guard_install(false); }
    } restore;
    const test::PoolChunks open_chunks(true);  // the opt-in
    reservoir::trim_pools();
    // The permissions of the mapping that holds p, from /proc/self/maps ("rw-p", "---p").
    const auto perms = [](const void* p) {
      std::ifstream maps("/proc/self/maps");
      const auto addr = reinterpret_cast<std::uintptr_t>(p);
      for (std::string line; std::getline(maps, line);) {
        std::uintptr_t lo = 0, hi = 0;
        char mode[5] = {};
        if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, mode) == 3 &&
            addr >= lo && addr < hi) {
          return std::string(mode);
        }
      }
      return std::string("unmapped");
    };
    const std::uint64_t guards = pal::testing::calls(pal::Op::guard);
    std::vector<DynArray<int>> live(40);
    const auto fill = [](DynArray<int>& a, int seed) {
      for (int i = 0; i < 3000 + seed; ++i)
        a.push_back(seed * 7919 + i);
    };
    const auto intact = [](const DynArray<int>& a, int seed) {
      if (a.size() != static_cast<std::size_t>(3000 + seed)) return false;
      for (int i = 0; i < 3000 + seed; ++i)
        if (a[static_cast<std::size_t>(i)] != seed * 7919 + i) return false;
      return true;
    };
    for (std::size_t i = 0; i < live.size(); ++i)
      fill(live[i], static_cast<int>(i));
    CHECK(pal::testing::calls(pal::Op::guard) - guards >= live.size());
    for (const DynArray<int>& a : live) {
      CHECK(perms(a.data()) == "rw-p");
      CHECK(perms(a.arena().base() - 1) == "---p");  // the slot's guard page
    }
    // Every other array destroyed and made again: recycled slots keep their guard, the others
    // their contents.
    for (std::size_t i = 0; i < live.size(); i += 2)
      live[i] = DynArray<int>();
    const std::uint64_t guards_before = pal::testing::calls(pal::Op::guard);
    const std::uint64_t reserves_before = pal::testing::calls(pal::Op::reserve);
    for (std::size_t i = 0; i < live.size(); i += 2)
      fill(live[i], static_cast<int>(i));
    CHECK(pal::testing::calls(pal::Op::guard) == guards_before);  // recycled, not carved
    CHECK(pal::testing::calls(pal::Op::reserve) == reserves_before);
    for (std::size_t i = 0; i < live.size(); ++i) {
      CAPTURE(i);
      CHECK(intact(live[i], static_cast<int>(i)));
      CHECK(perms(live[i].arena().base() - 1) == "---p");
    }
  }

  TEST_CASE("a huge-page array's slot goes back whole: no resident tail, no advice left") {
    FreshPools fresh;
    if (!full_default_here()) return;
    if (test::rss_unmeasurable() != nullptr || !pal::transparent_huge_pages()) {
      MESSAGE("skipped: needs transparent huge pages and a real page table (no sanitizer)");
      return;
    }
    // Resident bytes of [p, p+n), page by page (mincore).
    const auto resident = [](const std::byte* p, std::size_t n) {
      const std::size_t page = 4096;
      const auto start = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{page - 1};
      const std::size_t len = n + (reinterpret_cast<std::uintptr_t>(p) - start);
      std::vector<unsigned char> v((len + page - 1) / page);
      REQUIRE(::mincore(reinterpret_cast<void*>(start), len, v.data()) == 0);
      std::size_t r = 0;
      for (unsigned char c : v)
        r += (c & 1) != 0 ? page : 0;
      return r;
    };
    const reservoir::HugePages saved = reservoir::huge_pages();
    reservoir::set_huge_pages(reservoir::HugePages::on);
    for (bool closed : {false, true}) {
      if (closed && !test::open_reservations_here()) break;
      CAPTURE(closed);
      pal::testing::refuse_open_reservations(closed);
      const test::PoolChunks chunks(!closed);  // open: the opt-in
      reservoir::trim_pools();
      DynArray<char> neighbour;  // keeps the chunk mapped through the trim below
      neighbour.push_back(1);
      std::byte* base = nullptr;
      std::size_t committed = 0;
      {
        DynArray<char> a;
        a.resize(9 << 20);
        a.resize(a.capacity());
        a.back() = 1;  // the last committed page: in a huge page, the 2 MiB around it
        base = a.arena().base();
        committed = a.arena().committed();
        CHECK(vm_flags(base + (8 << 20)).find(" hg ") != std::string::npos);
      }
      // The advice is undone, and nothing of the slot stays resident once the pools are trimmed.
      CHECK(vm_flags(base + (8 << 20)).find(" hg ") == std::string::npos);
      reservoir::trim_pools();
      CHECK(resident(base, committed + (std::size_t{2} << 20)) == 0);
      CHECK(reservoir::pool_resident_bytes() == 0);
    }
    pal::testing::refuse_open_reservations(false);
    reservoir::set_huge_pages(saved);
  }

  TEST_CASE("a parked mapping carries no huge-page advice to the arena that takes it next") {
    if (!pal::transparent_huge_pages()) {
      MESSAGE("skipped: needs transparent huge pages");
      return;
    }
    const reservoir::HugePages saved = reservoir::huge_pages();
    reservoir::clear_reservation_cache();
    reservoir::set_huge_pages(reservoir::HugePages::on);
    std::byte* base = nullptr;
    {
      Arena a(100u << 20);  // a mapping of its own, parked when destroyed
      std::memset(a.grow(40u << 20), 1, 40u << 20);
      base = a.base();
      CHECK(vm_flags(base + (8 << 20)).find(" hg ") != std::string::npos);
    }
    reservoir::set_huge_pages(reservoir::HugePages::off);  // every arena from now on: 4 KiB pages
    {
      Arena b(100u << 20);
      REQUIRE(b.base() == base);  // the parked mapping
      std::memset(b.grow(40u << 20), 2, 40u << 20);
      CHECK(vm_flags(base + (8 << 20)).find(" hg ") == std::string::npos);
    }
    reservoir::set_huge_pages(saved);
    reservoir::clear_reservation_cache();
  }
#endif

  TEST_CASE("under RLIMIT_DATA or with locked memory the chunks stay closed, and still shared") {
    if (kSanitizedBuild || test::under_valgrind()) {
      MESSAGE("skipped under the sanitizers and valgrind: their own mappings need the data limit");
      return;
    }
    if (!full_default_here()) return;
    for (const char* name : {"pool.large_under_rlimit_data", "pal.open_refused_while_locked"}) {
      CAPTURE(name);
      test::ProcessResult r = test::run_child(name);
      MESSAGE(r.output);
      CHECK_MESSAGE(r.exited, test::describe(r));
      CHECK_MESSAGE(r.exit_code == 0, test::describe(r));
    }
  }

  TEST_CASE("under RLIMIT_AS a default array reserves its own mapping, no chunk") {
    if (kSanitizedBuild) {
      MESSAGE("skipped under the sanitizers: their shadow memory does not fit an RLIMIT_AS");
      return;
    }
    test::ProcessResult r = test::run_child("pool.large_under_rlimit_as");
    MESSAGE(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK_MESSAGE(r.exit_code == 0, test::describe(r));
  }
#endif
}

// ---- core dumps ---------------------------------------------------------------------------------
//
// The kernel dumps a written private mapping whole, a page at a time: an open chunk (read-write
// from the start) would put terabytes of zeros in a core. Open chunks (the opt-in,
// set_open_pool_chunks(true)) are left out of core dumps; closed ones (the default) dump what is
// committed, as any memory.
#if defined(__linux__) && !defined(RESERVOIR_TEST_TSAN) && !defined(RESERVOIR_TEST_ASAN)
namespace {

constexpr std::uint64_t kCoreMarker = 0x7265736572766f69u;  // "reservoi"

// The value element j of array i holds in the core-dump children.
std::uint64_t core_value(std::uint64_t i, std::uint64_t j) {
  return kCoreMarker ^ (i << 40) ^ (j << 8);
}

// Makes 20 default arrays (64 GiB slots: chunks of 2, 4, 8 and 16 slots, about 1.9 TiB) of
// known values in the directory the parent named, and aborts there with core dumps on. `chunks`:
// "open" or "closed" set by set_open_pool_chunks, "default" as a program that sets nothing.
int core_dump_child(const std::string& chunks) {
  const char* dir = std::getenv("RESERVOIR_TEST_CORE_DIR");
  if (dir == nullptr || ::chdir(dir) != 0) return 2;
  struct rlimit core{};
  if (::getrlimit(RLIMIT_CORE, &core) != 0) return 3;
  core.rlim_cur = core.rlim_max;
  if (::setrlimit(RLIMIT_CORE, &core) != 0 || core.rlim_cur < (std::uint64_t{1} << 30)) return 4;
  if (chunks != "default") reservoir::set_open_pool_chunks(chunks == "open");
  std::vector<DynArray<std::uint64_t>> live(20);
  for (std::uint64_t i = 0; i < live.size(); ++i)
    for (std::uint64_t j = 0; j < 1000; ++j)
      live[i].push_back(core_value(i, j));
  std::abort();
}

}  // namespace

RESERVOIR_CHILD("pool.core_dump.open") {
  return core_dump_child("open");
}
RESERVOIR_CHILD("pool.core_dump.closed") {
  return core_dump_child("closed");
}
RESERVOIR_CHILD("pool.core_dump.default") {
  return core_dump_child("default");
}

TEST_SUITE("slot_pool") {
  TEST_CASE("core dumps: default arrays are in (closed chunks, the default); open chunks are not") {
    if (!full_default_here()) return;
    if (test::under_valgrind()) {
      MESSAGE("skipped under valgrind, which writes its own core");
      return;
    }
    std::string pattern;
    std::getline(std::ifstream("/proc/sys/kernel/core_pattern"), pattern);
    if (pattern != "core") {
      MESSAGE("skipped: core_pattern is '" << pattern << "', not a file named core in the cwd");
      return;
    }
    if (struct rlimit core{};
        ::getrlimit(RLIMIT_CORE, &core) != 0 || core.rlim_max < (std::uint64_t{1} << 30)) {
      MESSAGE("skipped: the hard RLIMIT_CORE is below 1 GiB");
      return;
    }
    struct Unset {
      ~Unset() { (void)::unsetenv("RESERVOIR_TEST_CORE_DIR"); }
    } unset;
    namespace fs = std::filesystem;
    for (const std::string chunks : {"default", "open", "closed"}) {
      CAPTURE(chunks);
      if (chunks == "open" && !test::open_reservations_here()) {
        MESSAGE("no open reservations here: open chunks not checked");
        continue;
      }
      const fs::path dir =
          fs::temp_directory_path() / ("reservoir-core-" + std::to_string(::getpid()) + chunks);
      fs::remove_all(dir);
      fs::create_directories(dir);
      REQUIRE(::setenv("RESERVOIR_TEST_CORE_DIR", dir.c_str(), 1) == 0);
      const auto start = std::chrono::steady_clock::now();
      test::ProcessResult r = test::run_child("pool.core_dump." + chunks);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CHECK_MESSAGE((!r.exited && r.signal == SIGABRT), test::describe(r));
      fs::path core;
      for (const fs::directory_entry& e : fs::directory_iterator(dir))
        if (e.path().filename().string().rfind("core", 0) == 0) core = e.path();
      if (core.empty()) {
        MESSAGE("no core file written (" << test::describe(r) << "): nothing to check");
        fs::remove_all(dir);
        continue;
      }
      const std::uintmax_t size = fs::file_size(core);
      CAPTURE(size);
      CAPTURE(seconds);
      // With the chunks dumped whole: about 50 s and 1.9 TiB (sparse). Without: a few MiB.
      CHECK(seconds < 20);
      CHECK(size < (std::uintmax_t{1} << 30));
      // Array 3's element 500, which no register or stack slot holds at the abort.
      bool found = false;
      if (size < (std::uintmax_t{1} << 30)) {
        const std::uint64_t want = core_value(3, 500);
        std::ifstream in(core, std::ios::binary);
        std::vector<char> buf(std::size_t{1} << 20);
        while (!found && in) {
          in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
          const std::size_t got = static_cast<std::size_t>(in.gcount());
          for (std::size_t at = 0; at + sizeof want <= got; at += sizeof want) {
            std::uint64_t v = 0;
            std::memcpy(&v, buf.data() + at, sizeof v);
            if (v == want) {
              found = true;
              break;
            }
          }
        }
      }
      // Arrays are 8-byte aligned, and so are the core's page contents.
      CHECK(found == (chunks != "open"));
      fs::remove_all(dir);
    }
  }
}
#endif
