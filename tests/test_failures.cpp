// Ways a process using reservoir could die, hang or starve that std::vector survives, each run as
// a user meets it (in a child process where it may kill or change the process), with the same
// body on std::vector where it has defined behaviour: commit means commit (a write past the
// committed prefix faults, by default, on every OS), locked memory, a lowered data limit, a
// memory limit that can no longer be read, a refused populate, a thread on a low stack, and
// destroyed arrays cached by live threads.
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

#if !defined(_WIN32)
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/stat.h>

#include <fstream>
#endif

using reservoir::Arena;
using reservoir::DynArray;
using reservoir::OsAllocationError;
namespace pal = reservoir::pal;

namespace {

// ---- commit means commit -------------------------------------------------------------------------

// The example a new user tries: a 1 GiB arena, grown, written one byte past committed().
RESERVOIR_CHILD("failures.write_past_commit.arena") {
  Arena a(std::size_t{1} << 30);
  char* p = static_cast<char*>(a.grow(10));
  a.grow(3 * 4096);
  if (a.committed() >= a.reserved()) return 2;
  test::expect_fault_here();
  static_cast<volatile char*>(p)[a.committed()] = 1;
  return 0;
}

// The same past a default DynArray's committed prefix (a large pool slot).
RESERVOIR_CHILD("failures.write_past_commit.dynarray") {
  DynArray<int> a;
  for (int i = 0; i < 1000; ++i)
    a.push_back(i);
  auto* past = static_cast<volatile std::byte*>(a.arena().base()) + a.arena().committed();
  if (a.arena().committed() >= a.arena().reserved()) return 2;
  test::expect_fault_here();
  *past = std::byte{1};
  return 0;
}

TEST_SUITE("failures") {
  TEST_CASE("commit means commit: by default a write past committed() faults") {
    CHECK_FALSE(reservoir::open_pool_chunks());
    for (const char* name :
         {"failures.write_past_commit.arena", "failures.write_past_commit.dynarray"}) {
      CAPTURE(name);
      const test::ProcessResult r = test::run_child(name);
      CHECK_MESSAGE(test::died_of_access_violation(r), test::describe(r));
    }
  }
}

}  // namespace
