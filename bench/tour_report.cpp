// reservoir-bench: formatting, the run's context, and the JSON / CSV / Markdown files.
#include "tour.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>

#include "clock.hpp"
#include "context.hpp"

#ifndef RESERVOIR_BENCH_BUILD_TYPE
#define RESERVOIR_BENCH_BUILD_TYPE "unknown"
#endif

namespace reservoir::bench::tour {

namespace {

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

// The C library's reason for errno e, in words ("No such file or directory").
std::string os_reason(int e) {
  return e != 0 ? std::error_code(e, std::generic_category()).message() : "unknown error";
}

// Writes text to path: "" or what went wrong, in the OS's words. The flush and close are checked
// too: a full disk shows there, not at the write.
std::string write_file(const std::string& path, const std::string& text) {
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return os_reason(errno);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.flush();
  f.close();
  return f.fail() ? os_reason(errno) : "";
}

}  // namespace

std::string check_writable(const std::string& path) {
  errno = 0;
  if (std::fstream(path, std::ios::in | std::ios::out | std::ios::binary)) {
    return {};  // exists and opens for writing; kept as it is
  }
  if (errno != ENOENT) return os_reason(errno);
  errno = 0;
  if (!std::ofstream(path, std::ios::binary)) return os_reason(errno);  // a new file: can it be?
  std::remove(path.c_str());
  return {};
}

std::string format_ns(double ns) {
  if (ns < 1e3) return fmt::format("{:.0f} ns", ns);
  if (ns < 1e6) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.1f} ms", ns / 1e6);
  return fmt::format("{:.2f} s", ns / 1e9);
}

std::string format_seconds(double s) {
  return format_ns(s * 1e9);
}

std::string speed_ratio(double base, double mine) {
  if (base <= 0 || mine <= 0) return "-";
  const double x = base / mine;
  return x >= 1 ? fmt::format("{:.2f}x faster", x) : fmt::format("{:.2f}x slower", 1 / x);
}

std::string speed_ratio(const Result* base, const Result& mine) {
  if (!base || base == &mine || base->status != "ok" || mine.status != "ok") return "-";
  return speed_ratio(base->seconds, mine.seconds) + (base->unstable || mine.unstable ? " ?" : "");
}

std::string timed_ratio(double base_seconds, double mine_seconds) {
  if (base_seconds <= 0 || mine_seconds <= 0) return "-";
  if (base_seconds < kTimeResolution || mine_seconds < kTimeResolution) return "below resolution";
  return speed_ratio(base_seconds, mine_seconds);
}

std::string peak_cell(std::uint64_t peak_bytes, std::uint64_t data_bytes) {
  // A peak no higher than the idle child's says only that the baseline moved more than the data.
  if (data_bytes < kPeakResolution || peak_bytes == 0) return "below resolution";
  return fmt::format("{} ({:.2f}x)", format_bytes(peak_bytes),
                     static_cast<double>(peak_bytes) / static_cast<double>(data_bytes));
}

double ratio_value(const Result* base, const Result& mine) {
  if (!base || base->status != "ok" || mine.status != "ok" || mine.seconds <= 0) return 0;
  return base->seconds / mine.seconds;
}

Context make_context(const Config& cfg, std::uint64_t idle) {
  Context ctx;
  auto add = [&](std::string k, std::string v) {
    ctx.fields.emplace_back(std::move(k), std::move(v));
  };
  add("reservoir_version", fmt::format("{}.{}.{}", RESERVOIR_VERSION_MAJOR, RESERVOIR_VERSION_MINOR,
                                       RESERVOIR_VERSION_PATCH));
  add("os", rb::os_description());
  std::string cpu = "unknown";
#if defined(RESERVOIR_BENCH_HAVE_TSC) && (defined(__GNUC__) || defined(__clang__))
  {
    // The brand string (cpuid leaves 0x80000002..4) where the highest extended leaf reaches
    // them. cpuid itself exists on every x86-64 CPU. Not __builtin_cpu_supports: it needs
    // compiler-rt's __cpu_model, which not every toolchain links (Zig's does not).
    unsigned regs[12] = {};
    unsigned max_leaf = 0, unused_b = 0, unused_c = 0, unused_d = 0;
    __asm__ volatile("cpuid"
                     : "=a"(max_leaf), "=b"(unused_b), "=c"(unused_c), "=d"(unused_d)
                     : "a"(0x80000000u), "c"(0));
    if (max_leaf >= 0x80000004u) {
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
  add("huge_pages", cfg.huge_pages);
  reservoir::set_huge_pages(parse_huge_pages(cfg.huge_pages).value_or(HugePages::automatic));
  add("huge_pages_in_effect", reservoir::huge_pages_in_effect() ? "yes" : "no");
  add("host_reclaims_free_pages", pal::host_reclaims_free_pages() ? "yes" : "no");
  add("reps", std::to_string(cfg.reps));
  add("clock", rb::TickClock::name());
  add("clock_ns_per_tick", fmt::format("{:.6f}", cfg.ns_per_tick));
  add("clock_overhead_ns",
      fmt::format("{:.1f}", static_cast<double>(cfg.overhead_ticks) * cfg.ns_per_tick));
  add("idle_peak_bytes", std::to_string(idle));
  add("available_memory_bytes", std::to_string(rb::available_memory()));
  add("transparent_huge_pages", rb::thp_mode());
  add("overcommit_memory", rb::overcommit_mode());
  add("hypervisor", rb::hypervisor_present());
  add("load_average", rb::load_average());
  // Best of three: the cost of the fault itself, not of whatever else the machine was doing.
  static const char* kFaultKinds[] = {"fault_ns_per_page_rw_mmap", "fault_ns_per_page_mprotect",
                                      "fault_ns_per_page_populate", "fault_ns_per_page_huge"};
  for (int kind = 0; kind < 4; ++kind) {
    double best = 0;
    for (int i = 0; i < 3; ++i) {
      const double ns = rb::first_touch_ns_per_page(kind);
      if (ns > 0 && (best == 0 || ns < best)) best = ns;
    }
    add(kFaultKinds[kind], fmt::format("{:.0f}", best));
  }
  add("unstable_spread", fmt::format("{:g}", kUnstableSpread));
  add("cell_budget_seconds", fmt::format("{:g}", cfg.cell_budget));
  add("batch_elements", fmt::format("{}", cfg.batch_elements));
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

std::string write_json(const std::string& path, const Context& ctx, const std::vector<Result>& rs) {
  std::ostringstream f;
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
      } else if (r.table == "mixed") {
        const Result* base = find(rs, "mixed", "vector", r.type, r.size);
        f << ", \"iterations\": " << r.size << ", \"seconds\": " << json_number(r.seconds)
          << ", \"seconds_min\": " << json_number(r.seconds_min)
          << ", \"seconds_max\": " << json_number(r.seconds_max)
          << ", \"unstable\": " << (r.unstable ? "true" : "false")
          << ", \"vs_vector\": " << json_number(ratio_value(base, r))
          << ", \"peak_bytes\": " << r.peak_bytes << ", \"checksum\": " << json_string(r.checksum)
          << ", \"elements\": " << r.elements << ", \"arrays\": " << r.arrays << ", \"actions\": {";
        for (int a = 0; a < rb::mixed::kActions; ++a) {
          f << (a ? ", " : "") << json_string(rb::mixed::kActionNames[a])
            << ": {\"count\": " << r.action_counts[a]
            << ", \"seconds\": " << json_number(r.action_seconds[a]) << "}";
        }
        f << "}, \"samples\": [";
        for (std::size_t s = 0; s < r.samples.size(); ++s) {
          f << (s ? ", " : "") << json_number(r.samples[s]);
        }
        f << "]";
      } else if (r.table == "bulk") {
        f << ", \"seconds\": " << json_number(r.seconds)
          << ", \"warm_seconds\": " << json_number(r.warm_seconds);
      } else if (r.table == "many") {
        const Result* base = find(rs, "many", "vector", r.type, r.size);
        f << ", \"arrays\": " << r.arrays << ", \"seconds\": " << json_number(r.seconds)
          << ", \"seconds_min\": " << json_number(r.seconds_min)
          << ", \"seconds_max\": " << json_number(r.seconds_max)
          << ", \"destroy_seconds\": " << json_number(r.destroy_seconds)
          << ", \"rebuild_seconds\": " << json_number(r.rebuild_seconds)
          << ", \"redestroy_seconds\": " << json_number(r.redestroy_seconds)
          << ", \"churn_ns\": " << json_number(r.churn_ns)
          << ", \"churn2_ns\": " << json_number(r.churn2_ns)
          << ", \"churn_rss_growth_bytes\": " << r.churn_rss_growth
          << ", \"peak_bytes\": " << r.peak_bytes << ", \"data_bytes\": " << r.data_bytes
          << ", \"unstable\": " << (r.unstable ? "true" : "false")
          << ", \"vs_vector\": " << json_number(ratio_value(base, r));
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
            << ", \"vs_vector_populate\": " << json_number(ratio_value(pop, r))
            << ", \"huge_page_bytes\": " << r.huge_page_bytes;
          if (r.kernel_calls >= 0) f << ", \"kernel_calls\": " << r.kernel_calls;
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
  f << "\n  ]\n}\n";
  return write_file(path, f.str());
}

std::string write_csv(const std::string& path, const std::vector<Result>& rs) {
  std::ostringstream f;
  f << "table,container,type,size,status,peak_bytes,data_bytes,seconds,seconds_min,seconds_max,"
       "elements_per_second,min_ns,p50_ns,p90_ns,p99_ns,p99_9_ns,p99_99_ns,max_ns\n";
  for (const Result& r : rs) {
    std::string status = r.status;
    std::replace(status.begin(), status.end(), ',', ';');
    f << r.table << ',' << r.container << ',' << r.type << ',' << r.size << ',' << status << ',';
    const bool ok = r.status == "ok";
    const bool peak = r.table == "memory" || r.table == "mixed" || r.table == "many";
    f << (ok && peak ? std::to_string(r.peak_bytes) : "") << ','
      << (ok && r.table != "mixed" && peak ? std::to_string(r.data_bytes) : "") << ',';
    if (ok && (r.table == "throughput" || r.table == "concurrent" || r.table == "collatz" ||
               r.table == "mixed" || r.table == "many" || r.table == "bulk")) {
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
  return write_file(path, f.str());
}

std::string write_markdown(const std::string& path, const Config& cfg, const Context& ctx,
                           const std::vector<Result>& rs) {
  std::ostringstream f;
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
          f << ' ' << peak_cell(r->peak_bytes, r->data_bytes) << " |";
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
  // A row's first cells, "| type | size | container | ", and the status for a cell that did not
  // run: true if the row goes on.
  auto row_start = [&f](const Result& r, const std::string& size) {
    f << "| " << r.type << " | " << size << " | " << r.container << " | ";
    if (r.status != "ok") f << r.status << " | | | |\n";
    return r.status == "ok";
  };
  for (const Result& r : rs) {
    if (r.table != "throughput" || !row_start(r, rb::format_count(r.size))) continue;
    const Result* base = find(rs, "throughput", "vector", r.type, r.size);
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
  f << "\n## Mixed workload (median total; vs std::vector; peak above an idle child)\n\n"
       "| type | iterations | container | total | min..max | vs vector | peak |\n"
       "|---|---|---|---|---|---|---|\n";
  for (const Result& r : rs) {
    if (r.table != "mixed" || !row_start(r, std::to_string(r.size))) continue;
    const Result* base = find(rs, "mixed", "vector", r.type, r.size);
    f << format_seconds(r.seconds) << (r.unstable ? " ?" : "") << " | "
      << format_seconds(r.seconds_min) << ".." << format_seconds(r.seconds_max) << " | "
      << (r.container != "vector" ? speed_ratio(base, r) : "-") << " | "
      << format_bytes(r.peak_bytes) << " |\n";
  }
  return write_file(path, f.str());
}

}  // namespace reservoir::bench::tour
