// Real OS limits, each hit in a child process: a low address-space limit (RLIMIT_AS) and the
// per-process mapping limit (Linux vm.max_map_count). Every refusal must be a clean
// OsAllocationError with the OS's reason, and every array created before it must be intact.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

#if !defined(_WIN32)
#include <sys/resource.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RESERVOIR_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RESERVOIR_TEST_SANITIZED 1
#endif
#endif

using reservoir::Arena;
using reservoir::ArenaOptions;
using reservoir::DynArray;
using reservoir::OsAllocationError;
namespace pal = reservoir::pal;

#if !defined(_WIN32) && !defined(RESERVOIR_TEST_SANITIZED)

namespace {
// Prints the refusal's message for the parent to check; returns the child's exit code.
int report_refusal(const OsAllocationError& e, std::size_t created) {
  std::printf("refused after %zu: %s\n", created, e.what());
  return e.code() == pal::testing::out_of_memory_error() ? 0 : 10;
}
}  // namespace

RESERVOIR_CHILD("limits.address_space") {
  // 1. Arrays made before the limit.
  std::vector<DynArray<int>> arrays;
  for (int k = 0; k < 4; ++k) {
    arrays.emplace_back(reservoir::max_elements(1'000'000));
    for (int i = 0; i < 100'000; ++i)
      arrays.back().push_back(k * 1'000'000 + i);
  }
  // 2. A 4 GiB address-space limit: the default 64 GiB DynArray reservation falls back, an
  //    explicit 8 GiB one is refused.
  struct rlimit lim{};
  lim.rlim_cur = lim.rlim_max = rlim_t{4} << 30;
  if (::setrlimit(RLIMIT_AS, &lim) != 0) return 2;
  DynArray<int> fallback;
  fallback.push_back(7);
  if (fallback.max_size() * sizeof(int) >= reservoir::kDefaultReserveBytes) return 3;
  int code = 4;
  try {
    DynArray<int> big(reservoir::max_elements(std::size_t{2} << 30));  // 8 GiB of ints
  } catch (const OsAllocationError& e) {
    code = report_refusal(e, arrays.size());
  }
  // 3. Nothing made before was touched.
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 100'000; ++i) {
      if (arrays[k][i] != k * 1'000'000 + i) return 5;
    }
  }
  return code;
}

// How far std::vector<char> and a default DynArray<char> grow under a 1 GiB RLIMIT_AS: the
// vector by doubling (each new buffer allocated while the old one lives, as push_back does), the
// array by appending 1 MiB at a time. Prints both and the array's exception.
RESERVOIR_CHILD("limits.rlimit_as_vs_vector") {
  struct rlimit lim{};
  lim.rlim_cur = lim.rlim_max = rlim_t{1} << 30;
  if (::setrlimit(RLIMIT_AS, &lim) != 0) return 2;
  std::size_t vector_max = 0;
  {
    std::vector<char> v;
    try {
      for (std::size_t cap = 4096;; cap *= 2) {
        v.reserve(cap);
        v.resize(cap, 1);
        vector_max = v.size();
      }
    } catch (const std::bad_alloc&) {
    }
  }
  std::size_t array_max = 0;
  const char* kind = "none";
  std::string what;
  {
    DynArray<char> a;
    try {
      for (;;) {
        a.resize(a.size() + (std::size_t{1} << 20), 2);
        array_max = a.size();
      }
    } catch (const std::bad_alloc& e) {
      kind = "bad_alloc";
      what = e.what();
    } catch (const std::length_error& e) {
      kind = "length_error";
      what = e.what();
    }
    if (a.size() != array_max || (array_max && a[array_max - 1] != 2)) return 4;
  }
  std::printf("vector %zu MiB, DynArray %zu MiB, stopped by %s: %s\n", vector_max >> 20,
              array_max >> 20, kind, what.c_str());
  if (std::string(kind) != "bad_alloc") return 5;
  return array_max >= vector_max / 2 ? 0 : 6;
}

// A default array in a process whose RLIMIT_AS leaves less than the smallest default
// reservation: a refusal decided by reservoir itself, with its own error code and a message that
// names the limit, its figure and the remedy.
RESERVOIR_CHILD("limits.refusal_message") {
  const std::size_t vm_size = test::proc_status_kib("VmSize") << 10;
  if (vm_size == 0) return 2;
  struct rlimit lim{};
  lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(vm_size + (std::size_t{16} << 20));
  if (::setrlimit(RLIMIT_AS, &lim) != 0) return 2;
  try {
    DynArray<int> a;
    a.push_back(1);
  } catch (const OsAllocationError& e) {
    std::printf("code %d (%s): %s\n", e.code().value(), e.code().category().name(), e.what());
    if (e.code().value() == 0 || e.code().category() == std::system_category()) return 3;
    return 0;
  }
  return 4;
}

#if defined(__linux__)
RESERVOIR_CHILD("limits.map_count") {
  ArenaOptions o;
  o.commit_granule = o.max_commit_step = pal::page_size();
  o.prefault = false;
  o.reuse_reservation = false;
  std::vector<Arena> arenas;
  arenas.reserve(200'000);
  int code = 4;
  try {
    for (;;) {
      Arena a(1 << 20, o);
      auto* id = static_cast<std::uint64_t*>(a.grow(sizeof(std::uint64_t)));
      *id = arenas.size();
      arenas.push_back(std::move(a));
      if (arenas.size() > 150'000) return 6;  // no limit met: vm.max_map_count is raised
    }
  } catch (const OsAllocationError& e) {
    // Where the kernel's count can be read the library stops at half of it, before the kernel
    // refuses (suite `mappings`); elsewhere the kernel's ENOMEM is the refusal.
    if (pal::max_map_count() != 0) {
      std::printf("refused after %zu: %s\n", arenas.size(), e.what());
      code = e.code() == reservoir::Refusal::mapping_budget ? 0 : 10;
    } else {
      code = report_refusal(e, arenas.size());
    }
  }
  for (std::size_t i = 0; i < arenas.size(); ++i) {
    if (*reinterpret_cast<std::uint64_t*>(arenas[i].base()) != i) return 5;
  }
  return code;
}
#endif

TEST_SUITE("limits") {
  TEST_CASE("under an address-space limit: a clean refusal, the default falls back, nothing lost") {
    test::ProcessResult r = test::run_child("limits.address_space");
    INFO(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("cannot reserve") != std::string::npos);
    CHECK(r.output.find("ENOMEM") != std::string::npos);
  }

  TEST_CASE("under a 1 GiB RLIMIT_AS a default array holds at least half what std::vector does") {
    test::ProcessResult r = test::run_child("limits.rlimit_as_vs_vector");
    MESSAGE(test::describe(r) << ": " << r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("a refusal no OS call made has its own error code and names limit, figure, remedy") {
    test::ProcessResult r = test::run_child("limits.refusal_message");
    MESSAGE(test::describe(r) << ": " << r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("reservoir") != std::string::npos);
    CHECK(r.output.find("RLIMIT_AS") != std::string::npos);
    CHECK(r.output.find("ulimit -v") != std::string::npos);
    CHECK(r.output.find("Success") == std::string::npos);
  }

#if defined(__linux__)
  TEST_CASE("at vm.max_map_count: a clean refusal and every arena made before intact") {
    test::ProcessResult r = test::run_child("limits.map_count");
    INFO(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
    if (pal::max_map_count() != 0) {
      CHECK(r.output.find("vm.max_map_count") != std::string::npos);
      CHECK(r.output.find("reservoir holds") != std::string::npos);
    } else {
      CHECK(r.output.find("ENOMEM") != std::string::npos);
    }
  }
#endif
}

#else
TEST_SUITE("limits") {
  TEST_CASE("OS limits") {
    MESSAGE(
        "the limit tests need POSIX rlimits and no sanitizer runtime (which reserves "
        "terabytes of shadow memory); skipped in this build");
  }
}
#endif

// Tests that need no rlimit: they run in every build.
RESERVOIR_CHILD("limits.parked_huge") {
  try {
    DynArray<double> huge(reservoir::max_elements(std::size_t{1} << 41));  // 16 TiB
    huge.push_back(1.0);
  } catch (const OsAllocationError& e) {
    std::printf("skipped: this process cannot reserve 16 TiB: %s\n", e.what());
    return 0;
  }
  // The huge reservation is parked now; later default arrays must not be starved by it.
  DynArray<int> a;
  a.push_back(1);
  DynArray<char> b;
  try {
    b.reserve(std::size_t{2} << 30);
  } catch (const std::exception& e) {
    std::printf("reserve(2 GiB) failed: %s\n", e.what());
    return 3;
  }
  std::printf("after a parked 16 TiB reservation: default array max_size %zu GiB of ints\n",
              (a.max_size() * sizeof(int)) >> 30);
  return a.max_size() * sizeof(int) == reservoir::kDefaultReserveBytes ? 0 : 4;
}

RESERVOIR_CHILD("limits.memory_limit_message") {
  reservoir::set_memory_limit(pal::current_rss() + (std::size_t{32} << 20));
  try {
    DynArray<int> a;
    for (;;)
      a.push_back(1);
  } catch (const OsAllocationError& e) {
    std::printf("code %d (%s): %s\n", e.code().value(), e.code().category().name(), e.what());
    return e.code().value() != 0 && e.code().category() != std::system_category() ? 0 : 3;
  }
}

TEST_SUITE("limits") {
  TEST_CASE("a destroyed 16 TiB array's parked reservation does not shrink later default arrays") {
    test::ProcessResult r = test::run_child("limits.parked_huge");
    MESSAGE(test::describe(r) << ": " << r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("a memory-limit refusal: its own error code, the limit, its figure and the remedy") {
    if (pal::current_rss() == 0) {
      MESSAGE("skipped: this OS does not report the resident set");
      return;
    }
    test::ProcessResult r = test::run_child("limits.memory_limit_message");
    MESSAGE(test::describe(r) << ": " << r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("reservoir") != std::string::npos);
    CHECK(r.output.find("set_memory_limit") != std::string::npos);
    CHECK(r.output.find("Success") == std::string::npos);
  }
}
