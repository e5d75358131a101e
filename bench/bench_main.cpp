// reservoir-bench: peak memory, throughput and append latency of DynArray against std::vector,
// std::vector with reserve, and std::deque. Every measurement runs in a fresh child process (this
// same binary, re-executed with --child), so each peak is that cell's own and a cell that dies is
// reported as such while the bench goes on.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "clock.hpp"
#include "collatz.hpp"
#include "histogram.hpp"
#include "parse.hpp"
#include "table_mixed.hpp"
#include "workloads.hpp"

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
  std::vector<std::string> tables = {"memory",     "throughput", "latency",
                                     "concurrent", "collatz",    "mixed"};
  std::vector<std::uint64_t> threads = {1, 2, 4};  // the concurrent table; empty: skip it
  rb::mixed::TableOptions mixed;                   // the mixed table
  std::string json, csv, markdown;
  bool quiet = false;
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
  if (std::string_view(argv[3]) == "none") {  // the idle baseline
    std::printf("ok peak=%zu\n", pal::peak_rss());
    return 0;
  }
  const bool concurrent = table == "concurrent" || table == "collatz";
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
  std::uint64_t peak_bytes = 0, data_bytes = 0;                   // memory
  double seconds = 0, seconds_min = 0, seconds_max = 0, eps = 0;  // throughput
  std::vector<double> samples;                                    // throughput
  std::map<std::string, std::uint64_t> latency;                   // latency: min p50 ... d6
};

std::map<std::string, std::string> parse_fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  in >> word;  // "ok"
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

// Runs one child; returns its "ok ..." fields, or sets status to what went wrong.
std::map<std::string, std::string> run_cell(const Config& cfg, const std::string& table,
                                            const std::string& container, const std::string& type,
                                            std::uint64_t n, std::uint64_t batch,
                                            std::string* status) {
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
    return parse_fields(line);
  }
  if (line.rfind("error ", 0) == 0) {
    *status = line.substr(6);
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
  if (c == rb::Container::vector || c == rb::Container::pmr_arena ||
      c == rb::Container::pmr_monotonic) {
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
    fmt::print("  {:<24} {}\n", k, v);
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
  fmt::print("{:<11}{:>6}  {:<15}{:>11}  {:>21}  {:>12}  {:>14}\n", "type", "size", "container",
             "median", "min..max", "Melem/s", "vs vector");
  for (auto t : cfg.types) {
    for (auto n : cfg.sizes) {
      const Result* base = find(rs, "throughput", "vector", rb::name(t), n);
      for (auto c : cfg.containers) {
        const Result* r = find(rs, "throughput", rb::name(c), rb::name(t), n);
        if (!r) continue;
        if (r->status != "ok") {
          fmt::print("{:<11}{:>6}  {:<15}{}\n", r->type, rb::format_count(n), r->container,
                     r->status);
          continue;
        }
        fmt::print("{:<11}{:>6}  {:<15}{:>11}  {:>21}  {:>12.1f}  {:>14}\n", r->type,
                   rb::format_count(n), r->container, format_seconds(r->seconds),
                   format_seconds(r->seconds_min) + ".." + format_seconds(r->seconds_max),
                   r->eps / 1e6,
                   c == rb::Container::vector || !base || base->status != "ok"
                       ? std::string("-")
                       : speed_ratio(base->seconds, r->seconds));
      }
    }
  }
  fmt::print("\n");
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
        "4. Concurrent appends: T threads append {} ints in total (median of {} reps; _bulk: "
        "append_range\n   batches of {}; _readers: one more thread scans the published prefix "
        "meanwhile)\n\n",
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
               base && base != &r ? speed_ratio(base->seconds, r.seconds) : std::string("-"),
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
      } else if (r.table == "throughput" || r.table == "concurrent" || r.table == "collatz") {
        if (r.table != "throughput") f << ", \"threads\": " << r.threads;
        f << ", \"seconds\": " << json_number(r.seconds)
          << ", \"seconds_min\": " << json_number(r.seconds_min)
          << ", \"seconds_max\": " << json_number(r.seconds_max)
          << ", \"elements_per_second\": " << json_number(r.eps) << ", \"samples\": [";
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
      << (r.container != "vector" && base && base->status == "ok"
              ? speed_ratio(base->seconds, r.seconds)
              : "-")
      << " |\n";
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

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--child") return child_main(argc, argv);
  if (argc > 1 && std::string_view(argv[1]) == "--child-mixed") {
    return rb::mixed::child_main(argc, argv);
  }

  CLI::App app{
      "reservoir-bench: peak memory, throughput and append latency of reservoir::DynArray "
      "against std::vector, std::vector with reserve, and std::deque.\nRun without "
      "arguments for the quick tour (about a minute on 2 cores)."};
  Config cfg;
  std::string sizes = "1e3,1e6,1e7", containers = "dynarray,vector,vector_reserve,deque",
              types = "int,unique_ptr,string", granule = "64K", max_step = "2M", reserve, only;
  app.add_option("--sizes", sizes, "Element counts, e.g. 1e3,1e6,1e9 or 1K,1M,1G")
      ->capture_default_str();
  app.add_option("--containers", containers,
                 "Contenders: dynarray,vector,vector_reserve,deque (also: pmr_arena,pmr_monotonic)")
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
                 "Run one table: memory, throughput, latency, concurrent, collatz or mixed")
      ->check(CLI::IsMember({"memory", "throughput", "latency", "concurrent", "collatz", "mixed"}));
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
    if (!only.empty()) cfg.tables = {only};
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
