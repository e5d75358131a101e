// Kernel mappings (Linux vm.max_map_count): live arrays are bounded by memory, not by the
// process's mapping count, and the library never takes the rest of the program's mappings. The
// library holds at most half of vm.max_map_count; a refusal at that budget names the call, the
// limit, the count and the remedies, with every earlier array intact; what destroyed arrays held
// comes back without trim_pools(). On kernels with guard markers (Linux 6.13+) default arrays
// past the first few thousand live in guarded chunks: one mapping for many arrays, each still
// faulting at its committed end and below its first element. Each scenario runs in a child.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "pal_testing.hpp"
#include "support.hpp"

#if defined(__linux__)
#include <dlfcn.h>
#endif
#if !defined(_WIN32)
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#endif

using reservoir::DynArray;
using reservoir::OsAllocationError;
namespace pal = reservoir::pal;

#if !defined(_WIN32) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define RESERVOIR_TEST_MAPPINGS 1
#endif

#if defined(RESERVOIR_TEST_MAPPINGS)
namespace {

// The array i of a fill: 1-100 ints, each naming its array and place.
int value_of(std::size_t i, std::size_t j) {
  return static_cast<int>(i * 101 + j);
}
std::size_t length_of(std::size_t i) {
  return i % 100 + 1;
}
void fill(DynArray<int>& a, std::size_t i) {
  for (std::size_t j = 0; j < length_of(i); ++j)
    a.push_back(value_of(i, j));
}
bool intact(const DynArray<int>& a, std::size_t i) {
  if (a.size() != length_of(i)) return false;
  for (std::size_t j = 0; j < a.size(); ++j) {
    if (a[j] != value_of(i, j)) return false;
  }
  return true;
}

// Lines of /proc/self/maps: the process's kernel mappings (0 where there is no /proc).
std::size_t process_mappings() {
  std::ifstream in("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);)
    ++n;
  return n;
}

// The span of the /proc/self/maps line holding `p`, or 0.
std::size_t mapping_span(const void* p) {
  std::ifstream in("/proc/self/maps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  for (std::string line; std::getline(in, line);) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2 && addr >= lo && addr < hi) {
      return static_cast<std::size_t>(hi - lo);
    }
  }
  return 0;
}

// Default arrays of 1-100 ints, made until `most` or the library's refusal (printed, and its
// code checked): the number made. Every array made is intact afterwards or *ok is false.
std::size_t fill_until_refused(std::vector<DynArray<int>>& arrays, std::size_t most,
                               std::string* message, bool* ok) {
  *ok = true;
  try {
    while (arrays.size() < most) {
      arrays.emplace_back();
      fill(arrays.back(), arrays.size() - 1);
    }
  } catch (const OsAllocationError& e) {
    *message = e.what();
    if (e.code() != reservoir::Refusal::mapping_budget) *ok = false;
    if (!arrays.back().empty()) *ok = false;  // the refused array is empty and valid
    arrays.pop_back();
  }
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (!intact(arrays[i], i)) *ok = false;
  }
  return arrays.size();
}

// What the rest of the program needs still works: 64 threads, a plain 256 MiB mmap (written),
// dlopen of a library the process has not loaded. 0 when all did.
int rest_of_the_program_runs() {
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  try {
    for (int t = 0; t < 64; ++t)
      threads.emplace_back([&ran] { ran.fetch_add(1); });
  } catch (const std::exception& e) {
    std::printf("thread %zu failed: %s\n", threads.size(), e.what());
  }
  for (std::thread& t : threads)
    t.join();
  if (ran.load() != 64) return 20;
  const std::size_t bytes = std::size_t{256} << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 21;
  static_cast<volatile char*>(p)[bytes - 1] = 1;
  if (::munmap(p, bytes) != 0) return 22;
#if defined(__linux__)
  void* lib = ::dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("dlopen: %s\n", ::dlerror());
    return 23;
  }
  if (::dlsym(lib, "cos") == nullptr) return 24;
#endif
  return 0;
}

// A small fake vm.max_map_count, so that the budget is met after a few hundred arrays.
constexpr std::size_t kFakeMaxMapCount = 1000;

}  // namespace

// Closed chunks only (no guard markers, as on kernels before 6.13 and under strict overcommit),
// under a budget of 500 mappings: filled until the library refuses; the refusal is checked, then
// half the arrays are destroyed and as many made again, with no trim_pools().
RESERVOIR_CHILD("maps.budget_refusal_and_reuse") {
  pal::testing::refuse_guard_install(true);
  pal::testing::set_max_map_count(kFakeMaxMapCount);
  reservoir::trim_pools();
  std::vector<DynArray<int>> arrays;
  std::string message;
  bool ok = false;
  const std::size_t made = fill_until_refused(arrays, 100'000, &message, &ok);
  std::printf("made %zu; %s\n", made, message.c_str());
  if (!ok) return 3;
  if (message.empty() || made < 100) return 4;
  // The refusal is the library's, and says what it must.
  for (const char* words : {"vm.max_map_count", "1000", "reservoir holds", "push_back",
                            "max_elements", "std::vector", "sysctl"}) {
    if (message.find(words) == std::string::npos) {
      std::printf("missing: %s\n", words);
      return 5;
    }
  }
  // Refused again at once: the same error, nothing lost.
  {
    DynArray<int> again;
    try {
      again.push_back(1);
      return 6;
    } catch (const OsAllocationError& e) {
      if (e.code() != reservoir::Refusal::mapping_budget) return 7;
    }
  }
  // Half destroyed (every other one), then as many made again: each must succeed.
  std::vector<std::size_t> freed;
  for (std::size_t i = 0; i < arrays.size(); i += 2) {
    arrays[i] = DynArray<int>();
    freed.push_back(i);
  }
  try {
    for (std::size_t i : freed)
      fill(arrays[i], i);
  } catch (const OsAllocationError& e) {
    std::printf("after freeing %zu: %s\n", freed.size(), e.what());
    return 8;
  }
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (!intact(arrays[i], i)) return 9;
  }
  std::printf("freed and made again %zu\n", freed.size());
  return 0;
}

// Closed chunks only, under the real vm.max_map_count: filled until the library refuses, then
// the rest of the program still runs.
RESERVOIR_CHILD("maps.no_guard_then_the_program") {
  pal::testing::refuse_guard_install(true);
  if (pal::max_map_count() == 0) {
    std::printf("skipped: no vm.max_map_count here\n");
    return 0;
  }
  std::vector<DynArray<int>> arrays;
  arrays.reserve(200'000);
  std::string message;
  bool ok = false;
  const std::size_t made = fill_until_refused(arrays, 200'000, &message, &ok);
  std::printf("made %zu, process mappings %zu of %zu; %s\n", made, process_mappings(),
              pal::max_map_count(), message.c_str());
  if (!ok) return 3;
  if (process_mappings() > pal::max_map_count() / 2 + 1000) return 4;
  return rest_of_the_program_runs();
}

// 200,000 live default arrays of 1-100 ints under the real vm.max_map_count, on a kernel with
// guard markers: far fewer mappings than arrays, then the rest of the program still runs.
RESERVOIR_CHILD("maps.guarded_200k") {
  std::vector<DynArray<int>> arrays;
  arrays.reserve(200'000);
  std::string message;
  bool ok = false;
  const std::size_t made = fill_until_refused(arrays, 200'000, &message, &ok);
  const std::size_t maps = process_mappings();
  std::printf("made %zu, process mappings %zu; %s\n", made, maps, message.c_str());
  if (!ok) return 3;
  if (made != 200'000) return 4;
  if (maps > 20'000) return 5;  // well under the 32,765 half of the default 65,530
  return rest_of_the_program_runs();
}

// A default array in a guarded chunk (made after enough others to switch the chunks to guarded,
// under a small fake budget), grown to `grow` ints and then cut to `keep` (shrink_to_fit) when
// keep < grow; then the byte at its committed end (`below` false) or just below its first
// element is written: the child must die of it.
// With `bound`, the arrays are DynArray<int>(max_elements(bound)): a small class's slots.
int guarded_access(std::size_t grow, std::size_t keep, bool below, std::size_t bound = 0) {
  pal::testing::set_max_map_count(4 * kFakeMaxMapCount);
  reservoir::trim_pools();
  if (!pal::guard_markers()) {
    std::printf("skipped: no guard markers on this kernel\n");
    return 0;
  }
  const auto make = [bound] {
    return bound ? DynArray<int>(reservoir::max_elements(bound)) : DynArray<int>();
  };
  std::vector<DynArray<int>> before;
  for (int i = 0; i < 1000; ++i)
    before.push_back(make());
  for (DynArray<int>& a : before)
    a.push_back(1);
  DynArray<int> a = make();
  for (std::size_t i = 0; i < grow; ++i)
    a.push_back(static_cast<int>(i));
  if (keep < grow) {
    a.resize(keep);
    a.shrink_to_fit();
  }
  // In a guarded chunk: one mapping far larger than the array's commit.
  if (mapping_span(a.data()) < (bound ? std::size_t{2} << 20 : std::size_t{1} << 30)) return 3;
  auto* base = static_cast<volatile std::byte*>(a.arena().base());
  const std::size_t committed = a.arena().committed();
  base[committed - 1] = std::byte{1};  // the last committed byte is the array's
  if (a[0] != 0) return 4;
  test::expect_fault_here();
  if (below) {
    base[-1] = std::byte{1};
  } else {
    base[committed] = std::byte{1};
  }
  return 0;
}

RESERVOIR_CHILD("maps.guarded_end") {
  return guarded_access(50, 50, false);
}
RESERVOIR_CHILD("maps.guarded_end_grown") {
  return guarded_access(100'000, 100'000, false);
}
RESERVOIR_CHILD("maps.guarded_end_trimmed") {
  return guarded_access(100'000, 10, false);
}
RESERVOIR_CHILD("maps.guarded_below") {
  return guarded_access(50, 50, true);
}
RESERVOIR_CHILD("maps.guarded_small_end") {
  return guarded_access(50, 50, false, 65'536);
}
RESERVOIR_CHILD("maps.guarded_small_end_grown") {
  return guarded_access(60'000, 60'000, false, 65'536);
}
RESERVOIR_CHILD("maps.guarded_small_end_trimmed") {
  return guarded_access(60'000, 10, false, 65'536);
}
RESERVOIR_CHILD("maps.guarded_small_below") {
  return guarded_access(50, 50, true, 65'536);
}

// 50,000 live DynArray<int>(max_elements(65536)) (a small class's 256 KiB slots) of 1-100 ints
// under the real vm.max_map_count: far fewer mappings than arrays.
RESERVOIR_CHILD("maps.guarded_small_50k") {
  std::vector<DynArray<int>> arrays;
  arrays.reserve(50'000);
  try {
    for (std::size_t i = 0; i < 50'000; ++i) {
      arrays.emplace_back(reservoir::max_elements(65'536));
      fill(arrays.back(), i);
    }
  } catch (const OsAllocationError& e) {
    std::printf("refused after %zu: %s\n", arrays.size(), e.what());
    return 3;
  }
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (!intact(arrays[i], i)) return 4;
  }
  const std::size_t maps = process_mappings();
  std::printf("made %zu, process mappings %zu\n", arrays.size(), maps);
  return maps < 20'000 ? rest_of_the_program_runs() : 5;
}

// A forked child keeps a guarded array's markers: its write at the array's committed end faults
// (the grandchild's death is checked here, in the child), and the array's elements are its own.
RESERVOIR_CHILD("maps.guarded_fork") {
  pal::testing::set_max_map_count(4 * kFakeMaxMapCount);
  reservoir::trim_pools();
  if (!pal::guard_markers()) return 0;
  std::vector<DynArray<int>> before(1000);
  for (DynArray<int>& a : before)
    a.push_back(1);
  DynArray<int> a;
  fill(a, 41);
  if (mapping_span(a.data()) < (std::size_t{1} << 30)) return 3;
  const pid_t pid = ::fork();
  if (pid < 0) return 4;
  if (pid == 0) {
    if (!intact(a, 41)) ::_exit(5);
    test::expect_fault_here();
    static_cast<volatile std::byte*>(a.arena().base())[a.arena().committed()] = std::byte{1};
    ::_exit(0);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 6;
  if (!WIFSIGNALED(status)) return 7;
  return WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS ? 0 : 8;
}

// Destroyed guarded arrays, recycled: the next arrays see their own elements only and their
// committed ends still fault (checked by the children above); here the contents.
RESERVOIR_CHILD("maps.guarded_recycled") {
  pal::testing::set_max_map_count(4 * kFakeMaxMapCount);
  reservoir::trim_pools();
  std::vector<DynArray<int>> arrays(3000);
  for (std::size_t i = 0; i < arrays.size(); ++i)
    fill(arrays[i], i);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 1; i < arrays.size(); i += 2)
      arrays[i] = DynArray<int>();
    for (std::size_t i = 1; i < arrays.size(); i += 2)
      fill(arrays[i], i);
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      if (!intact(arrays[i], i)) return 3;
    }
  }
  return 0;
}

// The library's own count of the kernel mappings it holds (address_space.cpp).
namespace reservoir::detail {
std::size_t mappings_held() noexcept;
}

// The message of the refusal at the mapping budget that grow throws, "" (printed) otherwise.
template <class F>
std::string budget_refusal(F&& grow) {
  try {
    grow();
    std::printf("not refused\n");
  } catch (const OsAllocationError& e) {
    if (e.code() == reservoir::Refusal::mapping_budget) return e.what();
    std::printf("refused otherwise: %s\n", e.what());
  } catch (const std::exception& e) {
    std::printf("threw: %s\n", e.what());
  }
  return {};
}

// Whether `message`, a refusal at the mapping budget, names `call` (the user's), the limit, the
// count the library holds and the remedies, and no list of calls in its place; prints it if not.
// `named` follows the call's name: " needed it. ", or in a ConcurrentDynArray whose claims the
// refusal closed, " needed it for index i; nothing was appended. " (by default either: where
// there is no solo mode, every ConcurrentDynArray refusal closes the claims).
bool names_budget_refusal(const std::string& message, const std::string& call,
                          const std::string& named = "") {
  const std::string held =
      "reservoir holds " + std::to_string(reservoir::detail::mappings_held()) + " kernel mappings";
  const std::string limit = "vm.max_map_count (" + std::to_string(kFakeMaxMapCount) + ")";
  const std::string as_named = ". reservoir::" + call + (named.empty() ? " needed it. " : named);
  if (message.find(as_named) == std::string::npos &&
      !(named.empty() &&
        message.find(". reservoir::" + call + " needed it for index ") != std::string::npos)) {
    std::printf("%s: missing \"%s\" in: %s\n", call.c_str(), as_named.c_str(), message.c_str());
    return false;
  }
  for (const std::string& words :
       {limit, held, std::string("max_elements(n)"), std::string("std::vector"),
        std::string("sysctl vm.max_map_count")}) {
    if (message.find(words) == std::string::npos) {
      std::printf("%s: missing \"%s\" in: %s\n", call.c_str(), words.c_str(), message.c_str());
      return false;
    }
  }
  if (message.find("(push_back, emplace_back") != std::string::npos) {
    std::printf("%s: a list of calls in: %s\n", call.c_str(), message.c_str());
    return false;
  }
  return true;
}

// Closed chunks only, under a budget of 500 mappings, filled until the library refuses: then the
// first growth of each growing call of DynArray, ConcurrentDynArray and Arena is refused, names
// that call, and changes nothing; every earlier array is intact.
RESERVOIR_CHILD("maps.budget_names_the_call") {
  using reservoir::ConcurrentDynArray;
  pal::testing::refuse_guard_install(true);
  pal::testing::set_max_map_count(kFakeMaxMapCount);
  reservoir::trim_pools();
  // Reserved before the budget is met, first committed after: their first growth meets it.
  reservoir::ArenaOptions fresh;
  fresh.reuse_reservation = false;
  std::vector<ConcurrentDynArray<int>> concurrent;
  for (int k = 0; k < 7; ++k)
    concurrent.emplace_back(reservoir::max_elements(100'000), fresh);
  std::vector<reservoir::Arena> arenas;
  for (int k = 0; k < 3; ++k)
    arenas.emplace_back(std::size_t{1} << 20, fresh);
  std::vector<DynArray<int>> bounded;
  for (int k = 0; k < 4; ++k)
    bounded.emplace_back(reservoir::max_elements(100'000), fresh);
  std::vector<DynArray<int>> arrays;
  std::string message;
  bool ok = false;
  const std::size_t made = fill_until_refused(arrays, 100'000, &message, &ok);
  std::printf("made %zu; %s\n", made, message.c_str());
  if (!ok || made < 100) return 3;
  int wrong = names_budget_refusal(message, "DynArray::push_back/emplace_back") ? 0 : 1;
  const std::vector<int> one{1};
  const auto check = [&](const char* call, auto&& grow) {
    const std::string refused = budget_refusal(grow);
    std::printf("%s: %.24s\n", call, refused.c_str());  // what was refused: commit or reserve
    if (!names_budget_refusal(refused, call)) ++wrong;
  };
  // Default arrays: the first growth reserves, then commits; either is refused.
  const auto fresh_default = [&](const char* call, auto&& grow) {
    DynArray<int> a;
    check(call, [&] { grow(a); });
    if (!a.empty() || a.capacity() != 0) ++wrong;
  };
  fresh_default("DynArray::push_back/emplace_back", [](DynArray<int>& a) { a.push_back(1); });
  fresh_default("DynArray::push_back/emplace_back", [](DynArray<int>& a) { a.emplace_back(1); });
  fresh_default("DynArray::resize", [](DynArray<int>& a) { a.resize(10); });
  fresh_default("DynArray::reserve", [](DynArray<int>& a) { a.reserve(10); });
  fresh_default("DynArray::insert/emplace", [](DynArray<int>& a) { a.insert(a.end(), 1); });
  fresh_default("DynArray::insert",
                [&](DynArray<int>& a) { a.insert(a.end(), one.begin(), one.end()); });
  fresh_default("DynArray::append_range", [&](DynArray<int>& a) { a.append_range(one); });
  fresh_default("DynArray::assign", [](DynArray<int>& a) { a.assign(3, 1); });
  check("DynArray(count)", [] { DynArray<int> a(10); });
  // Arrays reserved earlier, bounded: their first commit is refused.
  check("DynArray::push_back/emplace_back", [&] { bounded[0].push_back(1); });
  check("DynArray::resize", [&] { bounded[1].resize(10); });
  check("DynArray::reserve", [&] { bounded[2].reserve(10); });
  check("DynArray::append_range", [&] { bounded[3].append_range(one); });
  for (const DynArray<int>& a : bounded) {
    if (!a.empty() || a.capacity() != 0) ++wrong;
  }
  check("ConcurrentDynArray::push_back/emplace_back", [&] { concurrent[0].push_back(1); });
  check("ConcurrentDynArray::push_back/emplace_back", [&] { concurrent[1].emplace_back(1); });
  check("ConcurrentDynArray::emplace_back_with", [&] {
    concurrent[2].emplace_back_with([](std::size_t i) noexcept { return static_cast<int>(i); });
  });
  check("ConcurrentDynArray::append_range", [&] { concurrent[3].append_range(one); });
  check("ConcurrentDynArray::Writer::flush", [&] {
    auto w = concurrent[4].writer();
    w.push_back(1);
    try {
      w.flush();
    } catch (...) {
      if (w.take_buffered() != std::vector<int>{1}) ++wrong;  // kept: nothing lost
      throw;
    }
  });
  check("ConcurrentDynArray::Writer::push_back/emplace_back", [&] {
    auto w = concurrent[5].writer();
    try {
      for (int i = 0; i < 1000; ++i)  // flushes when its buffer is full
        w.push_back(i);
    } catch (...) {
      if (w.take_buffered().empty()) ++wrong;
      throw;
    }
  });
  // Shared mode (a second thread appends): the refusal closes the claims, and what it throws
  // names the call and the index, then what the refused commit said of the budget.
  if (pal::process_barrier_supported()) {
    std::string shared;
    (void)budget_refusal([&] { concurrent[6].push_back(1); });
    std::thread second([&] { shared = budget_refusal([&] { concurrent[6].push_back(2); }); });
    second.join();
    if (!names_budget_refusal(shared, "ConcurrentDynArray::push_back/emplace_back",
                              " needed it for index 0; nothing was appended. ")) {
      ++wrong;
    }
  }
  for (const ConcurrentDynArray<int>& c : concurrent) {
    if (c.size() != 0) ++wrong;
  }
  check("Arena::grow", [&] { (void)arenas[0].grow(100); });
  check("Arena::allocate", [&] { (void)arenas[1].allocate(100); });
  check("Arena::commit", [&] { arenas[2].commit(100); });
  for (const reservoir::Arena& a : arenas) {
    if (a.size() != 0 || a.committed() != 0) ++wrong;
  }
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (!intact(arrays[i], i)) return 5;
  }
  std::printf("%d wrong\n", wrong);
  return wrong == 0 ? 0 : 6;
}

// Two adjacent arrays in a guarded small class (16,000 bytes take the whole 16 KiB class): the
// first filled, so its end marker is the page below the second's first element, then emptied
// and shrunk. The write just below the second array's first element must still fault.
RESERVOIR_CHILD("maps.guarded_full_slot_neighbour") {
  pal::testing::set_max_map_count(4 * kFakeMaxMapCount);
  reservoir::trim_pools();
  if (!pal::guard_markers()) return 0;
  std::vector<DynArray<int>> before(1000);
  for (DynArray<int>& a : before)
    a.push_back(1);
  // The 256 KiB class: whole pages at every page size up to 64 KiB, filled exactly.
  constexpr std::size_t kInts = 65'536;
  DynArray<int> a{reservoir::max_elements(kInts)};
  DynArray<int> b{reservoir::max_elements(kInts)};
  a.push_back(1);
  b.push_back(2);
  const auto* const pa = reinterpret_cast<const std::byte*>(a.data());
  const auto* const pb = reinterpret_cast<const std::byte*>(b.data());
  // Adjacent slots of one guarded chunk: a's end is b's guard page.
  if (pb != pa + kInts * sizeof(int) + pal::page_size()) return 3;
  if (mapping_span(pb) < (std::size_t{2} << 20)) return 4;
  a.resize(kInts);
  a.clear();
  a.shrink_to_fit();
  if (b[0] != 2) return 5;
  test::expect_fault_here();
  const_cast<volatile std::byte*>(pb)[-1] = std::byte{1};
  return 6;
}

// Default arrays grown past kHugePageThreshold with huge pages on, then cut to 10 ints (kept
// alive, then destroyed): the process's mappings never grow by more than the library counts,
// nor past its budget.
RESERVOIR_CHILD("maps.huge_advice_counted") {
  reservoir::set_huge_pages(reservoir::HugePages::on);
  pal::testing::set_transparent_huge_pages(1);
  pal::testing::set_max_map_count(kFakeMaxMapCount);
  reservoir::trim_pools();
  const std::size_t maps_base = process_mappings();
  const std::size_t held_base = reservoir::detail::mappings_held();
  const std::size_t budget = kFakeMaxMapCount / 2;
  const auto uncounted = [&] {
    const std::size_t grown = process_mappings() - maps_base;
    const std::size_t counted = reservoir::detail::mappings_held() - held_base;
    if (grown > counted || grown > budget) {
      std::printf("maps grew %zu, the library counts %zu (budget %zu)\n", grown, counted, budget);
      return true;
    }
    return false;
  };
  std::vector<DynArray<int>> arrays;
  try {
    while (arrays.size() < 400) {
      arrays.emplace_back();
      arrays.back().resize((std::size_t{5} << 20) / sizeof(int));
      arrays.back().resize(10);
      arrays.back().shrink_to_fit();
      if (uncounted()) return 3;
    }
  } catch (const OsAllocationError& e) {
    if (e.code() != reservoir::Refusal::mapping_budget) return 4;
  }
  if (arrays.size() < 100) return 5;
  if (uncounted()) return 6;
  arrays.clear();
  if (uncounted()) return 7;
  return 0;
}

TEST_SUITE("mappings") {
  TEST_CASE("at the mapping budget: a clear refusal, nothing lost, and freed arrays come back") {
    const test::ProcessResult r = test::run_child("maps.budget_refusal_and_reuse");
    MESSAGE(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("at the mapping budget: each growing call's refusal names that call") {
    const test::ProcessResult r = test::run_child("maps.budget_names_the_call");
    MESSAGE(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("arrays filled to the budget leave the program 64 threads, 256 MiB and a dlopen") {
    if (test::under_valgrind()) {
      MESSAGE("skipped under valgrind: tens of thousands of arrays take minutes there");
      return;
    }
    const test::ProcessResult r = test::run_child("maps.no_guard_then_the_program");
    MESSAGE(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("200,000 live default arrays in a few thousand mappings, then the program runs") {
    if (!pal::guard_markers() || pal::max_map_count() == 0 || test::under_valgrind()) {
      MESSAGE("skipped: this kernel has no guard markers (Linux 6.13+) or no vm.max_map_count");
      return;
    }
    const test::ProcessResult r = test::run_child("maps.guarded_200k");
    MESSAGE(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("50,000 arrays of max_elements(65536) in a few thousand mappings") {
    if (!pal::guard_markers() || pal::max_map_count() == 0 || test::under_valgrind()) {
      MESSAGE("skipped: this kernel has no guard markers (Linux 6.13+) or no vm.max_map_count");
      return;
    }
    const test::ProcessResult r = test::run_child("maps.guarded_small_50k");
    MESSAGE(r.output);
    CHECK_MESSAGE(r.exited, test::describe(r));
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("a guarded array faults at its committed end and below its first element") {
    if (!pal::guard_markers()) {
      MESSAGE("skipped: this kernel has no guard markers (Linux 6.13+)");
      return;
    }
    if (kAddressSanitizer) {  // it reports the write itself, before the page could fault
      MESSAGE("skipped under AddressSanitizer: it reports these writes as overflows first");
      return;
    }
    for (const char* name :
         {"maps.guarded_end", "maps.guarded_end_grown", "maps.guarded_end_trimmed",
          "maps.guarded_below", "maps.guarded_small_end", "maps.guarded_small_end_grown",
          "maps.guarded_small_end_trimmed", "maps.guarded_small_below",
          "maps.guarded_full_slot_neighbour"}) {
      CAPTURE(name);
      const test::ProcessResult r = test::run_child(name);
      CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r) << r.output);
    }
    for (const char* name : {"maps.guarded_recycled", "maps.guarded_fork"}) {
      CAPTURE(name);
      const test::ProcessResult r = test::run_child(name);
      CHECK_MESSAGE((r.exited && r.exit_code == 0), test::describe(r) << r.output);
    }
  }

  TEST_CASE("huge-page advice in chunks and own mappings is counted and undone") {
    if (kAddressSanitizer) {  // its allocator maps regions of its own meanwhile
      MESSAGE("skipped under AddressSanitizer: its own mappings grow /proc/self/maps");
      return;
    }
    const test::ProcessResult r = test::run_child("maps.huge_advice_counted");
    CHECK_MESSAGE((r.exited && r.exit_code == 0), test::describe(r) << r.output);
  }
}
#endif
