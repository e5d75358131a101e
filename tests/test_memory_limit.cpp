// Memory limits: a commit step that would cross the process's memory limit is refused with
// OsAllocationError naming the limit, and nothing stored is lost. For real in a Linux memory
// cgroup (created here when running as root), where the same growth without the check is killed
// by the OOM killer, as std::vector would be; and with a limit set by hand everywhere.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

#if defined(__linux__)
#include <sys/stat.h>
#include <unistd.h>
#endif

using reservoir::DynArray;
using reservoir::OsAllocationError;
namespace pal = reservoir::pal;

namespace {

// Grows an array of ints toward `target` bytes; returns 0 if a memory-limit refusal came with
// every element intact, and prints the message.
int grow_until_refused(std::size_t target) {
  DynArray<int> a;
  std::size_t n = 0;
  try {
    for (; n * sizeof(int) < target; ++n)
      a.push_back(static_cast<int>(n));
    std::printf("no refusal: grew to %zu MiB\n", (n * sizeof(int)) >> 20);
    return 3;
  } catch (const OsAllocationError& e) {
    std::printf("refused at %zu MiB: %s\n", (n * sizeof(int)) >> 20, e.what());
  }
  if (a.size() != n) return 4;
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != static_cast<int>(i)) return 5;
  }
  return 0;
}

#if defined(__linux__)
// Moves this process into the cgroup directory named by RESERVOIR_TEST_CGROUP.
bool join_test_cgroup() {
  const char* dir = std::getenv("RESERVOIR_TEST_CGROUP");
  if (!dir) return false;
  std::ofstream procs(std::string(dir) + "/cgroup.procs");
  procs << ::getpid() << std::flush;
  return static_cast<bool>(procs);
}

// A memory cgroup limited to `limit` bytes, removed again on destruction; empty path if it
// cannot be made here (not root, no memory controller, read-only cgroupfs).
struct TestCgroup {
  std::string path;
  std::string why_not;
  explicit TestCgroup(std::size_t limit) {
    const std::string name = "/reservoir-test-" + std::to_string(::getpid());
    struct Candidate {
      const char* root;
      const char* limit_file;
    };
    // v1 memory controller, or a v2 hierarchy that offers the memory controller.
    for (Candidate c : {Candidate{"/sys/fs/cgroup/memory", "memory.limit_in_bytes"},
                        Candidate{"/sys/fs/cgroup", "memory.max"}}) {
      const std::string root = c.root;
      if (std::string(c.limit_file) == "memory.max") {
        std::ifstream controllers(root + "/cgroup.controllers");
        std::string all;
        std::getline(controllers, all);
        if ((" " + all + " ").find(" memory ") == std::string::npos) continue;
        std::ofstream(root + "/cgroup.subtree_control") << "+memory" << std::flush;
      }
      if (::mkdir((root + name).c_str(), 0755) != 0) {
        why_not = "cannot create " + root + name;
        continue;
      }
      std::ofstream limit_out(root + name + "/" + c.limit_file);
      limit_out << limit << std::flush;
      if (!limit_out) {
        ::rmdir((root + name).c_str());
        why_not = "cannot set " + root + name + "/" + c.limit_file;
        continue;
      }
      path = root + name;
      return;
    }
    if (why_not.empty()) why_not = "no memory cgroup controller is mounted";
  }
  ~TestCgroup() {
    if (!path.empty()) ::rmdir(path.c_str());
  }
};
#endif

}  // namespace

#if defined(__linux__)
RESERVOIR_CHILD("memory_limit.cgroup_checked") {
  if (!join_test_cgroup()) return 2;
  return grow_until_refused(std::size_t{2} << 30);
}

RESERVOIR_CHILD("memory_limit.cgroup_unchecked") {
  if (!join_test_cgroup()) return 2;
  reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
  return grow_until_refused(std::size_t{2} << 30);  // expected to be killed instead
}
#endif

TEST_SUITE("memory_limit") {
  TEST_CASE("a limit set by hand: the step that would cross it is refused, nothing is lost") {
    const std::size_t rss = pal::current_rss();
    if (rss == 0) {
      MESSAGE("this OS does not report the resident set: skipped");
      return;
    }
    reservoir::set_memory_limit(rss + (std::size_t{96} << 20));
    const std::size_t headroom = reservoir::memory_limit_headroom();
    CHECK(headroom < (std::size_t{96} << 20));
    CHECK(grow_until_refused(std::size_t{1} << 30) == 0);
    {
      reservoir::ArenaOptions off;
      off.respect_memory_limit = false;  // per arena: not checked
      DynArray<int> a(reservoir::max_elements(std::size_t{64} << 20), off);
      CHECK_NOTHROW(a.resize(std::size_t{32} << 20));  // 128 MiB, past the limit
    }
    reservoir::set_memory_limit(reservoir::kMemoryLimitOff);
    CHECK(reservoir::memory_limit_headroom() == reservoir::kMemoryLimitOff);
    reservoir::set_memory_limit(reservoir::kMemoryLimitAuto);
  }

#if defined(__linux__)
  TEST_CASE("in a real memory cgroup of 512 MiB: a clean exception instead of an OOM kill") {
    TestCgroup cg(std::size_t{512} << 20);
    if (cg.path.empty()) {
      MESSAGE("skipped: " << cg.why_not << " (needs root and a memory cgroup controller)");
      return;
    }
    ::setenv("RESERVOIR_TEST_CGROUP", cg.path.c_str(), 1);
    const test::ProcessResult checked = test::run_child("memory_limit.cgroup_checked");
    MESSAGE("checked: " << test::describe(checked) << ": " << checked.output);
    CHECK(checked.exited);
    CHECK(checked.exit_code == 0);
    CHECK(checked.output.find("memory limit is 512 MiB") != std::string::npos);
    // The control: the same growth with the check off dies as std::vector's would.
    const test::ProcessResult unchecked = test::run_child("memory_limit.cgroup_unchecked");
    MESSAGE("unchecked: " << test::describe(unchecked) << ": " << unchecked.output);
    CHECK_FALSE(unchecked.exited);
    CHECK(unchecked.signal == 9);
    ::unsetenv("RESERVOIR_TEST_CGROUP");
  }
#endif
}
