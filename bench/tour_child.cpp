// reservoir-bench: the child side of every tour table.
//   --child memory|throughput|latency|concurrent|collatz|timeline|many|mixed CONTAINER TYPE SIZE
//           GRANULE MAX_STEP PREFAULT HUGE BATCH NS_PER_TICK RESERVE_BYTES
// (mixed: SIZE is the iteration count, BATCH the seed, TYPE one of mixed::kTypes)
// prints one line "ok key=value ..." and exits 0; "error <what>" and exit 3 on an exception.
#include "tour.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "clock.hpp"
#include "collatz.hpp"
#include "histogram.hpp"
#include "kernel_calls.hpp"
#include "many_arrays.hpp"
#include "throughput_build.hpp"
#include "timeline.hpp"

#if !defined(_WIN32)
#include <unistd.h>
#endif

namespace reservoir::bench::tour {

namespace {

std::string percentiles_line(const rb::LogLinearHistogram& h) {
  std::string s = fmt::format("count={} min={} p50={} p90={} p99={} p99_9={} p99_99={} max={}",
                              h.count(), h.min(), h.percentile(50), h.percentile(90),
                              h.percentile(99), h.percentile(99.9), h.percentile(99.99), h.max());
  for (std::size_t d = 0; d < rb::LogLinearHistogram::kDecades; ++d) {
    s += fmt::format(" d{}={}", d, h.decades()[d]);
  }
  return s;
}

}  // namespace

int child_main(int argc, char** argv) {
  if (argc != 13) {
    std::fprintf(stderr, "reservoir-bench: bad --child arguments\n");
    return 2;
  }
  const std::string table = argv[2];
  // The cell ends with the bench that started it, however the bench ends.
  if (const std::error_code ec = rb::watch_parent()) {
    std::printf("error cannot watch the bench: %s\n", pal::describe(ec).c_str());
    return 3;
  }
  // The cell budget: a child that outlives it ends (SIGALRM, or kTimedOutExitCode on Windows),
  // and the parent reports the timeout.
  if (const char* budget = std::getenv("RESERVOIR_BENCH_CELL_BUDGET"))
    rb::end_after(std::strtod(budget, nullptr));
  // RESERVOIR_BENCH_HANG_CELL=TABLE/CONTAINER: that cell never ends, as a hung one would (the
  // tests check that the budget ends it on every OS and the run reports it).
  // With RESERVOIR_BENCH_HANG_PID_FILE=PATH the hung cell writes its process id and a newline
  // there first (the tests check that it ends with the bench).
  if (const char* hang = std::getenv("RESERVOIR_BENCH_HANG_CELL");
      hang && table + "/" + argv[3] == hang) {
    if (const char* pid_file = std::getenv("RESERVOIR_BENCH_HANG_PID_FILE")) {
      std::FILE* f = std::fopen(pid_file, "w");
      if (f == nullptr || std::fprintf(f, "%ld\n", rb::this_process_id()) < 0 ||
          std::fclose(f) != 0) {
        std::printf("error cannot write %s\n", pid_file);
        return 3;
      }
    }
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // RESERVOIR_BENCH_FAIL_CELL=TABLE/CONTAINER: that cell fails as a broken one would (the tests
  // check that a failed cell makes the run exit 1 and loses no other result).
  if (const char* fail = std::getenv("RESERVOIR_BENCH_FAIL_CELL");
      fail && table + "/" + argv[3] == fail) {
    std::printf("error failed on purpose (RESERVOIR_BENCH_FAIL_CELL=%s)\n", fail);
    return 3;
  }
  if (std::string_view(argv[3]) == "none") {  // the idle baseline
    std::printf("ok peak=%zu\n", rb::peak_rss());
    return 0;
  }
  if (table == "bulk") {
    try {
      std::printf("%s\n", bulk_child(argv[3], std::strtoull(argv[5], nullptr, 10)).c_str());
      std::fflush(stdout);
      return 0;
    } catch (const std::exception& e) {
      std::printf("error %s\n", e.what());
      return 3;
    }
  }
  if (table == "mixed") {
    try {
      const std::string line =
          rb::mixed::run_child(argv[3], argv[4], std::strtoull(argv[5], nullptr, 10),
                               std::strtoull(argv[10], nullptr, 10));
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      return 0;
    } catch (const std::exception& e) {
      std::string what = e.what();
      std::replace(what.begin(), what.end(), '\n', ' ');
      std::printf("error %s\n", what.c_str());
      return 3;
    }
  }
  // These tables name their own contenders.
  const bool concurrent =
      table == "concurrent" || table == "collatz" || table == "timeline" || table == "many";
  const auto container = concurrent ? std::optional<rb::Container>(rb::Container::dynarray)
                                    : rb::parse_enum(argv[3], rb::kAllContainers);
  const auto type = rb::parse_enum(argv[4], rb::kAllTypes);
  if (!container || !type) return 2;
  const std::uint64_t n = std::strtoull(argv[5], nullptr, 10);
  const auto huge = parse_huge_pages(argv[9]);
  if (!huge) return 2;
  reservoir::set_huge_pages(*huge);
  const auto options =
      arena_options(std::strtoull(argv[6], nullptr, 10), std::strtoull(argv[7], nullptr, 10),
                    argv[8][0] == '1', *huge != reservoir::HugePages::off);
  const std::uint64_t batch = std::max<std::uint64_t>(1, std::strtoull(argv[10], nullptr, 10));
  const double ns_per_tick = std::strtod(argv[11], nullptr);
  const std::uint64_t reserve = std::strtoull(argv[12], nullptr, 10);
  try {
    if (table == "memory") {
      rb::NoLatency none;
      rb::with_type(*type,
                    [&]<class T>() { return rb::build<T>(*container, n, options, reserve, none); });
      const std::size_t peak = rb::peak_rss();
      if (peak == 0) {
        std::printf("error the OS did not report this process's peak memory\n");
        return 3;
      }
      std::printf("ok peak=%zu\n", peak);
    } else if (table == "throughput") {
      rb::HugePageProbe probe;
      std::vector<double> times;
      const std::int64_t calls_before = rb::kernel_calls();
      for (std::uint64_t b = 0; b < batch; ++b) {
        probe.enabled = b + 1 == batch;  // the builds are alike: the last one's pages tell
        times.push_back(rb::throughput_build(*container, *type, n, options, reserve, probe));
      }
      const double total = std::accumulate(times.begin(), times.end(), 0.0);
      // The library's memory calls only: the other containers' (malloc's mmap, brk, munmap) are
      // made inside the C library and not seen, so they report none rather than a false 0.
      const std::int64_t calls_after = rb::kernel_calls();
      const std::string calls =
          *container == rb::Container::dynarray && calls_before >= 0
              ? fmt::format(" calls={}",
                            static_cast<std::uint64_t>(calls_after - calls_before) / batch)
              : std::string();
      std::printf("ok seconds=%.9g huge=%zu%s\n", total / static_cast<double>(batch),
                  probe.anon_huge_bytes, calls.c_str());
    } else if (table == "collatz") {
      double seconds = 0;
      if (std::string_view(argv[3]) == "concurrent_dynarray") {
        reservoir::ConcurrentDynArray<std::uint32_t> memo(reservoir::max_elements(n), options);
        seconds = collatz::with_concurrent_dynarray(n, static_cast<unsigned>(batch), memo);
        collatz::check(memo, n);
      } else if (std::string_view(argv[3]) == "concurrent_dynarray_writer") {
        reservoir::ConcurrentDynArray<std::uint32_t> memo(reservoir::max_elements(n), options);
        seconds = collatz::with_concurrent_dynarray_writer(n, static_cast<unsigned>(batch), memo);
        collatz::check(memo, n);
      } else if (std::string_view(argv[3]) == "concurrent_dynarray_blocks") {
        reservoir::ConcurrentDynArray<std::uint32_t> memo(reservoir::max_elements(n), options);
        seconds = collatz::with_concurrent_dynarray_blocks(n, static_cast<unsigned>(batch), memo);
        collatz::check(memo, n);
      } else if (std::string_view(argv[3]) == "vector_shared_mutex") {
        std::vector<std::uint32_t> memo;
        seconds = collatz::with_vector_shared_mutex(n, static_cast<unsigned>(batch), memo);
        collatz::check(memo, n);
      } else {
        return 2;
      }
      std::printf("ok seconds=%.9g\n", seconds);
    } else if (table == "timeline") {
      const std::string samples = rb::timeline_child(argv[3], n, options);
      std::printf("ok samples=%s\n", samples.c_str());
    } else if (table == "many") {
      const rb::ManyArraysTimes t = rb::many_arrays(argv[3], batch, n, reserve);
      std::printf(
          "ok seconds=%.9g destroy_seconds=%.9g rebuild_seconds=%.9g redestroy_seconds=%.9g "
          "churn_ns=%.9g churn2_ns=%.9g churn_rss_growth=%lld checksum=%llu peak=%zu\n",
          t.build_seconds, t.destroy_seconds, t.rebuild_seconds, t.redestroy_seconds, t.churn_ns,
          t.churn2_ns, static_cast<long long>(t.churn_rss_growth),
          static_cast<unsigned long long>(t.checksum), rb::peak_rss());
    } else if (table == "concurrent") {
      const double seconds =
          rb::concurrent_build(argv[3], n, static_cast<unsigned>(batch), options);
      std::printf("ok seconds=%.9g\n", seconds);
    } else if (table == "latency") {
      rb::AppendLatency rec;
      rec.ns_per_tick = ns_per_tick;
      double seconds = 0;
      for (std::uint64_t b = 0; b < batch; ++b) {
        seconds += rb::with_type(
            *type, [&]<class T>() { return rb::build<T>(*container, n, options, reserve, rec); });
      }
      std::printf("ok seconds=%.9g %s\n", seconds, percentiles_line(rec.histogram).c_str());
    } else {
      return 2;
    }
  } catch (const std::bad_alloc& e) {
    std::printf("error std::bad_alloc: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 3;
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace reservoir::bench::tour
