// reservoir-bench: the closing summary, one line per table that ran: the ratios a user came for
// (DynArray against std::vector and the floor at the largest size, and so on), with what one
// first-touch page fault costs here, since it decides most of them; then how to plot the run.
#include "tour.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace reservoir::bench::tour {

namespace {

// The cell of table/container/type at the largest size where it ran, or nullptr.
const Result* largest_ok(const std::vector<Result>& rs, std::string_view table,
                         std::string_view container, std::string_view type) {
  const Result* best = nullptr;
  for (const Result& r : rs) {
    if (r.table == table && r.container == container && r.type == type && r.status == "ok" &&
        (!best || r.size > best->size)) {
      best = &r;
    }
  }
  return best;
}

// "1.92x faster than std::vector" (times of the same work), "" if either did not run or took
// less than the resolution.
std::string versus(double base_s, double mine_s, std::string_view base_name) {
  if (base_s < kTimeResolution || mine_s < kTimeResolution) return {};
  return speed_ratio(base_s, mine_s) + " than " + std::string(base_name);
}

std::string context_field(const Context& ctx, std::string_view key) {
  for (const auto& [k, v] : ctx.fields) {
    if (k == key) return v;
  }
  return {};
}

// "1.3 us" from a context field of nanoseconds, "?" if unknown.
std::string fault_cost(const Context& ctx, std::string_view key) {
  const std::string v = context_field(ctx, key);
  const double ns = v.empty() ? 0 : std::strtod(v.c_str(), nullptr);
  return ns > 0 ? format_ns(ns) : std::string("?");
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    out += (out.empty() ? "" : "; ") + p;
  }
  return out.empty() ? "no cell to compare (see the notes above)" : out;
}

std::string throughput_line(const std::vector<Result>& rs, std::string_view type) {
  const Result* d = largest_ok(rs, "throughput", "dynarray", type);
  if (!d) return {};
  auto other = [&](const char* c) { return find(rs, "throughput", c, d->type, d->size); };
  auto time_of = [](const Result* r) { return r && r->status == "ok" ? r->seconds : 0.0; };
  std::vector<std::string> parts = {
      versus(time_of(other("vector")), d->seconds, "std::vector"),
      versus(time_of(other("vector_reserve")), d->seconds, "vector + exact reserve")};
  if (const double floor = time_of(other("floor")); floor >= kTimeResolution) {
    parts.push_back(fmt::format("{:.2f}x the floor's time", d->seconds / floor));
  }
  return fmt::format("{} {}: DynArray {}", d->type, rb::format_count(d->size), join(parts));
}

}  // namespace

void print_summary(const Config& cfg, const Context& ctx, const std::vector<Result>& rs) {
  auto ran = [&](const char* t) {
    return std::any_of(rs.begin(), rs.end(), [&](const Result& r) { return r.table == t; });
  };
  const std::string type = cfg.types.empty() ? "int" : rb::name(cfg.types.front());
  fmt::print(
      "\nSummary (ratios within this run; a first-touch page fault here costs {} in a fresh\n"
      "read-write mapping, {} in a populated one: it decides most of these ratios)\n\n",
      fault_cost(ctx, "fault_ns_per_page_rw_mmap"), fault_cost(ctx, "fault_ns_per_page_populate"));
  auto line = [](const char* table, const std::string& text) {
    fmt::print("  {:<12}{}\n", table, text.empty() ? std::string("no cell ran to the end") : text);
  };
  if (ran("memory")) {
    const Result* d = largest_ok(rs, "memory", "dynarray", type);
    std::string text;
    if (d && d->data_bytes >= kPeakResolution) {
      const Result* v = find(rs, "memory", "vector", d->type, d->size);
      text =
          fmt::format("{} {}: DynArray's peak {:.2f}x its data", d->type, rb::format_count(d->size),
                      static_cast<double>(d->peak_bytes) / static_cast<double>(d->data_bytes));
      if (v && v->status == "ok") {
        text += fmt::format(", std::vector's {:.2f}x", static_cast<double>(v->peak_bytes) /
                                                           static_cast<double>(v->data_bytes));
      }
    } else if (d) {
      text = "every size below the resolution of a peak (" + format_bytes(kPeakResolution) +
             " of data)";
    }
    line("memory", text);
  }
  if (ran("throughput")) line("throughput", throughput_line(rs, type));
  if (ran("latency")) {
    const Result* d = largest_ok(rs, "latency", "dynarray", type);
    std::string text;
    if (d) {
      text = fmt::format("{} {}: DynArray's worst append {}, p99.99 {}", d->type,
                         rb::format_count(d->size), format_ns(double(d->latency.at("max"))),
                         format_ns(double(d->latency.at("p99_99"))));
      const Result* v = find(rs, "latency", "vector", d->type, d->size);
      if (v && v->status == "ok") {
        text += fmt::format("; std::vector's {}, {}", format_ns(double(v->latency.at("max"))),
                            format_ns(double(v->latency.at("p99_99"))));
      }
    }
    line("latency", text);
  }
  for (const char* table : {"concurrent", "collatz"}) {
    if (!ran(table)) continue;
    const bool collatz = std::string_view(table) == "collatz";
    // The cell of container c at the most threads, and at 1 thread.
    auto at = [&](std::string_view c, std::uint64_t threads) {
      const Result* best = nullptr;
      for (const Result& r : rs) {
        if (r.table == table && r.container == c && r.status == "ok" &&
            (threads ? r.threads == threads : !best || r.threads > best->threads)) {
          best = &r;
        }
      }
      return best;
    };
    // A Writer per thread is how the README's headline appends; plain push_back beside it.
    const Result* w = at("concurrent_dynarray_writer", 0);
    const Result* p = at("concurrent_dynarray", w ? w->threads : 0);
    const Result* d = w ? w : p;
    std::string text;
    if (d) {
      const Result* base = at(collatz ? "vector_shared_mutex" : "vector_mutex", d->threads);
      const Result* one = at(d->container, 1);
      const char* base_name = collatz ? "std::vector + shared_mutex" : "std::vector + mutex";
      const double base_s = base ? base->seconds : 0;
      text = fmt::format(
          "{} threads: ConcurrentDynArray {}", d->threads,
          join({w ? "with a Writer per thread " + versus(base_s, w->seconds, base_name) : "",
                p ? "push_back " + versus(base_s, p->seconds, base_name) : "",
                one && one != d && d->seconds > 0
                    ? fmt::format("throughput vs 1 thread {:.2f}x", one->seconds / d->seconds)
                    : std::string()}));
    }
    line(table, text);
  }
  if (ran("timeline")) {
    std::vector<std::string> parts;
    std::uint64_t size = 0;
    for (const char* c : {"dynarray", "vector"}) {
      for (const Result& r : rs) {
        if (r.table == "timeline" && r.container == c && r.status == "ok" &&
            r.timeline.size() >= 2) {
          const std::uint64_t peak = r.timeline.back()[2] > r.timeline.front()[2]
                                         ? r.timeline.back()[2] - r.timeline.front()[2]
                                         : 0;
          parts.push_back(fmt::format(
              "{} peak {}", c == std::string_view("dynarray") ? "DynArray" : "std::vector",
              format_bytes(peak)));
          size = r.size;
        }
      }
    }
    line("timeline", parts.empty()
                         ? std::string()
                         : fmt::format("{} ints: {}", rb::format_count(size), join(parts)));
  }
  if (ran("mixed")) {
    // The type "all" (the four at once) when it ran, else the last type run.
    const Result* d = nullptr;
    for (const Result& r : rs) {
      if (r.table == "mixed" && r.container == "dynarray" && r.status == "ok" &&
          (!d || d->type != "all")) {
        d = &r;
      }
    }
    std::string text;
    if (d) {
      const Result* v = find(rs, "mixed", "vector", d->type, d->size);
      text = fmt::format(
          "{}, {} iterations: DynArray {}", d->type, d->size,
          join({versus(v && v->status == "ok" ? v->seconds : 0, d->seconds, "std::vector")}));
    }
    line("mixed", text);
  }
  if (ran("many")) {
    const Result* d = largest_ok(rs, "many", "dynarray", "int");
    std::string text;
    if (d) {
      const Result* v = find(rs, "many", "vector", "int", d->size);
      const bool have = v && v->status == "ok";
      text = fmt::format(
          "{} arrays of {} ints: DynArray {}", d->arrays, rb::format_count(d->size),
          join({have ? "build " + versus(v->seconds, d->seconds, "std::vector") : "",
                have ? "destroy " + versus(v->destroy_seconds, d->destroy_seconds, "std::vector")
                     : ""}));
    }
    line("many", text);
  }
  if (ran("bulk")) {
    std::uint64_t n = 0;
    for (const Result& r : rs) {
      if (r.table == "bulk" && r.status == "ok") n = std::max(n, r.size);
    }
    const Result* op = find(rs, "bulk", "append_range", "int", n);
    const Result* floor = find(rs, "bulk", "memcpy", "int", n);
    std::string text;
    if (op && floor && op->status == "ok" && floor->status == "ok" &&
        floor->seconds >= kTimeResolution && floor->warm_seconds >= kTimeResolution) {
      text = fmt::format("{} ints: append_range {:.2f}x memcpy's time cold, {:.2f}x warm",
                         rb::format_count(n), op->seconds / floor->seconds,
                         op->warm_seconds / floor->warm_seconds);
    }
    line("bulk", text);
  }
  fmt::print("\n");
  if (!cfg.json.empty()) {
    fmt::print("Figures: python3 scripts/plot_bench.py {} [OUT_DIR]", cfg.json);
  } else {
    fmt::print(
        "Figures: run again with --json FILE.json, then python3 scripts/plot_bench.py FILE.json "
        "[OUT_DIR]");
  }
  fmt::print(" (needs matplotlib: scripts/install-deps.sh plot)\n");
}

}  // namespace reservoir::bench::tour
