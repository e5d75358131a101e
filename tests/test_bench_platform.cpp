// Tests of bench/platform.hpp and of the process layer under it (tests/process/process.hpp): the
// process statistics and child processes the bench relies on.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#if !defined(_WIN32)
#include <signal.h>
#endif

#include <reservoir/pal.hpp>

#include "platform.hpp"
#include "support.hpp"

namespace pal = reservoir::pal;
namespace rb = reservoir::bench;
namespace rp = reservoir::process;

RESERVOIR_CHILD("bench_platform.echo") {
  std::fputs("hello from the child", stdout);
  return 7;
}

RESERVOIR_CHILD("bench_platform.hang") {
  for (;;)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

TEST_SUITE("bench") {
  TEST_CASE("the peak RSS covers the bytes touched and never falls") {
    constexpr std::size_t kMiB = std::size_t{1} << 20;
    const std::size_t n = 64 * kMiB;
    void* base = nullptr;
    REQUIRE_FALSE(pal::reserve(n, &base));
    REQUIRE_FALSE(pal::commit(base, n));
    const std::size_t peak_before = rb::peak_rss();
    REQUIRE(peak_before > 0);
    // A byte every 4 KiB, the smallest page of any supported OS.
    for (std::size_t i = 0; i < n; i += 4096)
      static_cast<volatile unsigned char*>(base)[i] = 1;
    const std::size_t rss_touched = pal::current_rss();
    // The peak covers what is resident now (within 1 MiB: getrusage's ru_maxrss, the macOS and
    // FreeBSD path, is the kernel's high-water mark, which Linux updates lazily).
    CHECK(rb::peak_rss() + kMiB >= rss_touched);
    CHECK(rb::peak_rss() >= peak_before);
    REQUIRE_FALSE(pal::release(base, n));
    CHECK(rb::peak_rss() + kMiB >= rss_touched);
  }

  TEST_CASE("available memory is known") {
    CHECK(rb::available_memory() > 0);
  }

  TEST_CASE("run_process runs a child, captures stdout and the exit code") {
    CHECK_FALSE(rb::self_executable_path().empty());
    rb::ProcessResult r;
    REQUIRE_FALSE(rb::run_process(rb::self_reexec_path(), {"--child", "bench_platform.echo"}, &r));
    CHECK(r.exited);
    CHECK(r.exit_code == 7);
    CHECK(r.output == "hello from the child");
  }

  TEST_CASE(
      "a killed child is collected with how it ended; a program that is not there is an error") {
    rp::Child child;
    REQUIRE_FALSE(child.start(rb::self_reexec_path(), {"--child", "bench_platform.hang"}));
    const long id = child.id();
    CHECK(id > 0);
    CHECK(rp::process_running(id));
    CHECK(child.start(rb::self_reexec_path(), {}));  // one process per Child
    REQUIRE_FALSE(child.kill());
    rb::ProcessResult r;
    REQUIRE_FALSE(child.wait(&r));
    CHECK(child.id() == 0);
#if defined(_WIN32)
    CHECK(r.exited);
    CHECK(r.exit_code == 1);
#else
    CHECK_FALSE(r.exited);
    CHECK(r.signal == SIGKILL);
#endif
    CHECK_FALSE(rp::process_running(id));
    CHECK(child.wait(&r));  // nothing left to wait for
    rb::ProcessResult none;
    CHECK(rb::run_process(rb::self_executable_path() + ".no-such-program", {}, &none));
  }
}
