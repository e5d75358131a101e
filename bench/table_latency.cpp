// reservoir-bench table 3: the latency of every append, as percentiles and decades.
#include "tour.hpp"

#include "clock.hpp"

namespace reservoir::bench::tour {

namespace {

void run_latency(const Config& cfg, std::vector<Result>& out) {
  Progress progress(!cfg.quiet, cfg.types.size() * cfg.sizes.size() * cfg.containers.size());
  for (rb::Type t : cfg.types) {
    for (std::uint64_t n : cfg.sizes) {
      for (rb::Container c : cfg.containers) {
        Result r("latency", rb::name(c), rb::name(t), n);
        if (std::string why = skip_reason(c, t, n, cfg.granule); !why.empty()) {
          r.status = why;
        } else {
          progress.show(fmt::format("latency: {} {} {}", r.type, rb::format_count(n), r.container));
          // Small arrays: many builds, so the histogram has enough appends to mean something.
          const std::uint64_t elements = std::max<std::uint64_t>(1, cfg.batch_elements / 20);
          const std::uint64_t batch = n >= elements ? 1 : elements / n;
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

}  // namespace

const Table kLatencyTable = {"latency", run_latency, print_latency};

}  // namespace reservoir::bench::tour
