// reservoir-bench table 1: peak memory of each contender building n elements.
#include "tour.hpp"

namespace reservoir::bench::tour {

namespace {

void run_memory(const Config& cfg, std::vector<Result>& out) {
  const std::uint64_t idle = cfg.idle_peak;
  Progress progress(!cfg.quiet, cfg.types.size() * cfg.sizes.size() * cfg.containers.size());
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
          cell = peak_cell(r->peak_bytes, r->data_bytes);
        } else if (r) {
          cell = r->status.rfind("skipped", 0) == 0 ? "skipped" : "FAILED";
        }
        fmt::print("  {:>22}", cell);
      }
      fmt::print("\n");
    }
  }
  fmt::print(
      "\n   below resolution: less than {} of data, or a peak no higher than an idle child's: "
      "within the\n   noise of an idle child's peak (the JSON keeps the figure); FAILED: see the "
      "notes at the end\n\n",
      format_bytes(kPeakResolution));
}

}  // namespace

const Table kMemoryTable = {"memory", run_memory, print_memory};

}  // namespace reservoir::bench::tour
