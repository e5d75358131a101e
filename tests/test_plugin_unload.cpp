// A shared object that links the static library is loaded, used from several threads and
// unloaded, again and again (tests/plugin/plugin.cpp). The threads are the host's: they call into
// the plugin while it is loaded and end after it is unloaded, so the OS's thread-exit cleanup
// runs after the plugin's code is gone. Each cycle must leave nothing behind: no mapping, no
// address space, no heap, no thread key (Windows: FLS index); a thread ending or a fork() after
// the unload must call nothing of the plugin's. The host links nothing of reservoir, so the
// plugin's copy is the only one. Linux (dlopen) and Windows (LoadLibrary; run under Wine here).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using UseFn = long long (*)(int rounds);

// What one round of reservoir_plugin_use returns (plugin.cpp): 0+...+999, plus the sizes.
constexpr long long kRoundSum = 999LL * 1000 / 2 + 1000 + 100 + 1000 + 1000;

#if defined(_WIN32)

// Wine starts threads slowly: fewer cycles, the same checks.
constexpr int kCycles = 100;

void* load() {
  return reinterpret_cast<void*>(::LoadLibraryA(RESERVOIR_PLUGIN_PATH));
}
UseFn find_use(void* plugin) {
  return reinterpret_cast<UseFn>(reinterpret_cast<void*>(
      ::GetProcAddress(static_cast<HMODULE>(plugin), "reservoir_plugin_use")));
}
bool unload(void* plugin) {
  return ::FreeLibrary(static_cast<HMODULE>(plugin)) != 0;
}
bool still_loaded() {
  return ::GetModuleHandleA(RESERVOIR_PLUGIN_PATH) != nullptr;
}
std::string load_error() {
  return "error " + std::to_string(::GetLastError());
}

// The process's mappings (regions not free) and their bytes, in KiB.
struct Mappings {
  std::size_t count = 0;
  std::size_t kib = 0;
};
Mappings mappings() {
  Mappings m;
  MEMORY_BASIC_INFORMATION info;
  for (const char* p = nullptr; ::VirtualQuery(p, &info, sizeof info) == sizeof info;) {
    if (info.State != MEM_FREE) {
      ++m.count;
      m.kib += info.RegionSize >> 10;
    }
    const char* const next = static_cast<const char*>(info.BaseAddress) + info.RegionSize;
    if (next <= p) break;
    p = next;
  }
  return m;
}
std::size_t mapping_count() {
  return mappings().count;
}
std::size_t address_space_kib() {
  return mappings().kib;
}
std::size_t heap_in_use() {
  return 0;  // not measured here
}

// The FLS index FlsAlloc gives now (then freed): the lowest free one, so the same one before and
// after shows that no index was left taken.
long free_key() {
  const DWORD index = ::FlsAlloc(nullptr);
  if (index == FLS_OUT_OF_INDEXES) return -1;
  ::FlsFree(index);
  return static_cast<long>(index);
}

bool fork_is_clean() {
  return true;  // no fork on Windows
}

#else

constexpr int kCycles = 1000;

void* load() {
  return ::dlopen(RESERVOIR_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
}
UseFn find_use(void* plugin) {
  return reinterpret_cast<UseFn>(::dlsym(plugin, "reservoir_plugin_use"));
}
bool unload(void* plugin) {
  return ::dlclose(plugin) == 0;
}
bool still_loaded() {
  void* const still = ::dlopen(RESERVOIR_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (still != nullptr) ::dlclose(still);
  return still != nullptr;
}
std::string load_error() {
  return ::dlerror();
}

std::size_t mapping_count() {
  std::ifstream maps("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(maps, line);)
    ++n;
  return n;
}

// VmSize from /proc/self/status, in KiB.
std::size_t address_space_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10);
  }
  return 0;
}

// The heap bytes in use, every malloc arena's (glibc's mallinfo2).
std::size_t heap_in_use() {
  return mallinfo2().uordblks;
}

// The key pthread_key_create gives now (then deleted again): glibc gives the lowest free one, so
// the same key before and after shows that no key was left taken. -1 if none is left.
long free_key() {
  pthread_key_t key;
  if (pthread_key_create(&key, nullptr) != 0) return -1;
  pthread_key_delete(key);
  return static_cast<long>(key);
}

// fork() now: the child must not run a fork handler of an unloaded plugin.
bool fork_is_clean() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid < 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#endif

// Loads the plugin; the host's threads (and the main thread) use it; it is unloaded while those
// threads still run; they end after it. False (with a message) if a step fails.
bool cycle(int threads) {
  void* const plugin = load();
  if (plugin == nullptr) {
    MESSAGE("loading " << RESERVOIR_PLUGIN_PATH << ": " << load_error());
    return false;
  }
  const UseFn use = find_use(plugin);
  if (use == nullptr) return false;

  std::mutex m;
  std::condition_variable cv;
  int used = 0;
  bool unloaded = false;
  bool sums_right = true;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      const long long sum = use(2);
      std::unique_lock lock(m);
      sums_right = sums_right && sum == 2 * kRoundSum;
      ++used;
      cv.notify_all();
      cv.wait(lock, [&] { return unloaded; });
    });  // ends after the unload: its thread-exit cleanup runs then
  }
  const bool main_right = use(1) == kRoundSum;
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return used == threads; });
  }
  const bool closed = unload(plugin);
  const bool still = still_loaded();  // really gone: otherwise this test would show nothing
  {
    std::lock_guard lock(m);
    unloaded = true;
  }
  cv.notify_all();
  for (std::thread& w : workers)
    w.join();
  if (!closed || still || !sums_right || !main_right) {
    MESSAGE("unload ok " << closed << ", still loaded " << still << ", sums right "
                         << (sums_right && main_right));
    return false;
  }
  return true;
}

}  // namespace

TEST_SUITE("plugin") {
  TEST_CASE("a plugin that links reservoir is loaded, used and unloaded again and again") {
    // The first cycles warm up what the host keeps anyway: the C library's thread stacks and
    // per-thread heaps.
    for (int i = 0; i < 20; ++i)
      REQUIRE(cycle(3));
    const std::size_t maps_before = mapping_count();
    const std::size_t kib_before = address_space_kib();
    const std::size_t heap_before = heap_in_use();
    const long key_before = free_key();
    REQUIRE(key_before >= 0);
    for (int i = 0; i < kCycles; ++i) {
      REQUIRE(cycle(3));
      if (i % 100 == 0) REQUIRE(fork_is_clean());
    }
    CHECK(fork_is_clean());
    const std::size_t maps_after = mapping_count();
    const std::size_t kib_after = address_space_kib();
    const std::size_t heap_after = heap_in_use();
    INFO(kCycles << " cycles: mappings " << maps_before << " -> " << maps_after
                 << ", address space " << kib_before << " KiB -> " << kib_after
                 << " KiB, heap in use " << heap_before << " -> " << heap_after << " bytes");
    // One mapping or one default array's slot left behind per cycle would show as a mapping a
    // cycle or 64 MiB and more; the slack is the host's own (a thread stack or heap the C library
    // keeps).
    CHECK(maps_after <= maps_before + 8);
    CHECK(kib_after <= kib_before + 64 * 1024);
    CHECK(free_key() == key_before);
    // The plugin's state on the heap, left behind by each unload, would show here.
    CHECK(heap_after <= heap_before + 64 * 1024);
  }
}
