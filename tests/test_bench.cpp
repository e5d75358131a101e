// Tests of the bench's measuring parts (histogram, size parsing) and a smoke run of the real
// reservoir-bench whose JSON is checked for shape and sanity. No test asserts a speed.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>
#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "clock.hpp"
#include "collatz.hpp"
#include "histogram.hpp"
#include "mixed.hpp"
#include "parse.hpp"
#include "platform.hpp"
#include "support.hpp"

#if !defined(_WIN32)
#include <signal.h>
#endif

using reservoir::bench::LogLinearHistogram;
namespace rb = reservoir::bench;

TEST_SUITE("bench") {
  TEST_CASE("histogram buckets tile the value range with bounded relative width") {
    CHECK(LogLinearHistogram::bucket_of(0) == 0);
    CHECK(LogLinearHistogram::bucket_of(127) == 127);
    CHECK(LogLinearHistogram::bucket_of(128) == 128);
    std::size_t prev = 0;
    for (std::uint64_t v : {1ull, 100ull, 128ull, 129ull, 255ull, 256ull, 1000ull, 123456ull,
                            1ull << 40, (1ull << 63) + 12345, ~0ull}) {
      const std::size_t b = LogLinearHistogram::bucket_of(v);
      CAPTURE(v);
      REQUIRE(b < LogLinearHistogram::kBuckets);
      CHECK(LogLinearHistogram::bucket_low(b) <= v);
      CHECK(v <= LogLinearHistogram::bucket_high(b));
      const double width =
          double(LogLinearHistogram::bucket_high(b) - LogLinearHistogram::bucket_low(b));
      CHECK(width <= double(LogLinearHistogram::bucket_low(b)) / 128.0);
      CHECK(b >= prev);
      prev = b;
    }
    // Consecutive buckets are adjacent: no gaps, no overlaps.
    for (std::size_t b = 1; b < 2000; ++b) {
      REQUIRE(LogLinearHistogram::bucket_low(b) == LogLinearHistogram::bucket_high(b - 1) + 1);
    }
    CHECK(LogLinearHistogram::bucket_high(LogLinearHistogram::kBuckets - 1) == ~0ull);
  }

  TEST_CASE("histogram percentiles are within 1% of the exact ones") {
    std::mt19937_64 rng(1);
    std::lognormal_distribution<double> dist(4.0, 2.0);  // ns to ms, a long tail
    std::vector<std::uint64_t> values;
    LogLinearHistogram h;
    for (int i = 0; i < 200'000; ++i) {
      const auto v = static_cast<std::uint64_t>(dist(rng)) + 1;
      values.push_back(v);
      h.record(v);
    }
    std::sort(values.begin(), values.end());
    CHECK(h.count() == values.size());
    CHECK(h.min() == values.front());
    CHECK(h.max() == values.back());
    for (double p : {1.0, 50.0, 90.0, 99.0, 99.9, 99.99}) {
      const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * double(values.size())));
      const double exact = double(values[rank - 1]);
      CAPTURE(p);
      CHECK(std::abs(double(h.percentile(p)) - exact) <= exact * 0.01 + 0.5);
    }
    CHECK(h.percentile(0) == h.min());
    CHECK(h.percentile(100) == h.max());
    std::uint64_t decade_total = 0;
    for (auto d : h.decades())
      decade_total += d;
    CHECK(decade_total == h.count());
    const auto le_1us =
        std::count_if(values.begin(), values.end(), [](auto v) { return v <= 1000; });
    CHECK(h.decades()[0] == static_cast<std::uint64_t>(le_1us));
  }

  TEST_CASE("an empty histogram reports zeros; merge adds") {
    LogLinearHistogram a, b;
    CHECK(a.percentile(50) == 0);
    CHECK(a.min() == 0);
    a.record(10);
    b.record(1'000'000);
    a.merge(b);
    CHECK(a.count() == 2);
    CHECK(a.max() == 1'000'000);
    CHECK(a.decades()[3] == 1);
  }

  TEST_CASE("size arguments: counts in decimal units, bytes in binary units") {
    CHECK(rb::parse_count("1e3") == 1000);
    CHECK(rb::parse_count("2.5e6") == 2'500'000);
    CHECK(rb::parse_count("1K") == 1000);
    CHECK(rb::parse_count("1M") == 1'000'000);
    CHECK(rb::parse_count("1G") == 1'000'000'000);
    CHECK(rb::parse_count("250000") == 250'000);
    CHECK(rb::parse_count_list("1e3,1e6,1M") ==
          std::vector<std::uint64_t>{1000, 1'000'000, 1'000'000});
    CHECK(rb::parse_bytes("64K") == 65536);
    CHECK(rb::parse_bytes("2MiB") == 2 * 1024 * 1024);
    CHECK(rb::parse_bytes("4096") == 4096);
    for (const char* bad : {"", "0", "-5", "1.5", "abc", "1X", "1e3x", "1e30", "nan", "1,"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS(rb::parse_count_list(bad), std::invalid_argument);
    }
    CHECK(rb::format_count(1000) == "1e3");
    CHECK(rb::format_count(2'500'000) == "2.5e6");
    CHECK(rb::format_count(1234) == "1234");
    CHECK(rb::format_count(7) == "7");
  }

  TEST_CASE("the tick clock is calibrated and monotonic") {
    const double ns = rb::TickClock::calibrate(20);
    CHECK(ns > 0.01);
    CHECK(ns < 1000);
    const auto a = rb::TickClock::now();
    const auto b = rb::TickClock::now();
    CHECK(b >= a);
  }
}

namespace {
std::string bench_path() {
  std::string self = rb::self_executable_path();
  const auto slash = self.find_last_of("/\\");
  REQUIRE(slash != std::string::npos);
  const std::string dir = self.substr(0, slash);
  const auto up = dir.find_last_of("/\\");
  const char sep = self[slash];
#if defined(_WIN32)
  const char* exe = "reservoir-bench.exe";
#else
  const char* exe = "reservoir-bench";
#endif
  return dir.substr(0, up) + sep + "bench" + sep + exe;
}

// A JSON row's field as a string or a number: throws (a test error) if it is missing or not one.
std::string str(const nlohmann::json& row, const char* key) {
  return row.at(key).get<std::string>();
}
double num(const nlohmann::json& row, const char* key) {
  return row.at(key).get<double>();
}
}  // namespace

TEST_SUITE("bench") {
  TEST_CASE("the mixed workload leaves the same contents in every container") {
    namespace mx = reservoir::bench::mixed;
    for (std::uint64_t seed : {1u, 2u}) {
      CAPTURE(seed);
      const mx::Stats v = mx::run<mx::VectorOf, int>(60, seed);
      const mx::Stats d = mx::run<mx::DynArrayOf, int>(60, seed);
      const mx::Stats q = mx::run<mx::DequeOf, int>(60, seed);
      CHECK(v.elements > 0);
      CHECK(v.arrays > 1);
      CHECK(d.checksum == v.checksum);
      CHECK(d.elements == v.elements);
      CHECK(d.arrays == v.arrays);
      CHECK(q.checksum == v.checksum);
      const mx::Stats ideal = mx::run_ideal<int>(60, seed);
      CHECK(ideal.checksum == v.checksum);
      CHECK(ideal.elements == v.elements);
      std::uint64_t actions = 0;
      for (std::uint64_t c : d.count)
        actions += c;
      CHECK(actions == 60);
    }
    // A different seed is a different run: the checksum sees it.
    CHECK(mx::run<mx::VectorOf, int>(60, 1).checksum != mx::run<mx::VectorOf, int>(60, 2).checksum);
    const mx::Stats all_v =
        mx::run<mx::VectorOf, int, std::string, mx::IntArray, mx::HeapOwner>(25, 3);
    const mx::Stats all_d =
        mx::run<mx::DynArrayOf, int, std::string, mx::IntArray, mx::HeapOwner>(25, 3);
    CHECK(all_d.checksum == all_v.checksum);
    CHECK(all_d.elements == all_v.elements);
    const mx::Stats all_i = mx::run_ideal<int, std::string, mx::IntArray, mx::HeapOwner>(25, 3);
    CHECK(all_i.checksum == all_v.checksum);
  }
}

TEST_SUITE("bench_smoke") {
  TEST_CASE("reservoir-bench runs every requested cell and writes sane JSON") {
    const test::TempDir dir("reservoir-bench-smoke");
    const std::string json_file = dir.file("bench_smoke.json");
    rb::ProcessResult r;
    // A 1 GiB reservation: Wine keeps one byte per reserved page, so the default 64 GiB costs
    // 16 MiB of RSS there (not on Windows itself); the band below is about the data. A cell may
    // take minutes in a debug or sanitizer build on a machine busy with other suites: a budget of
    // 300 s, not the default 60. Small cells repeat their build for 2e4 appends, not 2e6: this run
    // proves that every cell runs and reports, it does not time them. Two runs: every table for
    // ints at 1e3 and 1e6 (the sizes whose memory and OS calls are checked below), then the
    // per-type tables for the element types that own heap memory at 1e3 and 1e4 (at 1e6 they
    // took half of this test's time under the sanitizers and added no check).
    const std::vector<std::string> common = {"--batch-elements", "2e4", "--reps",        "2",
                                             "--reserve",        "1G",  "--cell-budget", "300"};
    std::vector<std::string> args = {"--sizes",
                                     "1e3,1e6",
                                     "--types",
                                     "int",
                                     "--threads",
                                     "1,2",
                                     "--mixed-iterations",
                                     "20",
                                     "--many-arrays",
                                     "100",
                                     "--json",
                                     json_file,
                                     "--markdown",
                                     dir.file("bench_smoke.md"),
                                     "--csv",
                                     dir.file("bench_smoke.csv")};
    args.insert(args.end(), common.begin(), common.end());
    REQUIRE_FALSE(rb::run_process(bench_path(), args, &r));
    INFO(r.output);
    REQUIRE(r.exited);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("1. Peak memory") != std::string::npos);
    CHECK(r.output.find("2. Throughput") != std::string::npos);
    CHECK(r.output.find("3. Append latency") != std::string::npos);
    CHECK(r.output.find("4. Concurrent appends") != std::string::npos);
    CHECK(r.output.find("5. Collatz memo") != std::string::npos);
    // The closing summary: one line per table, the fault cost, the plot command for this run.
    const auto summary = r.output.find("\nSummary (ratios within this run");
    REQUIRE(summary != std::string::npos);
    const std::string closing = r.output.substr(summary);
    CHECK(closing.find("a first-touch page fault here costs") != std::string::npos);
    for (const char* line :
         {"\n  memory      int 1e6: DynArray's peak", "\n  throughput  int 1e6: DynArray ",
          "than std::vector", "the floor's time",
          "\n  latency     int 1e6: DynArray's worst append",
          "\n  concurrent  2 threads: ConcurrentDynArray ", "throughput vs 1 thread",
          "\n  collatz     2 threads: ", "\n  timeline    1e6 ints: DynArray peak",
          "\n  mixed       all, 20 "
          "iterations: DynArray",
          "\n  many        100 arrays of 1e4 ints: DynArray build "}) {
      CAPTURE(line);
      CHECK(closing.find(line) != std::string::npos);
    }
    CHECK(closing.find("Figures: python3 scripts/plot_bench.py " + json_file) != std::string::npos);
    CHECK(closing.find("(needs matplotlib: scripts/install-deps.sh plot)") != std::string::npos);
    CHECK(closing.find("ConcurrentDynArray with a Writer per thread ") != std::string::npos);
    // Units that show: no per-action time printed as 0.000 seconds; no ratio against a cell
    // that measures nothing (page_floor's destroy) and no 1e3 peak read as "0 B (0.00x)".
    CHECK(r.output.find(" 0.000 ") == std::string::npos);
    CHECK(r.output.find("(0.00x)") == std::string::npos);
    CHECK(r.output.find("below resolution") != std::string::npos);
    CHECK(r.output.find("   throughput vs 1 thread: elements per second") != std::string::npos);
    const std::string heavy_json = dir.file("bench_smoke_heap_types.json");
    std::vector<std::string> heavy_args = {
        "--sizes", "1e3,1e4", "--types", "unique_ptr,string", "--only", "memory,throughput,latency",
        "--json",  heavy_json};
    heavy_args.insert(heavy_args.end(), common.begin(), common.end());
    rb::ProcessResult heavy;
    REQUIRE_FALSE(rb::run_process(bench_path(), heavy_args, &heavy));
    INFO(heavy.output);
    REQUIRE(heavy.exited);
    REQUIRE(heavy.exit_code == 0);
    auto slurp = [](const std::string& path) {
      std::ifstream f(path);
      std::stringstream contents;
      contents << f.rdbuf();
      return contents.str();
    };
    const std::string text = slurp(json_file);
    REQUIRE_FALSE(text.empty());
    const auto doc = nlohmann::json::parse(text);
    const std::string heavy_text = slurp(heavy_json);
    REQUIRE_FALSE(heavy_text.empty());
    const auto heavy_doc = nlohmann::json::parse(heavy_text);
    std::vector<const nlohmann::json*> results;
    for (const auto& res : doc.at("results"))
      results.push_back(&res);
    for (const auto& res : heavy_doc.at("results"))
      results.push_back(&res);
    for (const char* key : {"os",
                            "cpu",
                            "page_size",
                            "allocation_granularity",
                            "compiler",
                            "build_type",
                            "commit_granule",
                            "clock_overhead_ns",
                            "transparent_huge_pages",
                            "overcommit_memory",
                            "hypervisor",
                            "fault_ns_per_page_rw_mmap",
                            "fault_ns_per_page_mprotect",
                            "fault_ns_per_page_populate",
                            "fault_ns_per_page_huge",
                            "huge_pages",
                            "huge_pages_in_effect",
                            "host_reclaims_free_pages",
                            "unstable_spread",
                            "cell_budget_seconds",
                            "batch_elements"}) {
      CAPTURE(key);
      CHECK(doc.at("context").contains(key));
    }
    std::set<std::tuple<std::string, std::string, std::string, double>> cells;
    int threaded_cells = 0;
    int timeline_cells = 0;
    std::set<std::string> concurrent_containers;         // 3, or 4 with tbb::concurrent_vector
    std::map<std::string, std::string> mixed_checksums;  // type -> the final contents' checksum
    int mixed_cells = 0;
    int mixed_cells_above_idle = 0;
    int many_cells = 0;
    int huge_floor_skipped = 0;
    int page_floor_skipped = 0;
#if defined(_WIN32)
    constexpr bool kPageFloorHere = false;
#else
    constexpr bool kPageFloorHere = true;
#endif
#if defined(__linux__) || defined(__FreeBSD__)
    constexpr bool kKernelCallsCounted = true;
#else
    constexpr bool kKernelCallsCounted = false;
#endif
    for (const nlohmann::json* each : results) {
      const auto& res = *each;
      const std::string table = str(res, "table");
      CAPTURE(table);
      if (table == "mixed") {
        CAPTURE(str(res, "container"));
        CAPTURE(str(res, "type"));
        REQUIRE(str(res, "status") == "ok");
        CHECK(num(res, "iterations") == 20);
        CHECK(num(res, "seconds") > 0);
        // The peak above an idle child's: 20 iterations of a small type can stay within the
        // idle child's own noise (seen under Wine: 0), so only some cells must rise above it.
        CHECK(num(res, "peak_bytes") >= 0);
        if (num(res, "peak_bytes") > 0) ++mixed_cells_above_idle;
        double per_action = 0, actions = 0;
        for (const auto& [k, v] : res.at("actions").items()) {
          per_action += num(v, "seconds");
          actions += num(v, "count");
        }
        CHECK(res.at("actions").size() == 6);
        CHECK(actions == 20);
        // Medians of 2 repetitions are means, and per action they add up to the mean total.
        CHECK(per_action <= num(res, "seconds") * (1 + 1e-9));
        CHECK(res.at("samples").size() == 2);
        CHECK(res.at("unstable").is_boolean());
        auto [it, fresh] = mixed_checksums.emplace(str(res, "type"), str(res, "checksum"));
        if (!fresh) CHECK(it->second == str(res, "checksum"));
        ++mixed_cells;
        continue;
      }
      CAPTURE(str(res, "container"));
      CAPTURE(str(res, "type"));
      CAPTURE(num(res, "size"));
      if (str(res, "container") == "floor_huge" &&
          (!reservoir::pal::transparent_huge_pages() || num(res, "size") < 1e6)) {
        // The huge-page floor needs THP honouring MADV_HUGEPAGE and at least a huge page of
        // data: skipped otherwise, saying why.
        CHECK(str(res, "status") == (reservoir::pal::transparent_huge_pages()
                                         ? "skipped: less than one huge page of data"
                                         : "skipped: no transparent huge pages here"));
        ++huge_floor_skipped;
        continue;
      }
      if (str(res, "container") == "page_floor" && !kPageFloorHere) {
        CHECK(str(res, "status").rfind("skipped: POSIX only", 0) == 0);
        ++page_floor_skipped;
        continue;
      }
      REQUIRE(str(res, "status") == "ok");
      cells.emplace(table, str(res, "container"), str(res, "type"), num(res, "size"));
      if (table == "memory") {
        const double element = str(res, "type") == "int"      ? 4.0
                               : str(res, "type") == "string" ? double(sizeof(std::string))
                                                              : 8.0;
        CHECK(num(res, "data_bytes") == num(res, "size") * element);
        if (str(res, "type") == "int" && num(res, "size") == 1e6) {
          // 4 MB of ints: every contender's peak is within a sane band of it. Each peak is the
          // child's above the median of three idle children's; under Wine an idle child's
          // working set moves between runs by more than on Linux (docs/platforms.md has the
          // figures), so the whole run's baseline can sit well above a cell's own.
#if defined(_WIN32)
          CHECK(num(res, "peak_bytes") > 2.0e6);
#else
          CHECK(num(res, "peak_bytes") > 3.0e6);
#endif
          // The upper bound needs a peak of the child alone: not under TSan (shadow memory), and
          // not in the posix-generic build on Linux, where getrusage's ru_maxrss (the macOS and
          // FreeBSD path) carries the parent's peak across fork+exec.
#if defined(__linux__)
          const bool inherited_peak = reservoir::pal::testing::decommit_remaps();
#else
          const bool inherited_peak = false;
#endif
          if (!kThreadSanitizer && !inherited_peak) CHECK(num(res, "peak_bytes") < 12.0e6);
        }
      } else if (table == "throughput" || table == "concurrent" || table == "collatz") {
        if (table != "throughput") {
          CHECK((num(res, "threads") == 1 || num(res, "threads") == 2));
          CHECK(str(res, "type") == "int");
        }
        CHECK(num(res, "seconds") > 0);
        CHECK(num(res, "seconds_min") <= num(res, "seconds"));
        CHECK(num(res, "seconds") <= num(res, "seconds_max"));
        CHECK(num(res, "elements_per_second") > 0);
        CHECK(res.at("samples").size() == 2);
        CHECK(res.at("unstable").is_boolean());
        if (table == "throughput") {
          // Both ratios: 1 for the baseline itself, positive for every other contender.
          const double vs_vector = num(res, "vs_vector");
          const double vs_populated = num(res, "vs_vector_populate");
          CHECK(vs_vector > 0);
          CHECK(vs_populated > 0);
          if (str(res, "container") == "vector") CHECK(vs_vector == 1.0);
          if (str(res, "container") == "vector_populate") CHECK(vs_populated == 1.0);
          // DynArray's memory calls per build (1e3: a reservation recycled from the previous
          // build, so none; 1e6 ints: 4 MB in steps of 64 KiB..2 MiB, or doubling, at most two
          // calls each), counted where the linker wraps them (Linux, FreeBSD); the others are not
          // counted. Huge pages in use are reported for everyone.
          if (str(res, "container") == "dynarray" && kKernelCallsCounted) {
            REQUIRE(res.contains("kernel_calls"));
            if (num(res, "size") == 1e6 && str(res, "type") == "int") {
              CHECK(num(res, "kernel_calls") >= 1);
              CHECK(num(res, "kernel_calls") < 100);
            }
          } else {
            CHECK_FALSE(res.contains("kernel_calls"));
          }
          CHECK(num(res, "huge_page_bytes") >= 0);
        }
        if (table != "throughput") ++threaded_cells;
        if (table == "concurrent") concurrent_containers.insert(str(res, "container"));
      } else if (table == "timeline") {
        // Samples from 0 to the size, elements increasing, each peak at least the current RSS.
        const auto& samples = res.at("timeline");
        REQUIRE(samples.size() >= 100);
        CHECK(samples.front()[0].get<double>() == 0);
        CHECK(samples.back()[0].get<double>() == num(res, "size"));
        for (std::size_t i = 1; i < samples.size(); ++i) {
          CHECK(samples[i][0].get<double>() > samples[i - 1][0].get<double>());
          CHECK(samples[i][2].get<double>() >= samples[i][1].get<double>());
        }
        ++timeline_cells;
      } else if (table == "many") {
        // 100 arrays of 20, 1e2, 1e3 and 1e4 ints (within the largest size, 1e6), every
        // contender.
        CHECK((num(res, "size") == 20 || num(res, "size") == 100 || num(res, "size") == 1000 ||
               num(res, "size") == 10'000));
        CHECK(num(res, "arrays") == 100);
        CHECK(num(res, "data_bytes") == num(res, "size") * 100 * 4.0);
        CHECK(num(res, "seconds") > 0);
        CHECK(num(res, "destroy_seconds") > 0);
        CHECK(num(res, "rebuild_seconds") > 0);
        CHECK(num(res, "redestroy_seconds") > 0);
        CHECK(num(res, "vs_vector") > 0);
        // Churn: timed on one thread for every contender, on two for all but the floor.
        CHECK(num(res, "churn_ns") > 0);
        CHECK((str(res, "container") == "page_floor") == (num(res, "churn2_ns") == 0));
        CHECK(res.contains("churn_rss_growth_bytes"));
        ++many_cells;
      } else {
        REQUIRE(table == "latency");
        const auto& l = res.at("latency_ns");
        double prev = 0;
        for (const char* k : {"min", "p50", "p90", "p99", "p99_9", "p99_99", "max"}) {
          CAPTURE(k);
          CHECK(l.at(k).get<double>() >= prev);
          prev = l.at(k).get<double>();
        }
        double total = 0;
        for (const auto& [k, v] : res.at("decades").items())
          total += v.get<double>();
        CHECK(total == num(res, "appends"));
        CHECK(num(res, "appends") >= num(res, "size"));
      }
    }
    // memory, throughput, latency: 7 containers (with the vector_populate, floor and floor_huge
    // baselines) x (int at 2 sizes + 2 heap-owning types at 2 sizes); then the concurrent
    // contenders and the 4 Collatz ones (cells differ by thread count: counted by name here).
    const int nc = static_cast<int>(concurrent_containers.size());
    CHECK(nc >= 3);
    // The timeline: dynarray, vector, vector_reserve at the largest size.
    CHECK(timeline_cells == 3);
    // Many arrays: dynarray, vector, vector_reserve, deque, page_floor (POSIX) x 4 sizes per
    // array.
    CHECK(many_cells == (kPageFloorHere ? 5 : 4) * 4);
    CHECK(page_floor_skipped == (kPageFloorHere ? 0 : 4));
    CHECK(r.output.find("8. Many arrays") != std::string::npos);
    // 3 tables: ints at 1e3 (under 2 MiB), and at 1e6 too without THP; the heap-owning types at
    // both of their sizes (under 2 MiB).
    CHECK(huge_floor_skipped == (reservoir::pal::transparent_huge_pages() ? 3 : 3 * 2) + 3 * 2 * 2);
    CHECK(cells.size() + static_cast<std::size_t>(huge_floor_skipped + page_floor_skipped) ==
          static_cast<std::size_t>(3 * 7 * (2 + 2 * 2) + nc + 4 + 3 + 5 * 4));
    CHECK(threaded_cells == nc * 2 + 4 * 2);  // x 2 thread counts
    CHECK(mixed_cells == 3 * 5);              // 3 containers x 5 types
    CHECK(mixed_cells_above_idle > 0);
    CHECK(r.output.find("Mixed workload") != std::string::npos);
    // Every table reaches every file, the mixed one included: CSV rows and a Markdown section.
    const std::string csv = slurp(dir.file("bench_smoke.csv"));
    const std::string md = slurp(dir.file("bench_smoke.md"));
    CHECK(csv.find("\nmixed,dynarray,int,20,ok,") != std::string::npos);
    CHECK(csv.find("\nmany,vector,int,100,ok,") != std::string::npos);
    CHECK(md.find("## Mixed workload") != std::string::npos);
    CHECK(md.find("| all | 20 | deque | ") != std::string::npos);
  }

  TEST_CASE("reservoir-bench compare reads two runs of the tour, every table written") {
    const test::TempDir dir("reservoir-bench-compare-tour");
    // Every table of the default tour, at small sizes: what compare reads, not what it measures.
    // 3e5 ints (1.2 MB): the memory table's rows must be above compare's resolution (256 KiB of
    // data) wherever the peak is read (a working set under Wine reads coarser than Linux's RSS).
    std::string files[2] = {dir.file("tour_a.json"), dir.file("tour_b.json")};
    for (const std::string& file : files) {
      rb::ProcessResult r;
      REQUIRE_FALSE(
          rb::run_process(bench_path(),
                          {"--sizes", "1e3,3e5", "--reps", "1", "--threads", "1",
                           "--mixed-iterations", "20", "--many-arrays", "100", "--batch-elements",
                           "2e4", "--reserve", "1G", "--cell-budget", "300", "-q", "--json", file},
                          &r));
      INFO(r.output);
      REQUIRE(r.exited);
      REQUIRE(r.exit_code == 0);
    }
    rb::ProcessResult r;
    // A threshold no ratio can cross: two runs of a debug build on a busy machine differ by more
    // than any real one; the exit code's rule is tested on written files above.
    REQUIRE_FALSE(
        rb::run_process(bench_path(), {"compare", files[0], files[1], "--threshold", "1000"}, &r));
    INFO(r.output);
    REQUIRE(r.exited);
    CHECK(r.exit_code == 0);
    for (const char* table : {"\nmemory ", "\nthroughput ", "\nlatency ", "\nconcurrent ",
                              "\ncollatz ", "\nmixed ", "\nmany "}) {
      CAPTURE(table);
      CHECK(r.output.find(table) != std::string::npos);
    }
    CHECK(r.output.find("not compared: table timeline") != std::string::npos);
    CHECK(r.output.find(" ref") != std::string::npos);
  }

  TEST_CASE("reservoir-bench --only bulk times every bulk operation against its floor") {
    const test::TempDir dir("reservoir-bench-bulk");
    const std::string json_file = dir.file("bulk.json");
    rb::ProcessResult r;
    REQUIRE_FALSE(rb::run_process(bench_path(),
                                  {"--only", "bulk", "--sizes", "1e4,1e5", "--reps", "2",
                                   "--threads", "0", "--json", json_file},
                                  &r));
    INFO(r.output);
    REQUIRE(r.exited);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("9. Bulk operations") != std::string::npos);
    CHECK(r.output.find("2. Throughput") == std::string::npos);  // only the table asked for
    std::ifstream in(json_file);
    std::stringstream text;
    text << in.rdbuf();
    const auto doc = nlohmann::json::parse(text.str());
    std::set<std::pair<std::string, double>> cells;
    for (const auto& res : doc.at("results")) {
      CAPTURE(str(res, "container"));
      REQUIRE(str(res, "status") == "ok");
      CHECK(str(res, "table") == "bulk");
      CHECK(num(res, "seconds") > 0);
      CHECK(num(res, "warm_seconds") > 0);
      cells.emplace(str(res, "container"), num(res, "size"));
    }
    // resize, resize_value, assign, append_range, insert and the two floors, at both sizes.
    CHECK(cells.size() == 7 * 2);
    CHECK(cells.count({"memcpy", 1e5}) == 1);
    CHECK(cells.count({"append_range", 1e4}) == 1);
  }

  TEST_CASE("reservoir-bench --help names every contender of every table") {
    rb::ProcessResult r;
    REQUIRE_FALSE(rb::run_process(bench_path(), {"--help"}, &r));
    REQUIRE(r.exited);
    CHECK(r.exit_code == 0);
    for (const char* name :
         {"dynarray", "vector_reserve", "deque", "pmr_arena", "pmr_monotonic", "vector_populate",
          "floor_huge", "concurrent_dynarray_writer", "concurrent_dynarray_bulk",
          "concurrent_dynarray_blocks", "concurrent_dynarray_readers", "vector_mutex",
          "deque_mutex", "tbb_concurrent_vector", "claim_floor", "vector_shared_mutex",
          "page_floor", "append_range", "memcpy"}) {
      CAPTURE(name);
      CHECK(r.output.find(name) != std::string::npos);
    }
    CHECK(r.output.find("--no-prefault") != std::string::npos);
    CHECK(r.output.find("{false}") == std::string::npos);
    // The library's default is named once, at the flag that selects it on this platform.
    const std::string_view help = r.output;
    const std::size_t dflt = help.find("(the library's default here)");
    REQUIRE(dflt != std::string_view::npos);
    CHECK(help.find("(the library's default here)", dflt + 1) == std::string_view::npos);
    const std::size_t option = help.rfind("\n  --", dflt);
    REQUIRE(option != std::string_view::npos);
    const std::string_view expected =
        reservoir::ArenaOptions{}.prefault ? "\n  --prefault " : "\n  --no-prefault ";
    CHECK(help.substr(option, expected.size()) == expected);
    // Both at once is a usage error, not whichever came last.
    REQUIRE_FALSE(rb::run_process(bench_path(), {"--prefault", "--no-prefault"}, &r));
    CHECK(r.exit_code == 2);
  }

  TEST_CASE("reservoir-bench rejects bad arguments with exit code 2, before running anything") {
    for (std::vector<std::string> args : {std::vector<std::string>{"--sizes", "lots"},
                                          {"--containers", "list"},
                                          {"--only", "speed"},
                                          {"--only", "memory,speed"},
                                          {"--cell-budget", "0"},
                                          {"--reps", "abc"},
                                          {"--reps", "0"},
                                          {"--no-such-option"},
                                          {"--threads", "1000"},
                                          {"--mixed-types", "float"},
                                          {"--granule", "1000"},
                                          {"--huge-pages", "maybe"},
                                          {"--sizes", "2e18"},
                                          {"--sizes", "1e3,1.5e18", "--types", "string"},
                                          {"--json", "/no-such-dir-for-reservoir/x.json"},
                                          {"--markdown", "/no-such-dir-for-reservoir/x.md"}}) {
      CAPTURE(args.front());
      CAPTURE(args.back());
      rb::ProcessResult r;
      REQUIRE_FALSE(rb::run_process(bench_path(), args, &r));
      CHECK(r.exited);
      CHECK(r.exit_code == 2);
      CHECK(r.output.find("1. Peak memory") == std::string::npos);  // no cell ran
    }
  }
}

namespace {

// A reservoir-bench JSON file with one throughput cell per container at 1e6 ints (seconds as
// given), a memory cell pair, and a concurrent pair.
std::string write_bench_json(const std::string& path, double vector_s, double dynarray_s,
                             bool dynarray_unstable = false, double dynarray_peak = 4.1e6) {
  std::ofstream f(path);
  f << "{\"context\": {\"os\": \"test\"}, \"results\": [\n"
    << "{\"table\": \"throughput\", \"container\": \"vector\", \"type\": \"int\", "
       "\"size\": 1000000, \"status\": \"ok\", \"seconds\": "
    << vector_s << ", \"unstable\": false},\n"
    << "{\"table\": \"throughput\", \"container\": \"dynarray\", \"type\": \"int\", "
       "\"size\": 1000000, \"status\": \"ok\", \"seconds\": "
    << dynarray_s << ", \"unstable\": " << (dynarray_unstable ? "true" : "false") << "},\n"
    << "{\"table\": \"throughput\", \"container\": \"deque\", \"type\": \"int\", "
       "\"size\": 1000000, \"status\": \"timed out after 60 s\"},\n"
    << "{\"table\": \"memory\", \"container\": \"vector\", \"type\": \"int\", "
       "\"size\": 1000000, \"status\": \"ok\", \"peak_bytes\": 8000000},\n"
    << "{\"table\": \"memory\", \"container\": \"dynarray\", \"type\": \"int\", "
       "\"size\": 1000000, \"status\": \"ok\", \"peak_bytes\": "
    << dynarray_peak << "},\n"
    << "{\"table\": \"concurrent\", \"container\": \"vector_mutex\", \"type\": \"int\", "
       "\"size\": 1000000, \"threads\": 2, \"status\": \"ok\", \"seconds\": 0.2, "
       "\"unstable\": false},\n"
    << "{\"table\": \"concurrent\", \"container\": \"concurrent_dynarray\", \"type\": "
       "\"int\", \"size\": 1000000, \"threads\": 2, \"status\": \"ok\", \"seconds\": 0.1, "
       "\"unstable\": false}\n"
    << "]}\n";
  return path;
}

rb::ProcessResult run_compare(std::vector<std::string> args) {
  args.insert(args.begin(), "compare");
  rb::ProcessResult r;
  REQUIRE_FALSE(rb::run_process(bench_path(), args, &r));
  REQUIRE(r.exited);
  return r;
}

}  // namespace

TEST_SUITE("bench") {
  TEST_CASE("reservoir-bench compare: exit 0 when no cell's ratio worsened beyond the threshold") {
    const test::TempDir dir("reservoir-compare");
    // Twice as slow on a machine twice as slow: the ratio to std::vector is unchanged.
    const auto base = write_bench_json(dir.file("compare_base.json"), 0.2, 0.05);
    const auto same = write_bench_json(dir.file("compare_same.json"), 0.4, 0.1);
    const auto r = run_compare({base, same});
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("dynarray") != std::string::npos);
    CHECK(r.output.find("concurrent_dynarray") != std::string::npos);
    CHECK(r.output.find("3 cells compared, 0 regressed") != std::string::npos);
  }

  TEST_CASE("reservoir-bench compare: exit 1 on a regression, 0 under a looser threshold") {
    const test::TempDir dir("reservoir-compare");
    const auto base = write_bench_json(dir.file("compare_base.json"), 0.2, 0.05);    // 4x faster
    const auto slow = write_bench_json(dir.file("compare_slow.json"), 0.2, 0.0625);  // 3.2x: -20%
    auto r = run_compare({base, slow});
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("REGRESSED") != std::string::npos);
    CHECK(r.output.find("-20.0%") != std::string::npos);
    r = run_compare({base, slow, "--threshold", "25"});
    CHECK(r.exit_code == 0);
    // Memory: a peak 20% larger relative to std::vector's is a regression too.
    const auto fat = write_bench_json(dir.file("compare_fat.json"), 0.2, 0.05, false, 4.1e6 * 1.25);
    r = run_compare({base, fat});
    CHECK(r.exit_code == 1);
    // A regression in an unstable cell is shown, not counted.
    const auto shaky = write_bench_json(dir.file("compare_shaky.json"), 0.2, 0.0625, true);
    r = run_compare({base, shaky});
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("unstable: not counted") != std::string::npos);
  }

  TEST_CASE("reservoir-bench compare: exit 2 on bad input") {
    const test::TempDir dir("reservoir-compare");
    const auto base = write_bench_json(dir.file("compare_base.json"), 0.2, 0.05);
    const std::string bad = dir.file("compare_bad.json");
    {
      std::ofstream f(bad);
      f << "{\"results\": [ not json";
    }
    CHECK(run_compare({base, bad}).exit_code == 2);
    CHECK(run_compare({base, dir.file("compare_missing_file.json")}).exit_code == 2);
    CHECK(run_compare({base}).exit_code == 2);
    CHECK(run_compare({base, base, "--threshold", "x"}).exit_code == 2);
  }
}

namespace {

// A reservoir-bench JSON file of the given result rows (each a JSON object's text).
std::string write_rows(const std::string& path, const std::vector<std::string>& rows) {
  std::ofstream f(path);
  f << "{\"context\": {\"os\": \"test\"}, \"results\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i)
    f << (i ? ",\n" : "") << rows[i];
  f << "\n]}\n";
  return path;
}

// A throughput row of 1e6 ints; `seconds` is written as given ("NaN" as Python writes it).
std::string timed_row(const std::string& container, const std::string& seconds) {
  return "{\"table\": \"throughput\", \"container\": \"" + container +
         "\", \"type\": \"int\", \"size\": 1000000, \"status\": \"ok\", \"seconds\": " + seconds +
         ", \"unstable\": false}";
}

std::string latency_row(const std::string& container, int p99) {
  return "{\"table\": \"latency\", \"container\": \"" + container +
         "\", \"type\": \"int\", \"size\": 1000000, \"status\": \"ok\", \"latency_ns\": "
         "{\"min\": 10, \"p50\": 20, \"p90\": 30, \"p99\": " +
         std::to_string(p99) + ", \"max\": 90000}}";
}

}  // namespace

TEST_SUITE("bench") {
  TEST_CASE("reservoir-bench compare: only the library's contenders gate; the output says why") {
    const test::TempDir dir("reservoir-compare");
    const auto base = write_rows(dir.file("base.json"),
                                 {timed_row("vector", "0.2"), timed_row("dynarray", "0.05"),
                                  timed_row("floor_huge", "0.04")});
    // The huge-page floor twice as slow against std::vector: a reference row, shown, not counted.
    const auto ref_slow = write_rows(dir.file("ref_slow.json"),
                                     {timed_row("vector", "0.2"), timed_row("dynarray", "0.05"),
                                      timed_row("floor_huge", "0.08")});
    auto r = run_compare({base, ref_slow});
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("ref, worse (not counted)") != std::string::npos);
    CHECK(r.output.find("REGRESSED") == std::string::npos);
    CHECK(r.output.find("better (+) or worse (-)") != std::string::npos);  // the sign, explained
    CHECK(r.output.find("2 cells compared, 0 regressed by more than 10% of 1 gated") !=
          std::string::npos);
    // DynArray 10x slower: it gates, whatever the reference rows do.
    const auto own_slow = write_rows(dir.file("own_slow.json"),
                                     {timed_row("vector", "0.2"), timed_row("dynarray", "0.5"),
                                      timed_row("floor_huge", "0.04")});
    r = run_compare({base, own_slow});
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("REGRESSED") != std::string::npos);
    CHECK(r.output.find("-90.0%") != std::string::npos);
  }

  TEST_CASE("reservoir-bench compare: a time that is not a finite positive number is exit 2") {
    const test::TempDir dir("reservoir-compare");
    const auto good = write_rows(dir.file("good.json"),
                                 {timed_row("vector", "0.2"), timed_row("dynarray", "0.05")});
    // Python's json.dump writes NaN and Infinity; negative or zero times switch the check off.
    for (const std::string bad :
         {"NaN", "Infinity", "-Infinity", "-0.05", "0", "null", "\"fast\""}) {
      CAPTURE(bad);
      const auto file = write_rows(dir.file("bad_seconds.json"),
                                   {timed_row("vector", "0.2"), timed_row("dynarray", bad)});
      for (const auto& args : {std::vector<std::string>{file, good}, {good, file}}) {
        const auto r = run_compare(args);
        INFO(r.output);
        CHECK(r.exit_code == 2);  // the message (on stderr): bench_usage.compare_* in CMakeLists
        CHECK(r.output.find("cells compared") == std::string::npos);
      }
      // The baseline's time likewise.
      const auto base_bad = write_rows(dir.file("bad_base.json"),
                                       {timed_row("vector", bad), timed_row("dynarray", "0.05")});
      const auto r = run_compare({base_bad, good});
      CHECK(r.exit_code == 2);
    }
  }

  TEST_CASE("reservoir-bench compare: latency-only files compare, shown and not gated") {
    const test::TempDir dir("reservoir-compare");
    const auto base = write_rows(dir.file("lat_base.json"),
                                 {latency_row("vector", 100), latency_row("dynarray", 100)});
    const auto worse = write_rows(dir.file("lat_new.json"),
                                  {latency_row("vector", 100), latency_row("dynarray", 400)});
    const auto r = run_compare({base, worse});
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("latency") != std::string::npos);
    CHECK(r.output.find("-75.0%") != std::string::npos);
    CHECK(r.output.find("1 cells compared, 0 regressed by more than 10% of 0 gated") !=
          std::string::npos);
  }
}

namespace {

std::string slurp_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream contents;
  contents << f.rdbuf();
  return contents.str();
}

// Sets an environment variable for the children started while it lives.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
#if defined(_WIN32)
    ::_putenv_s(name, value);
#else
    ::setenv(name, value, 1);
#endif
  }
  ~ScopedEnv() {
#if defined(_WIN32)
    ::_putenv_s(name_, "");
#else
    ::unsetenv(name_);
#endif
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace

TEST_SUITE("bench") {
  TEST_CASE("the JSON reader takes deep nesting without a crash: unclosed is an error") {
    // 100k unclosed [ must not overflow the stack of a reader that recursed per level; the parser
    // and destructor keep their own stack.
    // parse() is warn_unused_result, which a cast to void does not silence under GCC.
    const auto parse = [](const std::string& text) { return nlohmann::json::parse(text).size(); };
    const std::string deep(100'000, '[');
    CHECK_THROWS_AS((void)parse(deep), nlohmann::json::parse_error);
    CHECK(nlohmann::json::parse(deep + std::string(100'000, ']')).is_array());
    const std::string objects = std::string(1000, '{') + "\"a\":1";
    CHECK_THROWS_AS((void)parse(objects), nlohmann::json::parse_error);
  }

  TEST_CASE("reservoir-bench compare: deeply nested input is exit 2 with a message, not a crash") {
    const test::TempDir dir("reservoir-compare");
    const auto base = write_bench_json(dir.file("compare_base.json"), 0.2, 0.05);
    const std::string deep = dir.file("compare_deep.json");
    {
      std::ofstream f(deep);
      f << std::string(100'000, '[');
    }
    rb::ProcessResult r;
    REQUIRE_FALSE(rb::run_process(bench_path(), {"compare", base, deep}, &r));
    CHECK(r.exited);  // not SIGSEGV
    CHECK(r.exit_code == 2);
  }

  TEST_CASE("number options that are not finite are usage errors (nan would switch a check off)") {
    for (std::vector<std::string> args : {std::vector<std::string>{"--cell-budget", "nan"},
                                          {"--cell-budget", "inf"},
                                          {"--cell-budget", "-1"},
                                          {"--budget", "nan"},
                                          {"compare", "a.json", "b.json", "--threshold", "nan"},
                                          {"compare", "a.json", "b.json", "--threshold", "-inf"}}) {
      CAPTURE(args[args.size() - 2]);
      CAPTURE(args.back());
      rb::ProcessResult r;
      REQUIRE_FALSE(rb::run_process(bench_path(), args, &r));
      CHECK(r.exited);
      CHECK(r.exit_code == 2);
      CHECK(r.output.find("1. Peak memory") == std::string::npos);
    }
  }

  TEST_CASE("two result options naming one file are refused before anything is written") {
    const test::TempDir dir("reservoir-bench-same");
    const std::string file = dir.file("results.out");
    {
      std::ofstream f(file);
      f << "an earlier run's results";
    }
    const std::string same = dir.file(".") + "/results.out";
    for (std::vector<std::string> args :
         {std::vector<std::string>{"--json", file, "--csv", file},
          {"--csv", file, "--markdown", same},
          {"--json", file, "--markdown", dir.file("other.md"), "--csv", same}}) {
      rb::ProcessResult r;
      REQUIRE_FALSE(rb::run_process(bench_path(), args, &r));
      CHECK(r.exited);
      CHECK(r.exit_code == 2);
      CHECK(r.output.find("1. Peak memory") == std::string::npos);
      CHECK(slurp_file(file) == "an earlier run's results");
    }
  }

  TEST_CASE("a reservation too small for the cells' data is refused before any cell runs") {
    rb::ProcessResult r;
    REQUIRE_FALSE(rb::run_process(bench_path(), {"--reserve", "1", "--sizes", "1e3"}, &r));
    CHECK(r.exited);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("1. Peak memory") == std::string::npos);
    // Enough for the data: it runs.
    REQUIRE_FALSE(rb::run_process(bench_path(),
                                  {"--reserve", "4K", "--sizes", "1e3", "--only", "memory",
                                   "--containers", "dynarray", "--reps", "1"},
                                  &r));
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("a throughput cell of one element ends in its budget; --granule is the arena's only") {
    const test::TempDir dir("reservoir-bench-tiny");
    const std::string json_file = dir.file("tiny.json");
    rb::ProcessResult r;
    // A cell of one element is timed over a batch of about two million builds: reading the huge
    // pages in use after each of them would take a minute.
    REQUIRE_FALSE(rb::run_process(
        bench_path(),
        {"--only", "throughput,memory", "--sizes", "1", "--types", "int", "--containers", "vector",
         "--reps", "1", "--cell-budget", "20", "--granule", "1T", "--json", json_file},
        &r));
    INFO(r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(slurp_file(json_file));
    std::map<std::string, std::string> status;
    for (const auto& res : doc.at("results"))
      status[str(res, "table")] = str(res, "status");
    CHECK(status["throughput"] == "ok");
    CHECK(status["memory"] == "ok");  // a std::vector does not commit in the arena's granules
  }

  TEST_CASE("every Collatz contender fills the memo right; the check finds a wrong or short one") {
    // Enough blocks for threads to flush out of turn if a contender let them: 98 of 1024.
    constexpr std::uint64_t n = 100'000;
    std::vector<std::uint32_t> direct(n);
    for (std::uint64_t i = 0; i < n; ++i)
      direct[i] = collatz::direct_length(i + 1);
    using Memo = reservoir::ConcurrentDynArray<std::uint32_t>;
    const auto every_element_right = [&direct](const Memo& m) {
      if (m.size() != direct.size()) return false;
      for (std::size_t i = 0; i < direct.size(); ++i) {
        if (m[i] != direct[i]) return false;
      }
      return true;
    };
    for (unsigned threads : {1u, 3u}) {
      CAPTURE(threads);
      Memo a{reservoir::max_elements(n)};
      (void)collatz::with_concurrent_dynarray(n, threads, a);
      CHECK_NOTHROW(collatz::check(a, n));
      CHECK(every_element_right(a));
      Memo b{reservoir::max_elements(n)};
      (void)collatz::with_concurrent_dynarray_writer(n, threads, b);
      CHECK_NOTHROW(collatz::check(b, n));
      CHECK(every_element_right(b));
      Memo c{reservoir::max_elements(n)};
      (void)collatz::with_concurrent_dynarray_blocks(n, threads, c);
      CHECK_NOTHROW(collatz::check(c, n));
      CHECK(every_element_right(c));
    }
    std::vector<std::uint32_t> v;
    (void)collatz::with_vector_shared_mutex(5000, 1, v);
    CHECK_NOTHROW(collatz::check(v, 5000));
    std::swap(v[96], v[97]);  // two elements out of order (118 and 25), one of them sampled
    CHECK_THROWS_AS(collatz::check(v, 5000), std::logic_error);
    std::swap(v[96], v[97]);
    v.pop_back();
    CHECK_THROWS_AS(collatz::check(v, 5000), std::logic_error);
  }

  TEST_CASE(
      "the Collatz table at its smallest memo (1000 numbers, under one block) runs every cell") {
    const test::TempDir dir("reservoir-bench-collatz-small");
    const std::string json_file = dir.file("collatz.json");
    rb::ProcessResult r;
    REQUIRE_FALSE(rb::run_process(bench_path(),
                                  {"--only", "collatz", "--sizes", "1e3", "--threads", "1,2",
                                   "--reps", "1", "--cell-budget", "60", "--json", json_file},
                                  &r));
    INFO(r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(slurp_file(json_file));
    int cells = 0;
    for (const auto& res : doc.at("results")) {
      CAPTURE(str(res, "container"));
      CHECK(str(res, "status") == "ok");
      ++cells;
    }
    CHECK(cells == 4 * 2);  // 4 contenders x 2 thread counts
  }

  TEST_CASE("a cell that hangs is ended at its budget on every OS; the run goes on and says so") {
    const test::TempDir dir("reservoir-bench-hung");
    const std::string json_file = dir.file("hung.json");
    const ScopedEnv hang("RESERVOIR_BENCH_HANG_CELL", "memory/dynarray");
    rb::ProcessResult r;
    const auto start = std::chrono::steady_clock::now();
    REQUIRE_FALSE(rb::run_process(
        bench_path(),
        {"--only", "memory", "--sizes", "1e3", "--types", "int", "--containers", "dynarray,vector",
         "--reps", "1", "--cell-budget", "2", "--json", json_file},
        &r));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 0);  // a budget, like --budget, is the user's choice, not a failure
    CHECK(seconds < 120);     // ended by the budget, not by a test timeout
    const auto doc = nlohmann::json::parse(slurp_file(json_file));
    std::map<std::string, std::string> status;
    for (const auto& res : doc.at("results"))
      status[str(res, "container")] = str(res, "status");
    CHECK(status["dynarray"] == "timed out after 2 s");
    CHECK(status["vector"] == "ok");
  }

  TEST_CASE("a failed cell makes the run exit 1; every other result is still written") {
    const test::TempDir dir("reservoir-bench-failed");
    const std::string json_file = dir.file("failed.json");
    const ScopedEnv fail("RESERVOIR_BENCH_FAIL_CELL", "memory/dynarray");
    rb::ProcessResult r;
    REQUIRE_FALSE(
        rb::run_process(bench_path(),
                        {"--only", "memory", "--sizes", "1e3", "--types", "int", "--containers",
                         "dynarray,vector", "--reps", "1", "--json", json_file},
                        &r));
    INFO(r.output);
    CHECK(r.exited);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("failed on purpose") != std::string::npos);  // the note says why
    const auto doc = nlohmann::json::parse(slurp_file(json_file));
    std::map<std::string, std::string> status;
    for (const auto& res : doc.at("results"))
      status[str(res, "container")] = str(res, "status");
    CHECK(status["dynarray"].find("failed on purpose") != std::string::npos);
    CHECK(status["vector"] == "ok");
  }
}

TEST_SUITE("bench") {
  TEST_CASE("no cell outlives the bench, whatever ends the bench mid-cell") {
    namespace rp = reservoir::process;
    // Each way the bench may end while a cell runs: the cell hangs (its budget of 60 s would end
    // it a minute later) and must be gone within a second of the bench. SIGKILL, which the bench
    // cannot see, and TerminateProcess are the OS's part; SIGTERM and SIGINT the bench's own.
#if defined(_WIN32)
    const std::vector<std::pair<std::string, int>> ends = {{"TerminateProcess", 0}};
#else
    const std::vector<std::pair<std::string, int>> ends = {
        {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT}, {"SIGKILL", SIGKILL}};
#endif
    for (const auto& end : ends) {
      // Not a structured binding: clang 14 cannot capture one in CAPTURE's lambda.
      const std::string& how = end.first;
      [[maybe_unused]] const int sig = end.second;  // unused where ends are not signals
      CAPTURE(how);
      const test::TempDir dir("reservoir-bench-end");
      const std::string pid_file = dir.file("cell.pid");
      const ScopedEnv hang("RESERVOIR_BENCH_HANG_CELL", "memory/dynarray");
      const ScopedEnv tell("RESERVOIR_BENCH_HANG_PID_FILE", pid_file.c_str());
      rp::Child bench;
      REQUIRE_FALSE(bench.start(
          bench_path(), {"--only", "memory", "--sizes", "1e3", "--types", "int", "--containers",
                         "dynarray", "--reps", "1", "--cell-budget", "60"}));
      // The cell is running once its process id and newline are in the file.
      long cell = 0;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (cell == 0 && std::chrono::steady_clock::now() < deadline) {
        std::ifstream in(pid_file);
        std::string line;
        if (std::getline(in, line) && !in.eof()) {
          cell = std::stol(line);
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      REQUIRE(cell > 0);
      REQUIRE(rp::process_running(cell));
#if defined(_WIN32)
      REQUIRE_FALSE(bench.kill());
#else
      REQUIRE(::kill(static_cast<pid_t>(bench.id()), sig) == 0);
#endif
      rb::ProcessResult r;
      REQUIRE_FALSE(bench.wait(&r));
#if defined(_WIN32)
      CHECK(r.exited);
#else
      CHECK_FALSE(r.exited);
      CHECK(r.signal == sig);  // died of the signal itself, as if it had not caught it
#endif
      bool gone = false;
      for (int i = 0; i < 50 && !gone; ++i) {
        gone = !rp::process_running(cell);
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      CHECK_MESSAGE(gone, "the cell's process " << cell << " outlived the bench");
      if (!gone) (void)rp::kill_process(cell);  // leave nothing behind when this check fails
    }
  }
}
