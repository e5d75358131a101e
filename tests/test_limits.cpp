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
  struct rlimit lim {};
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
    code = report_refusal(e, arenas.size());
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

#if defined(__linux__)
  TEST_CASE("at vm.max_map_count: a clean refusal and every arena made before intact") {
    test::ProcessResult r = test::run_child("limits.map_count");
    INFO(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("ENOMEM") != std::string::npos);
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
