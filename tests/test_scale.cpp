// Scale: tens of thousands of live default-constructed arrays fit in one process, each still able
// to grow to 1 GiB, and when the address space does run out the error says which limit and what
// to do, with every existing array intact. Each scenario runs in a child process (natively, even
// when the suite runs under valgrind, whose own address space is far smaller).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

#if !defined(_WIN32)
#include <sys/resource.h>
#endif

using reservoir::DynArray;

namespace {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
constexpr int kArrays = 30'000;
constexpr std::size_t kGiB = std::size_t{1} << 30;
}  // namespace

RESERVOIR_CHILD("scale.many_default_arrays") {
  // 1. 30,000 live default arrays, one element each.
  std::vector<DynArray<int>> arrays(kArrays);
  for (int i = 0; i < kArrays; ++i)
    arrays[static_cast<std::size_t>(i)].push_back(i);
  // 2. Each can grow to at least 1 GiB; the first ones have the full default.
  std::size_t smallest = static_cast<std::size_t>(-1);
  for (const DynArray<int>& a : arrays)
    smallest = (std::min)(smallest, a.max_size() * sizeof(int));
  const bool first_full =
      arrays.front().max_size() * sizeof(int) == reservoir::kDefaultReserveBytes;
  // 3. One of the last grows to 1 GiB for real, and everything is still there.
  DynArray<int>& last = arrays.back();
  last.resize(kGiB / sizeof(int));
  last[last.size() - 1] = 7;
  for (int i = 0; i < kArrays; ++i) {
    if (arrays[static_cast<std::size_t>(i)][0] != i) return 3;
  }
  std::printf("arrays %d, smallest max_size %zu MiB, first full %d, reserved %zu GiB\n", kArrays,
              smallest >> 20, first_full ? 1 : 0, reservoir::reserved_address_space() >> 30);
  if (smallest < kGiB) return 4;
  if (!first_full) return 5;
  return 0;
}

#if !defined(_WIN32)
RESERVOIR_CHILD("scale.address_space_runs_out") {
  // A 256 GiB address-space limit (RLIMIT_AS): default arrays are made until the OS refuses;
  // the refusal is a clean OsAllocationError that names the limit and the remedy.
  struct rlimit lim{};
  lim.rlim_cur = lim.rlim_max = rlim_t{256} << 30;
  if (::setrlimit(RLIMIT_AS, &lim) != 0) return 2;
  std::vector<DynArray<int>> arrays;
  arrays.reserve(100'000);
  std::string message;
  try {
    for (int i = 0; i < 100'000; ++i) {
      arrays.emplace_back();
      arrays.back().push_back(i);
    }
  } catch (const reservoir::OsAllocationError& e) {
    message = e.what();
  }
  if (!arrays.back().empty()) return 3;  // the failed one is empty and valid
  arrays.pop_back();
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (arrays[i].size() != 1 || arrays[i][0] != static_cast<int>(i)) return 4;
  }
  std::printf("made %zu arrays; %s\n", arrays.size(), message.c_str());
  return message.empty() ? 5 : 0;
}
#endif

TEST_SUITE("scale") {
  TEST_CASE("30,000 live default arrays, each able to grow to 1 GiB") {
    if (test::under_wine()) {
      MESSAGE(
          "skipped under Wine, which keeps a byte per reserved page: the ~45 TiB of "
          "reservations would cost it 11 GiB of memory (Windows itself does not)");
      return;
    }
    if (kThreadSanitizer) {
      MESSAGE(
          "skipped under ThreadSanitizer: its fixed memory layout has no room for the ~45 TiB "
          "of reservations (the release, asan and valgrind runs cover it)");
      return;
    }
    const test::ProcessResult r = test::run_child("scale.many_default_arrays");
    INFO(test::describe(r));
    MESSAGE(r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
  }

#if !defined(_WIN32)
  TEST_CASE("when the address space runs out: a clean error naming the limit, nothing lost") {
    if (kSanitized) {
      MESSAGE(
          "skipped under a sanitizer, whose runtime aborts when RLIMIT_AS refuses its own "
          "mappings (the release and valgrind runs cover it)");
      return;
    }
    const test::ProcessResult r = test::run_child("scale.address_space_runs_out");
    INFO(test::describe(r));
    MESSAGE(r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("max_elements") != std::string::npos);
    CHECK(r.output.find("vm.max_map_count") != std::string::npos);
  }
#endif
}
