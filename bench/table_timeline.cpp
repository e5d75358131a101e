// reservoir-bench table 6: resident memory sampled while one array grows.
#include "tour.hpp"

#include <cinttypes>
#include <sstream>

#include "timeline.hpp"

namespace reservoir::bench::tour {

namespace {

void run_timeline(const Config& cfg, std::vector<Result>& out) {
  Progress progress(!cfg.quiet, std::size(rb::kTimelineContainers));
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

}  // namespace

// The memory timeline's size: the largest requested size, at most 1e7 (the figure's shape shows
// at any size; 1e7 ints keep it under a second per contender).
std::uint64_t timeline_size(const Config& cfg) {
  return std::min<std::uint64_t>(*std::max_element(cfg.sizes.begin(), cfg.sizes.end()), 10'000'000);
}

const Table kTimelineTable = {"timeline", run_timeline, print_timeline};

}  // namespace reservoir::bench::tour
