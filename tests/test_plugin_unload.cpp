#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
// A shared object that links the static library is loaded, used from several threads and
// unloaded, again and again (tests/plugin/plugin.cpp). The threads are the host's: they call into
// the plugin while it is loaded and end after it is unloaded, so the OS's thread-exit cleanup
// runs after the plugin's code is gone. Each cycle must leave nothing behind: no mapping, no
// address space, no thread key; a thread ending or a fork() after the unload must call nothing
// of the plugin's. The host links nothing of reservoir, so the plugin's copy is the only one.
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using UseFn = long long (*)(int rounds);

// What one round of reservoir_plugin_use returns (plugin.cpp): 0+...+999, plus the sizes.
constexpr long long kRoundSum = 999LL * 1000 / 2 + 1000 + 100 + 1000 + 1000;

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

// Loads the plugin; the host's threads (and the main thread) use it; it is unloaded while those
// threads still run; they end after it. False (with a message) if a step fails.
bool cycle(int threads) {
  void* const plugin = dlopen(RESERVOIR_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    MESSAGE("dlopen: " << dlerror());
    return false;
  }
  const auto use = reinterpret_cast<UseFn>(dlsym(plugin, "reservoir_plugin_use"));
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
  const bool closed = dlclose(plugin) == 0;
  // Really gone: otherwise this test would show nothing.
  void* const still = dlopen(RESERVOIR_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (still != nullptr) dlclose(still);
  {
    std::lock_guard lock(m);
    unloaded = true;
  }
  cv.notify_all();
  for (std::thread& w : workers)
    w.join();
  if (!closed || still != nullptr || !sums_right || !main_right) {
    MESSAGE("dlclose ok " << closed << ", still loaded " << (still != nullptr) << ", sums right "
                          << (sums_right && main_right));
    return false;
  }
  return true;
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

}  // namespace

TEST_SUITE("plugin") {
  TEST_CASE("a plugin that links reservoir is loaded, used and unloaded 1000 times") {
    // The first cycles warm up what the host keeps anyway: the C library's thread stacks and
    // per-thread heaps.
    for (int i = 0; i < 20; ++i)
      REQUIRE(cycle(3));
    const std::size_t maps_before = mapping_count();
    const std::size_t kib_before = address_space_kib();
    const std::size_t heap_before = heap_in_use();
    const long key_before = free_key();
    REQUIRE(key_before >= 0);
    for (int i = 0; i < 1000; ++i) {
      REQUIRE(cycle(3));
      if (i % 100 == 0) REQUIRE(fork_is_clean());
    }
    CHECK(fork_is_clean());
    const std::size_t maps_after = mapping_count();
    const std::size_t kib_after = address_space_kib();
    const std::size_t heap_after = heap_in_use();
    INFO("mappings " << maps_before << " -> " << maps_after << ", VmSize " << kib_before
                     << " KiB -> " << kib_after << " KiB, heap in use " << heap_before << " -> "
                     << heap_after << " bytes");
    // One mapping or one default array's slot left behind per cycle would show as 1000 mappings
    // or 64 GiB; the slack is the host's own (a thread stack or heap the C library keeps).
    CHECK(maps_after <= maps_before + 8);
    CHECK(kib_after <= kib_before + 64 * 1024);
    CHECK(free_key() == key_before);
    // The plugin's state on the heap, left behind by each unload, would show here (the slack is
    // what the host's own threads and output leave).
    CHECK(heap_after <= heap_before + 64 * 1024);
  }
}
