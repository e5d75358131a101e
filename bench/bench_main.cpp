// reservoir-bench: peak memory, throughput and append latency of DynArray against std::vector,
// std::vector with reserve, and std::deque. Every measurement runs in a fresh child process (this
// same binary, re-executed with --child), so each peak is that cell's own and a cell that dies is
// reported as such while the bench goes on.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "clock.hpp"
#include "collatz.hpp"
#include "context.hpp"
#include "histogram.hpp"
#include "json_mini.hpp"
#include "parse.hpp"
#include "table_mixed.hpp"
#include "timeline.hpp"
#include "workloads.hpp"

#if !defined(_WIN32)
#include <unistd.h>
#endif

#ifndef RESERVOIR_BENCH_BUILD_TYPE
#define RESERVOIR_BENCH_BUILD_TYPE "unknown"
#endif

namespace rb = reservoir::bench;
namespace pal = reservoir::pal;
using reservoir::format_bytes;

namespace {

// ---- configuration
// -------------------------------------------------------------------------------

struct Config {
  std::vector<std::uint64_t> sizes;
  std::vector<rb::Container> containers;
  std::vector<rb::Type> types;
  int reps = 3;
  std::uint64_t granule = reservoir::kDefaultCommitGranule;
  std::uint64_t max_step = reservoir::kDefaultMaxCommitStep;
  std::uint64_t reserve_bytes = 0;  // DynArray reservation; 0 = the library default
  bool prefault = reservoir::ArenaOptions{}.prefault;  // the library's defaults
  bool huge_pages = reservoir::ArenaOptions{}.huge_pages;
  std::vector<std::string> tables = {"memory",  "throughput", "latency", "concurrent",
                                     "collatz", "mixed",      "timeline"};
  std::vector<std::uint64_t> threads = {1, 2, 4};  // the concurrent table; empty: skip it
  rb::mixed::TableOptions mixed;                   // the mixed table
  std::string json, csv, markdown;
  bool quiet = false;
  double cell_budget = 60;  // seconds one child may run before it is killed
  double total_budget = 0;  // seconds for the whole run (0: none); later cells are skipped
  double ns_per_tick = 1.0;
  std::uint64_t overhead_ticks = 0;
};

reservoir::ArenaOptions arena_options(std::uint64_t granule, std::uint64_t max_step, bool prefault,
                                      bool huge) {
  reservoir::ArenaOptions o;
  o.commit_granule = granule;
  o.max_commit_step = max_step;
  o.prefault = prefault;
  o.huge_pages = huge;
  return o;
}

// ---- the child side
// ------------------------------------------------------------------------------
//   --child memory|throughput|latency CONTAINER TYPE SIZE GRANULE MAX_STEP PREFAULT HUGE BATCH
//           NS_PER_TICK RESERVE_BYTES
// prints one line "ok key=value ..." and exits 0; "error <what>" and exit 3 on an exception.

std::string percentiles_line(const rb::LogLinearHistogram& h) {
  std::string s = fmt::format("count={} min={} p50={} p90={} p99={} p99_9={} p99_99={} max={}",
                              h.count(), h.min(), h.percentile(50), h.percentile(90),
                              h.percentile(99), h.percentile(99.9), h.percentile(99.99), h.max());
  for (std::size_t d = 0; d < rb::LogLinearHistogram::kDecades; ++d) {
    s += fmt::format(" d{}={}", d, h.decades()[d]);
  }
  return s;
}

int child_main(int argc, char** argv) {
  if (argc != 13) {
    std::fprintf(stderr, "reservoir-bench: bad --child arguments\n");
    return 2;
  }
  const std::string table = argv[2];
#if !defined(_WIN32)
  // The cell budget: SIGALRM ends a child that outlives it, the parent reports the timeout.
  if (const char* budget = std::getenv("RESERVOIR_BENCH_CELL_BUDGET")) {
    const double seconds = std::strtod(budget, nullptr);
    if (seconds > 0) alarm(static_cast<unsigned>(std::ceil(seconds)));
  }
#endif
  if (std::string_view(argv[3]) == "none") {  // the idle baseline
    std::printf("ok peak=%zu\n", pal::peak_rss());
    return 0;
  }
  const bool concurrent = table == "concurrent" || table == "collatz" || table == "timeline";
  const auto container = concurrent ? std::optional<rb::Container>(rb::Container::dynarray)
                                    : rb::parse_enum(argv[3], rb::kAllContainers);
  const auto type = rb::parse_enum(argv[4], rb::kAllTypes);
  if (!container || !type) return 2;
  const std::uint64_t n = std::strtoull(argv[5], nullptr, 10);
  const auto options =
      arena_options(std::strtoull(argv[6], nullptr, 10), std::strtoull(argv[7], nullptr, 10),
                    argv[8][0] == '1', argv[9][0] == '1');
  const std::uint64_t batch = std::max<std::uint64_t>(1, std::strtoull(argv[10], nullptr, 10));
  const double ns_per_tick = std::strtod(argv[11], nullptr);
  const std::uint64_t reserve = std::strtoull(argv[12], nullptr, 10);
  try {
    if (table == "memory") {
      rb::NoLatency none;
      rb::with_type(*type,
                    [&]<class T>() { return rb::build<T>(*container, n, options, reserve, none); });
      const std::size_t peak = pal::peak_rss();
      if (peak == 0) {
        std::printf("error the OS did not report this process's peak memory\n");
        return 3;
      }
      std::printf("ok peak=%zu\n", peak);
    } else if (table == "throughput") {
      rb::NoLatency none;
      std::vector<double> times;
      for (std::uint64_t b = 0; b < batch; ++b) {
        times.push_back(rb::with_type(
            *type, [&]<class T>() { return rb::build<T>(*container, n, options, reserve, none); }));
      }
      const double total = std::accumulate(times.begin(), times.end(), 0.0);
      std::printf("ok seconds=%.9g\n", total / static_cast<double>(batch));
    } else if (table == "collatz") {
      double seconds = 0;
      if (std::string_view(argv[3]) == "concurrent_dynarray") {
        reservoir::ConcurrentDynArray<std::uint32_t> memo(reservoir::max_elements(n), options);
        seconds = collatz::with_concurrent_dynarray(n, static_cast<unsigned>(batch), memo);
        if (memo.size() != n) throw std::logic_error("collatz: memo incomplete");
      } else if (std::string_view(argv[3]) == "vector_shared_mutex") {
        std::vector<std::uint32_t> memo;
        seconds = collatz::with_vector_shared_mutex(n, static_cast<unsigned>(batch), memo);
        if (memo.size() != n) throw std::logic_error("collatz: memo incomplete");
      } else {
        return 2;
      }
      std::printf("ok seconds=%.9g\n", seconds);
    } else if (table == "timeline") {
      const std::string samples = rb::timeline_child(argv[3], n, options);
      std::printf("ok samples=%s\n", samples.c_str());
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

// ---- the parent side
// -----------------------------------------------------------------------------

struct Result {
  Result(std::string tbl, std::string cont, std::string typ, std::uint64_t n)
      : table(std::move(tbl)), container(std::move(cont)), type(std::move(typ)), size(n) {}
  std::string table, container, type;
  std::uint64_t size = 0;
  std::uint64_t threads = 0;  // concurrent table only
  std::string status = "ok";
  bool unstable = false;                         // max/min across repetitions above kUnstableSpread
  std::uint64_t peak_bytes = 0, data_bytes = 0;  // memory
  double seconds = 0, seconds_min = 0, seconds_max = 0, eps = 0;  // throughput
  std::vector<double> samples;                                    // throughput
  std::map<std::string, std::uint64_t> latency;                   // latency: min p50 ... d6
  std::vector<std::array<std::uint64_t, 3>> timeline;  // timeline: elements, rss, peak rss
};

// A cell whose slowest repetition took more than this times its fastest is marked unstable.
constexpr double kUnstableSpread = 1.5;

using SteadyClock = std::chrono::steady_clock;
const SteadyClock::time_point g_run_start = SteadyClock::now();

double seconds_since_start() {
  return std::chrono::duration<double>(SteadyClock::now() - g_run_start).count();
}

// Runs one child; returns its "ok ..." fields, or sets status to what went wrong. A child that
// outlives cfg.cell_budget is killed ("timed out after N s"); once cfg.total_budget is spent, no
// more children start ("skipped: ...").
std::map<std::string, std::string> run_cell(const Config& cfg, const std::string& table,
                                            const std::string& container, const std::string& type,
                                            std::uint64_t n, std::uint64_t batch,
                                            std::string* status) {
  if (cfg.total_budget > 0 && seconds_since_start() > cfg.total_budget) {
    *status = fmt::format("skipped: the run's budget of {:g} s is spent", cfg.total_budget);
    return {};
  }
  pal::ProcessResult r;
  const std::vector<std::string> args = {"--child",
                                         table,
                                         container,
                                         type,
                                         std::to_string(n),
                                         std::to_string(cfg.granule),
                                         std::to_string(cfg.max_step),
                                         cfg.prefault ? "1" : "0",
                                         cfg.huge_pages ? "1" : "0",
                                         std::to_string(batch),
                                         fmt::format("{:.12g}", cfg.ns_per_tick),
                                         std::to_string(cfg.reserve_bytes)};
  if (std::error_code ec = pal::run_process(pal::self_reexec_path(), args, &r)) {
    *status = "cannot start child: " + pal::describe(ec);
    return {};
  }
  std::string line = r.output.substr(0, r.output.find('\n'));
  if (r.exited && r.exit_code == 0 && line.rfind("ok", 0) == 0) {
    *status = "ok";
    return rb::parse_fields(line);
  }
  if (line.rfind("error ", 0) == 0) {
    *status = line.substr(6);
#if !defined(_WIN32)
  } else if (r.signal == SIGALRM) {
    *status = fmt::format("timed out after {:g} s", std::ceil(cfg.cell_budget));
#endif
  } else if (r.signal) {
    *status = fmt::format("killed by signal {}{}", r.signal,
                          r.signal == 9 ? " (SIGKILL: out of memory?)" : "");
  } else if (r.exception) {
    *status = fmt::format("died of exception 0x{:08X}", r.exception);
  } else {
    *status = fmt::format("exited with code {}", r.exit_code);
  }
  return {};
}

// The most memory a cell may need: std::vector holds old and new buffers while it reallocates
// (up to 3x the data), the others about 1x; plus the heap every unique_ptr owns.
std::uint64_t estimate_peak(rb::Container c, rb::Type t, std::uint64_t n, std::uint64_t granule) {
  const double data = static_cast<double>(n) * static_cast<double>(rb::element_size(t));
  double factor = 1.0;
  // A growing vector holds old and new buffers while it copies; pmr resources that never free
  // (monotonic, or an arena where the old buffer is not the last block) keep them all: ~2x.
  if (c == rb::Container::vector || c == rb::Container::vector_populate ||
      c == rb::Container::pmr_arena || c == rb::Container::pmr_monotonic) {
    factor = 3.0;
  }
  if (c == rb::Container::deque) factor = 1.1;
  return static_cast<std::uint64_t>(data * factor +
                                    static_cast<double>(n * rb::owned_heap_per_element(t))) +
         granule + (64u << 20);
}

// Returns "" if the cell fits in memory, else the reason to skip it.
std::string skip_reason(rb::Container c, rb::Type t, std::uint64_t n, std::uint64_t granule) {
  const std::uint64_t need = estimate_peak(c, t, n, granule);
  const std::uint64_t avail = pal::available_memory();
  if (avail != 0 && static_cast<double>(need) > 0.85 * static_cast<double>(avail)) {
    return fmt::format("skipped: needs ~{}, {} available", format_bytes(need), format_bytes(avail));
  }
  return {};
}

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && pal::stderr_is_terminal()) {}
  void show(const std::string& what) {
    if (enabled_) std::fprintf(stderr, "\r\033[K%s", what.c_str());
  }
  void done() {
    if (enabled_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
};

// How many builds one throughput/latency child does, so tiny sizes are timed over >= ~2 ms.
std::uint64_t batch_for(std::uint64_t n) {
  return n >= 1'000'000 ? 1 : 2'000'000 / n + 1;
}

// ---- the three tables
// ----------------------------------------------------------------------------

std::uint64_t idle_peak(const Config& cfg) {
  std::vector<std::uint64_t> peaks;
  for (int i = 0; i < 3; ++i) {
    std::string status;
    auto f = run_cell(cfg, "memory", "none", "none", 0, 1, &status);
    if (status == "ok") peaks.push_back(std::stoull(f["peak"]));
  }
  if (peaks.empty()) return 0;
  std::sort(peaks.begin(), peaks.end());
  return peaks[peaks.size() / 2];
}

void run_memory(const Config& cfg, std::uint64_t idle, std::vector<Result>& out) {
  Progress progress(!cfg.quiet);
  for (rb::Type t : cfg.types) {
    for (std::uint64_t n : cfg.sizes) {
      for (rb::Container c : cfg.containers) {
        Result r("memory", rb::name(c), rb::name(t), n);
        r.data_bytes = n * rb::element_size(t);
        if (std::string why = skip_reason(c, t, n, cfg.granule); !why.empty()) {
          r.status = why;
        } else {
          progress.show(fmt::format("memory: {} {} {}", r.type, rb::format_count(n), r.container));
          auto f = run_cell(cfg, "memory", r.container, r.type, n, 1, &r.status);
          if (r.status == "ok") {
            const std::uint64_t peak = std::stoull(f["peak"]);
            r.peak_bytes = peak > idle ? peak - idle : 0;
          }
        }
        out.push_back(std::move(r));
      }
    }
  }
  progress.done();
}

// Median, min and max of the repetitions, and elements per second.
void summarize(Result& r, std::uint64_t n) {
  if (r.status != "ok" || r.samples.empty()) return;
  std::vector<double> s = r.samples;
  std::sort(s.begin(), s.end());
  r.seconds = s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
  r.seconds_min = s.front();
  r.seconds_max = s.back();
  r.eps = r.seconds > 0 ? static_cast<double>(n) / r.seconds : 0;
  r.unstable = s.size() > 1 && r.seconds_min > 0 && r.seconds_max / r.seconds_min > kUnstableSpread;
}

void run_throughput(const Config& cfg, std::vector<Result>& out) {
  Progress progress(!cfg.quiet);
  for (rb::Type t : cfg.types) {
    for (std::uint64_t n : cfg.sizes) {
      std::vector<Result> cells;
      for (rb::Container c : cfg.containers) {
        Result r("throughput", rb::name(c), rb::name(t), n);
        if (std::string why = skip_reason(c, t, n, cfg.granule); !why.empty()) r.status = why;
        cells.push_back(std::move(r));
      }
      // Interleaved: every repetition runs every contender once, so drift hits all alike.
      for (int rep = 0; rep < cfg.reps; ++rep) {
        for (Result& r : cells) {
          if (r.status != "ok") continue;
          progress.show(fmt::format("throughput: {} {} rep {}/{} {}", r.type, rb::format_count(n),
                                    rep + 1, cfg.reps, r.container));
          auto f = run_cell(cfg, "throughput", r.container, r.type, n, batch_for(n), &r.status);
          if (r.status == "ok") r.samples.push_back(std::stod(f["seconds"]));
        }
      }
      for (Result& r : cells) {
        summarize(r, n);
        out.push_back(std::move(r));
      }
    }
  }
  progress.done();
}

// The concurrent table's size: the largest requested size, at most 1e6 (it runs 3 contenders x
// every thread count x reps, and contention shows at any size).
std::uint64_t concurrent_size(const Config& cfg) {
  return std::min<std::uint64_t>(*std::max_element(cfg.sizes.begin(), cfg.sizes.end()), 1'000'000);
}

// Table 4 (concurrent appends) and table 5 (the Collatz memo of Rojc & Depolli).
void run_concurrent(const Config& cfg, const char* table, std::vector<Result>& out) {
  Progress progress(!cfg.quiet);
  const bool collatz_table = std::string_view(table) == "collatz";
  // The memo workload is heavier per element (and the baseline serialises): a quarter the size.
  const std::uint64_t n = collatz_table ? std::max<std::uint64_t>(concurrent_size(cfg) / 4, 1000)
                                        : concurrent_size(cfg);
  static const std::vector<std::string> kCollatz = {"concurrent_dynarray", "vector_shared_mutex"};
  const std::vector<std::string> containers =
      collatz_table ? kCollatz
                    : std::vector<std::string>(std::begin(rb::kConcurrentContainers),
                                               std::end(rb::kConcurrentContainers));
  for (std::uint64_t threads : cfg.threads) {
    std::vector<Result> cells;
    for (const std::string& c : containers) {
      Result r(table, c, "int", n);
      r.threads = threads;
      if (std::string why = skip_reason(rb::Container::vector, rb::Type::int_, n, cfg.granule);
          !why.empty()) {
        r.status = why;
      }
      cells.push_back(std::move(r));
    }
    for (int rep = 0; rep < cfg.reps; ++rep) {
      for (Result& r : cells) {
        if (r.status != "ok") continue;
        progress.show(fmt::format("{}: {} threads rep {}/{} {}", table, threads, rep + 1, cfg.reps,
                                  r.container));
        auto f = run_cell(cfg, table, r.container, "int", n, threads, &r.status);
        if (r.status == "ok") r.samples.push_back(std::stod(f["seconds"]));
      }
    }
    for (Result& r : cells) {
      summarize(r, n);
      out.push_back(std::move(r));
    }
  }
  progress.done();
}

// The memory timeline's size: the largest requested size, at most 1e7 (the figure's shape shows
// at any size; 1e7 ints keep it under a second per contender).
std::uint64_t timeline_size(const Config& cfg) {
  return std::min<std::uint64_t>(*std::max_element(cfg.sizes.begin(), cfg.sizes.end()), 10'000'000);
}

void run_timeline(const Config& cfg, std::vector<Result>& out) {
  Progress progress(!cfg.quiet);
  const std::uint64_t n = timeline_size(cfg);
  for (const char* c : rb::kTimelineContainers) {
    Result r("timeline", c, "int", n);
    if (std::string why = skip_reason(rb::Container::vector, rb::Type::int_, n, cfg.granule);
        !why.empty()) {
      r.status = why;
    } else {
      progress.show(fmt::format("timeline: {} {}", rb::format_count(n), c));
      auto f = run_cell(cfg, "timeline", c, "int", n, 1, &r.status);
      if (r.status == "ok") {
        std::stringstream in(f["samples"]);
        std::string item;
        while (std::getline(in, item, ',')) {
          std::array<std::uint64_t, 3> s{};
          if (std::sscanf(item.c_str(), "%" SCNu64 ":%" SCNu64 ":%" SCNu64, &s[0], &s[1], &s[2]) ==
              3) {
            r.timeline.push_back(s);
          }
        }
      }
    }
    out.push_back(std::move(r));
  }
  progress.done();
}

void run_latency(const Config& cfg, std::vector<Result>& out) {
  Progress progress(!cfg.quiet);
  for (rb::Type t : cfg.types) {
    for (std::uint64_t n : cfg.sizes) {
      for (rb::Container c : cfg.containers) {
        Result r("latency", rb::name(c), rb::name(t), n);
        if (std::string why = skip_reason(c, t, n, cfg.granule); !why.empty()) {
          r.status = why;
        } else {
          progress.show(fmt::format("latency: {} {} {}", r.type, rb::format_count(n), r.container));
          // Small arrays: many builds, so the histogram has enough appends to mean something.
          const std::uint64_t batch = n >= 100'000 ? 1 : 100'000 / n;
          auto f = run_cell(cfg, "latency", r.container, r.type, n, batch, &r.status);
          if (r.status == "ok") {
            for (const auto& [k, v] : f) {
              if (k != "seconds") r.latency[k] = std::stoull(v);
            }
          }
        }
        out.push_back(std::move(r));
      }
    }
  }
  progress.done();
}

// ---- printing
// ------------------------------------------------------------------------------------

std::string format_ns(double ns) {
  if (ns < 1e3) return fmt::format("{:.0f} ns", ns);
  if (ns < 1e6) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.1f} ms", ns / 1e6);
  return fmt::format("{:.2f} s", ns / 1e9);
}
std::string format_seconds(double s) {
  return format_ns(s * 1e9);
}

const Result* find(const std::vector<Result>& rs, const std::string& table, const std::string& c,
                   const std::string& t, std::uint64_t n) {
  for (const Result& r : rs) {
    if (r.table == table && r.container == c && r.type == t && r.size == n) return &r;
  }
  return nullptr;
}

std::string speed_ratio(double base, double mine) {
  if (base <= 0 || mine <= 0) return "-";
  const double x = base / mine;
  return x >= 1 ? fmt::format("{:.2f}x faster", x) : fmt::format("{:.2f}x slower", 1 / x);
}

// The ratio of two timed cells, "-" when either has no time, and "?" appended when either is
// unstable: no ratio is printed against a shaky baseline without saying so.
std::string speed_ratio(const Result* base, const Result& mine) {
  if (!base || base == &mine || base->status != "ok" || mine.status != "ok") return "-";
  return speed_ratio(base->seconds, mine.seconds) + (base->unstable || mine.unstable ? " ?" : "");
}
double ratio_value(const Result* base, const Result& mine) {
  if (!base || base->status != "ok" || mine.status != "ok" || mine.seconds <= 0) return 0;
  return base->seconds / mine.seconds;
}

struct Context {
  std::vector<std::pair<std::string, std::string>> fields;
};

Context make_context(const Config& cfg, std::uint64_t idle) {
  Context ctx;
  auto add = [&](std::string k, std::string v) {
    ctx.fields.emplace_back(std::move(k), std::move(v));
  };
  add("reservoir_version", fmt::format("{}.{}.{}", RESERVOIR_VERSION_MAJOR, RESERVOIR_VERSION_MINOR,
                                       RESERVOIR_VERSION_PATCH));
  add("os", pal::os_description());
  std::string cpu = "unknown";
#if defined(RESERVOIR_BENCH_HAVE_TSC) && (defined(__GNUC__) || defined(__clang__))
  {
    unsigned regs[12] = {};
    if (__builtin_cpu_supports("sse2")) {
      for (unsigned i = 0; i < 3; ++i) {
        unsigned a, b, c, d;
        __asm__ volatile("cpuid"
                         : "=a"(a), "=b"(b), "=c"(c), "=d"(d)
                         : "a"(0x80000002u + i), "c"(0));
        regs[i * 4] = a, regs[i * 4 + 1] = b, regs[i * 4 + 2] = c, regs[i * 4 + 3] = d;
      }
      char brand[49] = {};
      std::memcpy(brand, regs, 48);
      cpu = brand;
      cpu.erase(0, cpu.find_first_not_of(' '));
      cpu.erase(cpu.find_last_not_of(' ') + 1);
    }
  }
#endif
  add("cpu", cpu);
  add("page_size", std::to_string(pal::page_size()));
  add("allocation_granularity", std::to_string(pal::allocation_granularity()));
#if defined(__clang__)
  add("compiler",
      fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__));
#elif defined(__GNUC__)
  add("compiler", fmt::format("g++ {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__));
#elif defined(_MSC_VER)
  add("compiler", fmt::format("MSVC {}", _MSC_VER));
#endif
  add("build_type", RESERVOIR_BENCH_BUILD_TYPE);
#if defined(NDEBUG)
  add("assertions", "off");
#else
  add("assertions", "ON (debug build: numbers are meaningless)");
#endif
  add("commit_granule", std::to_string(cfg.granule));
  add("max_commit_step", std::to_string(cfg.max_step));
  add("dynarray_reserve_bytes",
      std::to_string(cfg.reserve_bytes ? cfg.reserve_bytes : reservoir::kDefaultReserveBytes));
  add("prefault", cfg.prefault ? "true" : "false");
  add("huge_pages", cfg.huge_pages ? "true" : "false");
  add("reps", std::to_string(cfg.reps));
  add("clock", rb::TickClock::name());
  add("clock_ns_per_tick", fmt::format("{:.6f}", cfg.ns_per_tick));
  add("clock_overhead_ns",
      fmt::format("{:.1f}", static_cast<double>(cfg.overhead_ticks) * cfg.ns_per_tick));
  add("idle_peak_bytes", std::to_string(idle));
  add("available_memory_bytes", std::to_string(pal::available_memory()));
  add("transparent_huge_pages", rb::thp_mode());
  add("overcommit_memory", rb::overcommit_mode());
  add("hypervisor", rb::hypervisor_present());
  // Best of three: the cost of the fault itself, not of whatever else the machine was doing.
  static const char* kFaultKinds[] = {"fault_ns_per_page_rw_mmap", "fault_ns_per_page_mprotect",
                                      "fault_ns_per_page_populate"};
  for (int kind = 0; kind < 3; ++kind) {
    double best = 0;
    for (int i = 0; i < 3; ++i) {
      const double ns = rb::first_touch_ns_per_page(kind);
      if (ns > 0 && (best == 0 || ns < best)) best = ns;
    }
    add(kFaultKinds[kind], fmt::format("{:.0f}", best));
  }
  add("unstable_spread", fmt::format("{:g}", kUnstableSpread));
  add("cell_budget_seconds", fmt::format("{:g}", cfg.cell_budget));
  return ctx;
}

bool is_debug_build() {
#if defined(NDEBUG)
  return std::string_view(RESERVOIR_BENCH_BUILD_TYPE) == "Debug";
#else
  return true;
#endif
}

void print_header(const Context& ctx) {
  fmt::print("reservoir-bench\n");
  for (const auto& [k, v] : ctx.fields)
    fmt::print("  {:<27} {}\n", k, v);
  if (is_debug_build()) {
    fmt::print(
        "\n  !!! WARNING: this is a DEBUG build. Its timings are meaningless; build with\n"
        "  !!! `cmake --preset release` (scripts/bench.sh does) before comparing anything.\n");
  }
  fmt::print("\n");
}

void print_memory(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print(
      "1. Peak memory: RSS above an idle process (peak working set on Windows), each cell in "
      "a fresh child;\n   (ratio) = peak / data, data = size * sizeof(T)\n\n");
  fmt::print("{:<11}{:>6}", "type", "size");
  for (auto c : cfg.containers)
    fmt::print("  {:>22}", rb::name(c));
  fmt::print("\n");
  for (auto t : cfg.types) {
    for (auto n : cfg.sizes) {
      fmt::print("{:<11}{:>6}", rb::name(t), rb::format_count(n));
      for (auto c : cfg.containers) {
        const Result* r = find(rs, "memory", rb::name(c), rb::name(t), n);
        std::string cell = "-";
        if (r && r->status == "ok") {
          cell =
              fmt::format("{} ({:.2f}x)", format_bytes(r->peak_bytes),
                          static_cast<double>(r->peak_bytes) / static_cast<double>(r->data_bytes));
        } else if (r) {
          cell = r->status.rfind("skipped", 0) == 0 ? "skipped" : "FAILED";
        }
        fmt::print("  {:>22}", cell);
      }
      fmt::print("\n");
    }
  }
  fmt::print("\n");
}

void print_throughput(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print(
      "2. Throughput: time to construct and fill (median of {} interleaved reps; min..max)\n\n",
      cfg.reps);
  fmt::print("{:<11}{:>6}  {:<16}{:>11}  {:>21}  {:>10}  {:>16}  {:>16}\n", "type", "size",
             "container", "median", "min..max", "Melem/s", "vs vector", "vs populated");
  for (auto t : cfg.types) {
    for (auto n : cfg.sizes) {
      const Result* base = find(rs, "throughput", "vector", rb::name(t), n);
      const Result* populated = find(rs, "throughput", "vector_populate", rb::name(t), n);
      for (auto c : cfg.containers) {
        const Result* r = find(rs, "throughput", rb::name(c), rb::name(t), n);
        if (!r) continue;
        if (r->status != "ok") {
          fmt::print("{:<11}{:>6}  {:<16}{}\n", r->type, rb::format_count(n), r->container,
                     r->status);
          continue;
        }
        fmt::print("{:<11}{:>6}  {:<16}{:>11}  {:>21}  {:>10.1f}  {:>16}  {:>16}\n", r->type,
                   rb::format_count(n), r->container, format_seconds(r->seconds),
                   format_seconds(r->seconds_min) + ".." + format_seconds(r->seconds_max) +
                       (r->unstable ? " ?" : ""),
                   r->eps / 1e6, speed_ratio(base, *r), speed_ratio(populated, *r));
      }
    }
  }
  fmt::print(
      "\n   vs populated: against std::vector whose buffers are populated when allocated; floor: "
      "one\n   populated buffer of the final size filled by a loop. ? = unstable: max/min of the "
      "reps > {:g}\n\n",
      kUnstableSpread);
}

void print_latency(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print("3. Append latency: every push_back timed ({}; clock overhead {:.0f} ns included)\n\n",
             rb::TickClock::name(), static_cast<double>(cfg.overhead_ticks) * cfg.ns_per_tick);
  fmt::print("{:<11}{:>6}  {:<15}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>10}\n", "type", "size",
             "container", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max");
  static const char* kKeys[] = {"min", "p50", "p90", "p99", "p99_9", "p99_99", "max"};
  for (auto t : cfg.types) {
    for (auto n : cfg.sizes) {
      for (auto c : cfg.containers) {
        const Result* r = find(rs, "latency", rb::name(c), rb::name(t), n);
        if (!r) continue;
        fmt::print("{:<11}{:>6}  {:<15}", r->type, rb::format_count(n), r->container);
        if (r->status != "ok") {
          fmt::print("{}\n", r->status);
          continue;
        }
        for (std::size_t i = 0; i < 7; ++i) {
          fmt::print(fmt::runtime(i == 6 ? "{:>10}" : "{:>9}"),
                     format_ns(static_cast<double>(r->latency.at(kKeys[i]))));
        }
        fmt::print("\n");
      }
    }
  }
  fmt::print("\n   Appends per latency decade (the seed articles' table)\n\n");
  fmt::print("{:<11}{:>6}  {:<15}{:>11}{:>9}{:>9}{:>8}{:>8}{:>8}{:>8}\n", "type", "size",
             "container", "<=1us", "<=10us", "<=100us", "<=1ms", "<=10ms", "<=100ms", ">100ms");
  for (auto t : cfg.types) {
    for (auto n : cfg.sizes) {
      for (auto c : cfg.containers) {
        const Result* r = find(rs, "latency", rb::name(c), rb::name(t), n);
        if (!r || r->status != "ok") continue;
        fmt::print("{:<11}{:>6}  {:<15}{:>11}", r->type, rb::format_count(n), r->container,
                   r->latency.at("d0"));
        for (int d = 1; d < 7; ++d)
          fmt::print(fmt::runtime(d < 3 ? "{:>9}" : "{:>8}"), r->latency.at(fmt::format("d{}", d)));
        fmt::print("\n");
      }
    }
  }
  fmt::print("\n");
}

void print_timeline(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print(
      "6. Memory timeline: resident set while one array of {} ints grows (current / peak,\n"
      "   above the child's start; all samples in the JSON, figure: scripts/plot_bench.py)\n\n",
      rb::format_count(timeline_size(cfg)));
  fmt::print("{:<16}", "container");
  for (int q = 1; q <= 4; ++q)
    fmt::print("{:>24}", fmt::format("at {}%", q * 25));
  fmt::print("\n");
  for (const Result& r : rs) {
    if (r.table != "timeline") continue;
    fmt::print("{:<16}", r.container);
    if (r.status != "ok" || r.timeline.size() < 2) {
      fmt::print("{}\n", r.status);
      continue;
    }
    const auto& start = r.timeline.front();
    for (int q = 1; q <= 4; ++q) {
      const std::uint64_t want = r.size * static_cast<std::uint64_t>(q) / 4;
      auto it = std::find_if(r.timeline.begin(), r.timeline.end(),
                             [&](const auto& s) { return s[0] >= want; });
      if (it == r.timeline.end()) it = std::prev(r.timeline.end());
      auto above = [&](std::uint64_t v, std::uint64_t base) { return v > base ? v - base : 0; };
      fmt::print("{:>24}", format_bytes(above((*it)[1], start[1])) + " / " +
                               format_bytes(above((*it)[2], start[2])));
    }
    fmt::print("\n");
  }
  fmt::print("\n");
}

void print_concurrent(const Config& cfg, const char* table, const std::vector<Result>& rs) {
  const bool collatz_table = std::string_view(table) == "collatz";
  const char* base_name = collatz_table ? "vector_shared_mutex" : "vector_mutex";
  if (collatz_table) {
    fmt::print(
        "5. Collatz memo (Rojc & Depolli): orbit lengths of 1..{} in one growing array shared "
        "by T threads\n   (median of {} reps)\n\n",
        rb::format_count(std::max<std::uint64_t>(concurrent_size(cfg) / 4, 1000)), cfg.reps);
  } else {
    fmt::print(
        "4. Concurrent appends: T threads append {} ints in total (median of {} reps; _writer: "
        "a Writer\n   per thread; _bulk: append_range batches of {}; _readers: one more thread "
        "scans the published\n   prefix meanwhile)\n\n",
        rb::format_count(concurrent_size(cfg)), cfg.reps, rb::kBulkBatch);
  }
  fmt::print("{:>8}  {:<28}{:>11}  {:>21}  {:>10}  {:>20}  {:>12}\n", "threads", "container",
             "median", "min..max", "Melem/s", fmt::format("vs {}", base_name), "vs 1 thread");
  for (const Result& r : rs) {
    if (r.table != table) continue;
    if (r.status != "ok") {
      fmt::print("{:>8}  {:<28}{}\n", r.threads, r.container, r.status);
      continue;
    }
    const Result* base = nullptr;
    const Result* single = nullptr;
    for (const Result& o : rs) {
      if (o.table != table || o.status != "ok") continue;
      if (o.container == base_name && o.threads == r.threads) base = &o;
      if (o.container == r.container && o.threads == 1) single = &o;
    }
    fmt::print("{:>8}  {:<28}{:>11}  {:>21}  {:>10.1f}  {:>20}  {:>12}\n", r.threads, r.container,
               format_seconds(r.seconds),
               format_seconds(r.seconds_min) + ".." + format_seconds(r.seconds_max), r.eps / 1e6,
               speed_ratio(base, r),
               single ? fmt::format("{:.2f}x", single->seconds / r.seconds) : std::string("-"));
  }
  fmt::print("\n");
}

// ---- machine-readable output
// ---------------------------------------------------------------------

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(ch));
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  return std::isfinite(v) ? fmt::format("{:.9g}", v) : "null";
}

// A JSON number as the context writes them: digits with at most one '.' inside.
bool is_number(const std::string& s) {
  const auto dot = s.find('.');
  return !s.empty() && s.find_first_not_of("0123456789.") == std::string::npos &&
         (dot == std::string::npos ||
          (dot > 0 && dot + 1 < s.size() && s.find('.', dot + 1) == std::string::npos));
}

void write_json(const std::string& path, const Context& ctx, const std::vector<Result>& rs,
                const std::vector<rb::mixed::Cell>& mixed) {
  std::ofstream f(path);
  f << "{\n  \"context\": {";
  for (std::size_t i = 0; i < ctx.fields.size(); ++i) {
    const auto& [k, v] = ctx.fields[i];
    f << (i ? ",\n    " : "\n    ") << json_string(k) << ": "
      << (is_number(v) ? v : json_string(v));
  }
  f << "\n  },\n  \"results\": [";
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const Result& r = rs[i];
    f << (i ? ",\n    {" : "\n    {") << "\"table\": " << json_string(r.table)
      << ", \"container\": " << json_string(r.container) << ", \"type\": " << json_string(r.type)
      << ", \"size\": " << r.size << ", \"status\": " << json_string(r.status);
    if (r.status == "ok") {
      if (r.table == "memory") {
        f << ", \"peak_bytes\": " << r.peak_bytes << ", \"data_bytes\": " << r.data_bytes;
      } else if (r.table == "timeline") {
        f << ", \"timeline\": [";
        for (std::size_t s = 0; s < r.timeline.size(); ++s) {
          f << (s ? ", [" : "[") << r.timeline[s][0] << ", " << r.timeline[s][1] << ", "
            << r.timeline[s][2] << "]";
        }
        f << "]";
      } else if (r.table == "throughput" || r.table == "concurrent" || r.table == "collatz") {
        if (r.table != "throughput") f << ", \"threads\": " << r.threads;
        f << ", \"seconds\": " << json_number(r.seconds)
          << ", \"seconds_min\": " << json_number(r.seconds_min)
          << ", \"seconds_max\": " << json_number(r.seconds_max)
          << ", \"elements_per_second\": " << json_number(r.eps)
          << ", \"unstable\": " << (r.unstable ? "true" : "false");
        if (r.table == "throughput") {
          const Result* base = find(rs, "throughput", "vector", r.type, r.size);
          const Result* pop = find(rs, "throughput", "vector_populate", r.type, r.size);
          f << ", \"vs_vector\": " << json_number(ratio_value(base, r))
            << ", \"vs_vector_populate\": " << json_number(ratio_value(pop, r));
        }
        f << ", \"samples\": [";
        for (std::size_t s = 0; s < r.samples.size(); ++s) {
          f << (s ? ", " : "") << json_number(r.samples[s]);
        }
        f << "]";
      } else {
        f << ", \"latency_ns\": {";
        const char* keys[] = {"min", "p50", "p90", "p99", "p99_9", "p99_99", "max"};
        for (std::size_t k = 0; k < 7; ++k) {
          f << (k ? ", " : "") << json_string(keys[k]) << ": " << r.latency.at(keys[k]);
        }
        f << "}, \"appends\": " << r.latency.at("count") << ", \"decades\": {";
        const char* decades[] = {"le_1us",  "le_10us",  "le_100us", "le_1ms",
                                 "le_10ms", "le_100ms", "gt_100ms"};
        for (int d = 0; d < 7; ++d) {
          f << (d ? ", " : "") << json_string(decades[d]) << ": "
            << r.latency.at(fmt::format("d{}", d));
        }
        f << "}";
      }
    }
    f << "}";
  }
  if (!mixed.empty()) f << (rs.empty() ? "\n    " : ",\n    ") << rb::mixed::json_rows(mixed);
  f << "\n  ]\n}\n";
}

void write_csv(const std::string& path, const std::vector<Result>& rs) {
  std::ofstream f(path);
  f << "table,container,type,size,status,peak_bytes,data_bytes,seconds,seconds_min,seconds_max,"
       "elements_per_second,min_ns,p50_ns,p90_ns,p99_ns,p99_9_ns,p99_99_ns,max_ns\n";
  for (const Result& r : rs) {
    std::string status = r.status;
    std::replace(status.begin(), status.end(), ',', ';');
    f << r.table << ',' << r.container << ',' << r.type << ',' << r.size << ',' << status << ',';
    const bool ok = r.status == "ok";
    f << (ok && r.table == "memory" ? std::to_string(r.peak_bytes) : "") << ','
      << (ok && r.table == "memory" ? std::to_string(r.data_bytes) : "") << ',';
    if (ok && (r.table == "throughput" || r.table == "concurrent" || r.table == "collatz")) {
      f << json_number(r.seconds) << ',' << json_number(r.seconds_min) << ','
        << json_number(r.seconds_max) << ',' << json_number(r.eps);
    } else {
      f << ",,,";
    }
    for (const char* k : {"min", "p50", "p90", "p99", "p99_9", "p99_99", "max"}) {
      f << ',' << (ok && r.table == "latency" ? std::to_string(r.latency.at(k)) : "");
    }
    f << '\n';
  }
}

void write_markdown(const std::string& path, const Config& cfg, const Context& ctx,
                    const std::vector<Result>& rs) {
  std::ofstream f(path);
  f << "# reservoir-bench\n\n";
  for (const auto& [k, v] : ctx.fields)
    f << "- " << k << ": " << v << "\n";
  f << "\n## Peak memory (above an idle process; ratio to data)\n\n| type | size |";
  for (auto c : cfg.containers)
    f << ' ' << rb::name(c) << " |";
  f << "\n|---|---|";
  for (std::size_t i = 0; i < cfg.containers.size(); ++i)
    f << "---|";
  f << "\n";
  for (auto t : cfg.types) {
    for (auto n : cfg.sizes) {
      f << "| " << rb::name(t) << " | " << rb::format_count(n) << " |";
      for (auto c : cfg.containers) {
        const Result* r = find(rs, "memory", rb::name(c), rb::name(t), n);
        if (r && r->status == "ok") {
          f << ' ' << format_bytes(r->peak_bytes)
            << fmt::format(" ({:.2f}x)", double(r->peak_bytes) / double(r->data_bytes)) << " |";
        } else {
          f << ' ' << (r ? r->status : "-") << " |";
        }
      }
      f << "\n";
    }
  }
  f << "\n## Throughput (median; min..max; vs std::vector)\n\n"
       "| type | size | container | median | min..max | Melem/s | vs vector |\n"
       "|---|---|---|---|---|---|---|\n";
  for (const Result& r : rs) {
    if (r.table != "throughput") continue;
    const Result* base = find(rs, "throughput", "vector", r.type, r.size);
    f << "| " << r.type << " | " << rb::format_count(r.size) << " | " << r.container << " | ";
    if (r.status != "ok") {
      f << r.status << " | | | |\n";
      continue;
    }
    f << format_seconds(r.seconds) << " | " << format_seconds(r.seconds_min) << ".."
      << format_seconds(r.seconds_max) << " | " << fmt::format("{:.1f}", r.eps / 1e6) << " | "
      << (r.container != "vector" ? speed_ratio(base, r) : "-") << " |\n";
  }
  f << "\n## Concurrent appends (ints, median)\n\n| threads | container | size | median | Melem/s "
       "|\n"
       "|---|---|---|---|---|\n";
  for (const Result& r : rs) {
    if (r.table != "concurrent") continue;
    f << "| " << r.threads << " | " << r.container << " | " << rb::format_count(r.size) << " | "
      << (r.status == "ok" ? format_seconds(r.seconds) : r.status) << " | "
      << (r.status == "ok" ? fmt::format("{:.1f}", r.eps / 1e6) : "") << " |\n";
  }
  f << "\n## Append latency\n\n| type | size | container | min | p50 | p90 | p99 | p99.9 | "
       "p99.99 | max | <=1us | <=10us | <=100us | <=1ms | <=10ms | <=100ms | >100ms |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Result& r : rs) {
    if (r.table != "latency") continue;
    f << "| " << r.type << " | " << rb::format_count(r.size) << " | " << r.container << " |";
    if (r.status != "ok") {
      f << ' ' << r.status << " |\n";
      continue;
    }
    for (const char* k : {"min", "p50", "p90", "p99", "p99_9", "p99_99", "max"}) {
      f << ' ' << format_ns(double(r.latency.at(k))) << " |";
    }
    for (int d = 0; d < 7; ++d)
      f << ' ' << r.latency.at(fmt::format("d{}", d)) << " |";
    f << "\n";
  }
}

template <class E, std::size_t N>
std::vector<E> parse_names(const std::string& list, const E (&all)[N], const char* what) {
  std::vector<E> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto e = rb::parse_enum(item, all);
    if (!e) {
      std::string known;
      for (E x : all)
        known += std::string(known.empty() ? "" : ", ") + rb::name(x);
      throw CLI::ValidationError(what, "unknown '" + item + "' (known: " + known + ")");
    }
    out.push_back(*e);
  }
  return out;
}

// ---- compare
// -----------------------------------------------------------------------------------
//   reservoir-bench compare BASE.json NEW.json [--threshold PCT]
// Every timed cell's ratio to its table's baseline (std::vector; vector_mutex, vector_shared_mutex
// for tables 4 and 5) and every memory cell's peak relative to std::vector's, in both files; the
// change of that ratio, so runs on different machines compare. Exit 1 if a stable cell got worse
// by more than PCT percent, 2 on bad input, 0 otherwise.

struct CompareCell {
  double ratio = 0;  // > 1: better than the baseline (speed), or peak / vector's peak (memory)
  bool unstable = false;
};

using CellKey = std::tuple<std::string, std::string, std::string, double, double>;

std::map<CellKey, CompareCell> compare_cells(const rb::json::Value& doc) {
  std::map<CellKey, CompareCell> out;
  const auto& results = doc["results"].arr;
  auto key_of = [](const rb::json::Value& r, const std::string& container) {
    return CellKey{r["table"].str, container, r["type"].str, r["size"].num,
                   r.has("threads") ? r["threads"].num : 0.0};
  };
  std::map<CellKey, const rb::json::Value*> by_key;
  for (const auto& r : results) {
    if (r["status"].str == "ok") by_key[key_of(r, r["container"].str)] = &r;
  }
  for (const auto& [key, r] : by_key) {
    const std::string& table = std::get<0>(key);
    if (table == "latency") continue;
    const std::string base_name = table == "concurrent" ? "vector_mutex"
                                  : table == "collatz"  ? "vector_shared_mutex"
                                                        : "vector";
    if (std::get<1>(key) == base_name) continue;
    auto bk = key;
    std::get<1>(bk) = base_name;
    const auto b = by_key.find(bk);
    if (b == by_key.end()) continue;
    const rb::json::Value& base = *b->second;
    CompareCell c;
    if (table == "memory") {
      if (base["peak_bytes"].num <= 0) continue;
      c.ratio = (*r)["peak_bytes"].num / base["peak_bytes"].num;
    } else {
      if ((*r)["seconds"].num <= 0) continue;
      c.ratio = base["seconds"].num / (*r)["seconds"].num;
      c.unstable = (r->has("unstable") && (*r)["unstable"].b) ||
                   (base.has("unstable") && base["unstable"].b);
    }
    out[key] = c;
  }
  return out;
}

int compare_main(int argc, char** argv) {
  CLI::App app{"reservoir-bench compare: each cell's change in its ratio to std::vector",
               "reservoir-bench compare"};
  std::string base_file, new_file;
  double threshold = 10;
  app.add_option("BASE", base_file, "JSON written by reservoir-bench --json")->required();
  app.add_option("NEW", new_file, "JSON written by reservoir-bench --json")->required();
  app.add_option("--threshold", threshold, "Percent a ratio may worsen before it counts")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::map<CellKey, CompareCell> cells[2];
  const std::string* files[2] = {&base_file, &new_file};
  for (int i = 0; i < 2; ++i) {
    std::ifstream in(*files[i]);
    if (!in) {
      std::fprintf(stderr, "reservoir-bench compare: cannot read %s\n", files[i]->c_str());
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    try {
      cells[i] = compare_cells(rb::json::parse(text.str()));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reservoir-bench compare: %s: not a reservoir-bench JSON file (%s)\n",
                   files[i]->c_str(), e.what());
      return 2;
    }
  }
  fmt::print("{:<11}{:<11}{:>6}{:>4}  {:<22}{:>10}{:>10}{:>10}\n", "table", "type", "size", "T",
             "container", "base", "new", "change");
  int regressions = 0, compared = 0;
  for (const auto& [key, nc] : cells[1]) {
    const auto bc = cells[0].find(key);
    if (bc == cells[0].end()) continue;
    const auto& [table, container, type, size, threads] = key;
    const bool memory = table == "memory";
    // Positive change: better. Memory ratios are better when smaller.
    const double change =
        memory ? (bc->second.ratio / nc.ratio - 1) * 100 : (nc.ratio / bc->second.ratio - 1) * 100;
    const bool unstable = nc.unstable || bc->second.unstable;
    const bool worse = change < -threshold;
    if (worse && !unstable) ++regressions;
    ++compared;
    fmt::print("{:<11}{:<11}{:>6}{:>4}  {:<22}{:>10.3f}{:>10.3f}{:>+9.1f}%{}\n", table, type,
               rb::format_count(static_cast<std::uint64_t>(size)),
               threads > 0 ? fmt::format("{:g}", threads) : std::string("-"), container,
               bc->second.ratio, nc.ratio, change,
               worse ? (unstable ? "  worse (unstable: not counted)" : "  REGRESSED")
                     : (unstable ? "  ?" : ""));
  }
  if (compared == 0) {
    std::fprintf(stderr, "reservoir-bench compare: the two files have no cell in common\n");
    return 2;
  }
  fmt::print("\n{} cells compared, {} regressed by more than {:g}%\n", compared, regressions,
             threshold);
  return regressions > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--child") return child_main(argc, argv);
  if (argc > 1 && std::string_view(argv[1]) == "compare") return compare_main(argc, argv);
  if (argc > 1 && std::string_view(argv[1]) == "--child-mixed") {
    return rb::mixed::child_main(argc, argv);
  }

  CLI::App app{
      "reservoir-bench: peak memory, throughput and append latency of reservoir::DynArray "
      "against std::vector, std::vector with reserve, and std::deque.\nRun without "
      "arguments for the quick tour (about a minute on 2 cores).\n"
      "reservoir-bench compare BASE.json NEW.json [--threshold PCT]: each cell's change in its "
      "ratio to std::vector; exit 1 on a regression."};
  Config cfg;
  std::string sizes = "1e3,1e6,1e7",
              containers = "dynarray,vector,vector_reserve,deque,vector_populate,floor",
              types = "int,unique_ptr,string", granule = "64K", max_step = "2M", reserve, only;
  app.add_option("--sizes", sizes, "Element counts, e.g. 1e3,1e6,1e9 or 1K,1M,1G")
      ->capture_default_str();
  app.add_option("--containers", containers,
                 "Contenders: dynarray,vector,vector_reserve,deque,vector_populate,floor (also: "
                 "pmr_arena,pmr_monotonic)")
      ->capture_default_str();
  app.add_option("--types", types, "Element types: int,unique_ptr,string")->capture_default_str();
  app.add_option("--reps", cfg.reps, "Throughput repetitions per cell (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--granule", granule, "DynArray commit granule, e.g. 4K, 64K, 2M")
      ->capture_default_str();
  app.add_option("--max-step", max_step, "DynArray largest commit step (= --granule: fixed steps)")
      ->capture_default_str();
  app.add_option("--reserve", reserve,
                 "DynArray reservation in bytes, e.g. 1G (default: the library's 64 GiB)");
  app.add_flag("--prefault,!--no-prefault", cfg.prefault,
               "DynArray: prefault each committed step (the library default: on)");
  app.add_flag("--huge-pages,!--no-huge-pages", cfg.huge_pages,
               "DynArray: ask for transparent huge pages (the library default: off)");
  std::string threads = "1,2,4";
  app.add_option("--threads", threads,
                 "Thread counts for the concurrent-append table (empty or 0: skip it)")
      ->capture_default_str();
  bool pin = false;
  app.add_flag("--pin", pin, "Concurrent table: pin thread t to CPU t (Linux; elsewhere ignored)");
  app.add_option("--only", only,
                 "Tables to run, e.g. latency,memory (memory, throughput, latency, concurrent, "
                 "collatz, mixed, timeline)");
  app.add_option("--cell-budget", cfg.cell_budget,
                 "Seconds one cell's child may run before it is killed (POSIX)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--budget", cfg.total_budget,
                 "Seconds for the whole run; cells after it are skipped (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  std::string mixed_iterations = "100";
  app.add_option("--mixed-iterations", mixed_iterations,
                 "Mixed table: iteration counts, e.g. 300 or 1000,3000")
      ->capture_default_str();
  std::string mixed_types = "int,string,array10,heap,all";
  app.add_option("--mixed-types", mixed_types,
                 "Mixed table: element types (int,string,array10,heap; all: the four at once)")
      ->capture_default_str();
  app.add_option("--json", cfg.json, "Write results as JSON (ns, bytes) to FILE");
  app.add_option("--csv", cfg.csv, "Write results as CSV to FILE");
  app.add_option("--markdown", cfg.markdown, "Write results as Markdown to FILE");
  app.add_flag("-q,--quiet", cfg.quiet, "Print no tables or progress (files only)");
  try {
    app.parse(argc, argv);
    cfg.sizes = rb::parse_count_list(sizes);
    cfg.mixed.iterations = rb::parse_count_list(mixed_iterations);
    cfg.mixed.types.clear();
    for (std::string_view rest = mixed_types; !rest.empty();) {
      const auto comma = rest.find(',');
      const std::string name(rest.substr(0, comma));
      if (std::find(std::begin(rb::mixed::kTypes), std::end(rb::mixed::kTypes), name) ==
          std::end(rb::mixed::kTypes)) {
        throw std::invalid_argument("--mixed-types: unknown type '" + name + "'");
      }
      cfg.mixed.types.push_back(name);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    cfg.containers = parse_names(containers, rb::kAllContainers, "--containers");
    cfg.types = parse_names(types, rb::kAllTypes, "--types");
    cfg.granule = rb::parse_bytes(granule);
    cfg.max_step = rb::parse_bytes(max_step);
    if (!reserve.empty()) cfg.reserve_bytes = rb::parse_bytes(reserve);
    if (!only.empty()) {
      const std::vector<std::string> known = cfg.tables;
      cfg.tables.clear();
      std::stringstream in(only);
      std::string item;
      while (std::getline(in, item, ',')) {
        if (std::find(known.begin(), known.end(), item) == known.end()) {
          throw std::invalid_argument("--only: unknown table '" + item +
                                      "' (known: memory, throughput, latency, concurrent, "
                                      "collatz, mixed, timeline)");
        }
        cfg.tables.push_back(item);
      }
    }
    if (pin) rb::request_pinning();  // inherited by the cells' child processes
    cfg.threads.clear();
    if (!threads.empty() && threads != "0") {
      for (std::uint64_t t : rb::parse_count_list(threads)) {
        if (t > 256) throw std::invalid_argument("--threads: at most 256");
        cfg.threads.push_back(t);
      }
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "reservoir-bench: %s\n", e.what());
    return 2;
  }
  if (cfg.granule % pal::page_size() != 0 || cfg.max_step % pal::page_size() != 0) {
    std::fprintf(stderr,
                 "reservoir-bench: --granule %s / --max-step %s: not a multiple of the page size "
                 "(%zu)\n",
                 granule.c_str(), max_step.c_str(), pal::page_size());
    return 2;
  }
  if (pal::self_executable_path().empty()) {
    std::fprintf(stderr, "reservoir-bench: cannot find my own executable to re-run it\n");
    return 1;
  }

#if !defined(_WIN32)
  // Read by every child (child_main): the cell budget.
  setenv("RESERVOIR_BENCH_CELL_BUDGET", fmt::format("{:g}", cfg.cell_budget).c_str(), 1);
#endif
  cfg.ns_per_tick = rb::TickClock::calibrate();
  cfg.overhead_ticks = rb::TickClock::overhead_ticks();
  const std::uint64_t idle = idle_peak(cfg);
  const Context ctx = make_context(cfg, idle);
  if (!cfg.quiet) print_header(ctx);
  if (is_debug_build()) std::fprintf(stderr, "reservoir-bench: WARNING: debug build\n");

  std::vector<Result> results;
  auto wanted = [&](const char* t) {
    return std::find(cfg.tables.begin(), cfg.tables.end(), t) != cfg.tables.end();
  };
  if (wanted("memory")) {
    run_memory(cfg, idle, results);
    if (!cfg.quiet) print_memory(cfg, results);
  }
  if (wanted("throughput")) {
    run_throughput(cfg, results);
    if (!cfg.quiet) print_throughput(cfg, results);
  }
  if (wanted("latency")) {
    run_latency(cfg, results);
    if (!cfg.quiet) print_latency(cfg, results);
  }
  for (const char* table : {"concurrent", "collatz"}) {
    if (wanted(table) && !cfg.threads.empty()) {
      run_concurrent(cfg, table, results);
      if (!cfg.quiet) print_concurrent(cfg, table, results);
    }
  }
  if (wanted("timeline")) {
    run_timeline(cfg, results);
    if (!cfg.quiet) print_timeline(cfg, results);
  }
  for (const Result& r : results) {
    if (r.status != "ok" && !cfg.quiet) {
      fmt::print("note: {} {} {} {}: {}\n", r.table, r.type, rb::format_count(r.size), r.container,
                 r.status);
    }
  }
  std::vector<rb::mixed::Cell> mixed;
  bool mixed_consistent = true;
  if (wanted("mixed")) {
    cfg.mixed.progress = !cfg.quiet;
    mixed = rb::mixed::run_table(cfg.mixed, &mixed_consistent);
    if (!cfg.quiet) rb::mixed::print_table(mixed);
  }
  if (!cfg.json.empty()) write_json(cfg.json, ctx, results, mixed);
  if (!cfg.csv.empty()) write_csv(cfg.csv, results);
  if (!cfg.markdown.empty()) write_markdown(cfg.markdown, cfg, ctx, results);
  std::fflush(stdout);
  if (!mixed_consistent) {
    std::fprintf(stderr, "reservoir-bench: mixed: containers disagree on the final contents\n");
    return 1;
  }
  return 0;
}
